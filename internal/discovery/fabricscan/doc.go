// Package fabricscan reads scans of the scale-out fabric that tools outside
// gin-agent make: the topology file of InfiniBand's `ibnetdiscover`
// (ParseIBNetDiscover, giving a FabricTopology: switches with tiers, and every
// switch-switch and switch-HCA cable once) and the LLDP neighbours that
// lldpd's `lldpcli -f json show neighbors details` lists for Ethernet/RoCE
// ports (ParseLLDPCLIJSON, giving FabricNeighbors).
//
// Both parsers are pure functions of their input, bounded in size, and never
// return a partial result: malformed or truncated input is an error that
// names the line (ibnetdiscover) or the entry (LLDP). Running the tools
// (pdsh, pod exec, sudo) is the caller's business.
//
// Data flow: ibnetdiscover/lldpcli output → fabricscan → master (fabric
// import) or agent (FabricNeighbors) → graph.
package fabricscan
