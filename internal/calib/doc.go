// Package calib turns what a cluster measured into what the model uses.
//
//   - KeyOf derives a placement's PlacementShape (the key measurements are
//     stored under: GPU model, NVLink domain size, GPUs and NICs per node,
//     NIC rate, node count, fabric tiers crossed, NCCL version) from the
//     canonical graph, for imports and lookups alike.
//   - FromRun turns one parsed nccl-tests run (internal/nccltests) into an
//     import request: the collective, the forced algorithm and protocol
//     (flags, else the log's NCCL_ALGO/NCCL_PROTO, else NCCL's default).
//   - Lookup finds the measurements of a shape and interpolates their
//     points in size (log-log between measured sizes; no extrapolation
//     beyond the measured range except bandwidth-bound above it).
//
// Storage is the replicated state (internal/state: PutMeasurement, one
// validation rule CheckMeasurement for the edge and the FSM).
package calib
