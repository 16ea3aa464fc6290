// Package costmodel predicts NCCL collective times for a placement: NCCL's
// own model (latency + size / bandwidth per algorithm and protocol, with
// NCCL 2.30's default constants, reference nccl-plugin.md §6) plus what
// NCCL cannot see from one node: leaf/spine hops and oversubscription,
// degraded links (through the shape's NIC rate), Ethernet latency, the
// per-node NIC bytes of a 2- or 3-node tree, and what NVLS really delivers
// (the switch limit, NCCL's NVLS chunking in mid sizes, the NVLink bytes
// per GPU count, the fixed time multi-node NVLSTree measures on 4+ nodes:
// nvls.go). Plans, estimates and host ordering all use it.
//
// Two models share the code:
//   - PredictNCCL/CostNCCL: NCCL's model as NCCL computes it for the shape
//     (what NCCL would pick without a tuner);
//   - Predict/Cost: GIN's model, the same formulas with GIN's fabric
//     adjustments (see the constants below and docs/CALIBRATION.md).
//
// Judge (override.go) says on what a model-only preference for GIN's cell
// over NCCL's would stand: the fabric (Ideal restores a healthy fabric) or
// a regime validated by held-out published pairs (ValidatedRegimes); plans
// override NCCL on nothing else.
//
// ShapeOf derives a Shape from the canonical graph. Everything is pure and
// deterministic: the same Shape always gives the same numbers.
package costmodel
