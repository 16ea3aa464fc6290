// Package calib turns what a cluster measured into what the model uses.
//
//   - KeyOf derives a placement's PlacementShape (the key measurements are
//     stored under: GPU model, NVLink domain size, GPUs and NICs per node,
//     NIC rate, node count, fabric tiers crossed, NCCL version) from the
//     canonical graph, for imports and lookups alike.
//   - FromRun turns one parsed nccl-tests run (internal/nccltests) into an
//     import request: the collective, the forced algorithm and protocol
//     (flags, else the log's NCCL_ALGO/NCCL_PROTO, else NCCL's default).
//   - Lookup finds the measurements of a shape; At reads one at a size:
//     between measured sizes GIN's model of the cell (CellCurve) calibrated
//     by the measured/model ratio interpolated in log-size, above the
//     largest only from 64 MiB on, never below the smallest.
//   - SpreadAt is a measurement's run-to-run spread at a size (its
//     slower out-of-place/in-place cell over the faster), which Cell
//     carries to the plan's override rule and estimate's evidence.
//   - Index answers a communicator: its own shape's measurements, else
//     forced ring runs of a nearby node count scaled to it (scale.go).
//
// Storage is the replicated state (internal/state: PutMeasurement, one
// validation rule CheckMeasurement for the edge and the FSM).
package calib
