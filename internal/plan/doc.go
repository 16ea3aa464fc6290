// Package plan builds a job's plan: the deterministic decision table
// (communicator shape × collective × log2 size bucket → algorithm,
// protocol, channels, or "leave it to NCCL") that the NCCL tuner plugin
// applies on every rank. The same inputs always give byte-identical plans;
// the content hash covers everything but the pinning metadata.
//
// A rule overrides NCCL on measurements of the communicator's shape, or,
// from the model alone, only where the fabric decides it or the pair of
// algorithms is in a validated regime (costmodel.Judge); elsewhere it keeps
// NCCL's choice and its reason says what GIN's model would prefer and why
// that is not enough.
//
// Node order is part of the plan: it is recorded in Plan.nodes and decides
// which node pairs ShapeOf samples, so the same nodes in another order are a
// different plan (a different content hash) even when the rules agree.
package plan
