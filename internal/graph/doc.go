// Package graph is GIN's canonical topology graph: one immutable value built
// from every node's NodeInventory and the scale-out FabricTopology, that
// answers path and matrix queries for the whole cluster.
//
// Per node it holds the PCIe tree (bridges with parents and depth, host
// bridges, NUMA nodes and sockets), the GPUs, their NVLink adjacency (direct
// or through local or off-node NVSwitches), the HCAs and their ports, and for
// each GPU its nearest compute port. Across nodes it holds the fabric: the
// switches with their tiers and per-switch uplink sets, and which switch every
// HCA port is cabled to.
//
// Paths are computed from structure, never from an all-pairs table: a PCIe
// lowest common ancestor inside a node (classified exactly as `nvidia-smi
// topo -m` does: PIX, PXB, PHB, NODE, SYS), NVLink counts, MNNVL clique
// membership, and the lowest common ancestor tier of two leaf switches in the
// fabric (NET1 same leaf, NET3 leaf-spine-leaf, ...).
//
// A *Graph is never modified: WithNode, WithoutNode and WithFabric return a
// new graph sharing everything they did not change, so readers need no locks.
// Every master holds every node, so a node is kept in compact form: strings
// that repeat across nodes interned (intern.go), node names in blocks that a
// new node copies one of (names.go).
//
// The graph takes gin.v1 inventories and fabrics as input; proto.go converts
// its answers to the gin.v1 topology messages for the master.
package graph
