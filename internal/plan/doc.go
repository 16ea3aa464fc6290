// Package plan builds a job's plan: the deterministic decision table
// (communicator shape × collective × log2 size bucket → algorithm,
// protocol, channels, or "leave it to NCCL") that the NCCL tuner plugin
// applies on every rank. The same inputs always give byte-identical plans;
// the content hash covers everything but the pinning metadata.
//
// Node order is part of the plan: it is recorded in Plan.nodes and decides
// which node pairs ShapeOf samples, so the same nodes in another order are a
// different plan (a different content hash) even when the rules agree.
package plan
