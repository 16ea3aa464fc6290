// Package export writes GIN's canonical topology graph (internal/graph) in
// the formats schedulers and libraries read: Slurm topology.conf for
// topology/tree (SlurmTree) and topology/block (SlurmBlock), a documented
// JSON document (JSON), Graphviz (DOT) and NCCL's NCCL_TOPO_FILE XML for one
// node (NCCLTopo).
//
// Every format renders one intermediate model, Topology (model.go,
// topograph's shape): Build translates the graph once into the nodes and
// their hardware (Host: GPUs, HCAs and ports, their PCIe bridges and NUMA
// nodes), every fabric switch and switch-to-switch cable, the compute
// fabric merged into a tree of Slurm switches (tree.go), and the MNNVL
// NVLink domains as blocks. The engines render it and never read the graph
// (internal/archtest checks it), one file each: SlurmTree and SlurmBlock
// (slurm.go), NCCLTopo (nccl.go, one Host with its inventory), JSON
// (json.go, through its Document) and DOT (dot.go); Topology.Place gives
// one node's switches and block (node labels, internal/kubelabels). The
// functions of the same names in export.go build the model of a graph and
// render it with one engine; a caller writing several formats of one graph
// builds its Topology once and calls each engine on it.
//
// Exporters only translate; they never discover (topograph's rule: engines
// translate, providers discover). Everything they write comes from the graph
// (NCCLTopo also reads attribute values from the node's inventory the graph
// was built from), and
// the output is a pure function of its input: the same graph gives the same
// bytes, so files can be diffed, golden-tested and written only on change.
//
// # Slurm topology/tree
//
// SlurmTree turns the scale-out (compute) fabric into a tree as NVIDIA's
// topograph does:
//
//  1. Only compute ports count (HCAs of role COMPUTE; a node without any uses
//     its HCAs of unspecified role, never storage ones). A port's switch comes
//     from the fabric scan by port GUID, else from the node's own fabric
//     neighbours.
//  2. Leaf groups: in a rail-optimised fabric a node's rails go to different
//     leaves of its scalable unit, so leaves that serve a common node are one
//     group (union over nodes), and each group becomes one Slurm leaf switch
//     holding its nodes. In a one-port-per-node fabric a group is one leaf.
//  3. Going up tier by tier, the switches above the current vertices are
//     merged into one Slurm switch per connected component of the
//     vertex–uplink graph. In a Clos/fat tree every spine reaches every leaf
//     group, so all the spines become one switch (topograph's merge of
//     switches with identical child sets is the special case); partial
//     meshes are merged conservatively rather than giving a vertex two
//     parents, which Slurm's tree cannot express.
//  4. Nodes whose compute ports reach no known switch go under a switch named
//     "unknown". When more than one top vertex remains (disjoint fabrics, or
//     "unknown" beside the fabric), each stays a top switch of its own and
//     no common root is invented: the fabrics are not connected, so Slurm
//     must not place one job across them (slurmctld logs that no switch
//     reaches all nodes). A header comment lists the separate trees.
//
// A Slurm switch that is exactly one fabric switch is named after the
// switch: its hostname part for NVIDIA switch descriptions
// ("MF0;A09-P1-IBLEAF-04-04:MQM9701/U1" gives "A09-P1-IBLEAF-04-04"), else
// the description with characters outside [A-Za-z0-9._-] replaced by '-'.
// Merged switches, and switches with no usable or a duplicate description,
// get leaf01.., spine01.., core01.., tier4-01.. by level, numbered in the
// order of their first node. Every fabric switch behind a Slurm switch is
// listed in a "# <name>: 0x<guid> "<description>" tier <n>" comment above
// it.
//
// # Slurm topology/block
//
// SlurmBlock makes one block per MNNVL NVLink domain (NodeInfo.NVLinkDomain:
// "<cluster_uuid>.<clique_id>"), named block01.. in the order of their first
// node, followed by BlockSizes: Slurm's own default, the smallest block's
// node count doubled while the doubled size still fits the number of
// blocks (18,36 for two NVL72 racks of 18 trays). Block topology is only
// meaningful for MNNVL systems, so a node without a domain is an error that
// names it (use SlurmTree, or a topology.yaml with a tree for those nodes):
// putting each such node in a block of its own would drag the base block
// size down to 1.
//
// # NCCL topology
//
// NCCLTopo takes the node's structure from the model's Host (its GPUs and
// HCAs, the PCIe bridges above each, their NUMA nodes), and the
// values the graph does not keep (PCIe link generations and widths, compute
// capabilities, NVLink targets, port states, node GUIDs) from the node's
// NodeInventory, whose device identities are canonical (internal/inventory),
// so graph and inventory agree by plain comparison; see NCCLTopo.
package export
