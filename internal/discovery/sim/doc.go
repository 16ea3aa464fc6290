// Package sim simulates the hardware of GPU nodes and of the scale-out
// fabric between them, so that every part of GIN can run and be tested on a
// machine with no GPU and no InfiniBand.
//
// A Source is one simulated node built from a named profile (dgx-h100,
// dgx-a100, hgx-b200, gb200-nvl72, rtx3090-nvlink-pair, pcie-8gpu). Profiles
// reproduce the PCIe trees, NVLink wiring and NIC layouts of real systems
// (checked against real `nvidia-smi topo -m` outputs by internal/graph's
// tests). Every identity (GPU UUIDs, GUIDs, serials, MACs, LIDs) is derived
// by hashing the cluster name, the node name and the device, so the same
// cluster always looks the same and two clusters never collide.
//
// BuildFabric lays a rail-optimised fat tree over a list of simulated nodes;
// the HCA port GUIDs it cables are the ones the nodes report, because both
// come from the same derivation (PortGUID).
//
// Data flow: sim → sources.Open("sim:<profile>") → agent → master → graph.
package sim
