package sim

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/natsort"
)

// FabricSpec shapes the simulated rail-optimised fat tree.
type FabricSpec struct {
	// LeafGroups is the number of scalable units: contiguous blocks of nodes
	// with one leaf switch per rail each.
	LeafGroups int
	// Spines is the number of spine switches every leaf connects to.
	Spines int
	// Oversubscription is each leaf's downlink:uplink capacity ratio (1 =
	// non-blocking).
	Oversubscription float64
}

// Fabric limits.
const (
	MaxFabricNodes       = 100000
	MaxOversubscription  = 64
	DefaultFabricSpecStr = "leaf-groups=2,spines=4,oversub=1"
)

// DefaultFabricSpec is the fabric used when none is specified: two
// scalable units, four spines, non-blocking.
func DefaultFabricSpec() FabricSpec {
	return FabricSpec{LeafGroups: 2, Spines: 4, Oversubscription: 1}
}

// ParseFabricSpec parses "leaf-groups=2,spines=4,oversub=2". Keys left out
// keep their defaults (DefaultFabricSpec); an empty string is the default.
func ParseFabricSpec(s string) (FabricSpec, error) {
	spec := DefaultFabricSpec()
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return spec, fmt.Errorf("sim fabric spec %q: %q is not key=value", s, kv)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		var err error
		switch k {
		case "leaf-groups", "leafgroups", "groups":
			spec.LeafGroups, err = strconv.Atoi(v)
		case "spines":
			spec.Spines, err = strconv.Atoi(v)
		case "oversub", "oversubscription":
			spec.Oversubscription, err = strconv.ParseFloat(v, 64)
		default:
			return spec, fmt.Errorf("sim fabric spec %q: unknown key %q (want leaf-groups, spines, oversub)", s, k)
		}
		if err != nil {
			return spec, fmt.Errorf("sim fabric spec %q: %s: %w", s, k, err)
		}
	}
	return spec, spec.Validate()
}

// Validate checks the spec's ranges.
func (s FabricSpec) Validate() error {
	switch {
	case s.LeafGroups < 1:
		return fmt.Errorf("sim fabric: leaf-groups %d: want at least 1", s.LeafGroups)
	case s.Spines < 1:
		return fmt.Errorf("sim fabric: spines %d: want at least 1", s.Spines)
	case math.IsNaN(s.Oversubscription) || s.Oversubscription < 1 || s.Oversubscription > MaxOversubscription:
		return fmt.Errorf("sim fabric: oversub %g: want 1 to %d", s.Oversubscription, MaxOversubscription)
	}
	return nil
}

// String formats the spec as ParseFabricSpec reads it.
func (s FabricSpec) String() string {
	return fmt.Sprintf("leaf-groups=%d,spines=%d,oversub=%g", s.LeafGroups, s.Spines, s.Oversubscription)
}

// FabricNode is one node to cable into the simulated fabric.
type FabricNode struct {
	Name    string
	Profile string
	Index   int
}

// rail is one compute HCA port of a profile.
type rail struct {
	hca      string
	port     uint32
	rateGbps uint32
}

// profileRails returns the compute ports of a profile in rail order
// (HCA name in natural order, then port).
func profileRails(profile string) ([]rail, error) {
	build, ok := profileTable()[profile]
	if !ok {
		return nil, fmt.Errorf("unknown profile %q: want one of %s", profile, strings.Join(Profiles(), ", "))
	}
	b := newBuilder("", "rails", 0)
	build(b)
	var rails []rail
	for _, h := range b.inv.Hcas {
		if h.Role != ginv1.HcaRole_HCA_ROLE_COMPUTE {
			continue
		}
		for _, p := range h.Ports {
			rails = append(rails, rail{hca: h.Name, port: p.Port, rateGbps: p.RateGbps})
		}
	}
	sort.SliceStable(rails, func(i, j int) bool {
		if rails[i].hca != rails[j].hca {
			return natsort.Less(rails[i].hca, rails[j].hca)
		}
		return rails[i].port < rails[j].port
	})
	return rails, nil
}

// BuildFabric cables nodes into a rail-optimised fat tree: the nodes with
// compute ports are split into spec.LeafGroups contiguous blocks; each block
// has one leaf per rail (rail r = the r-th compute port of a node); each leaf
// has ceil(downlinks/oversub) uplinks at the NIC rate, spread round-robin
// over the spines. It returns the fabric and, per node name, the neighbours
// the node's ports see (for NodeOptions.Neighbors).
func BuildFabric(spec FabricSpec, cluster string, nodes []FabricNode) (*ginv1.FabricTopology, map[string][]*ginv1.FabricNeighbor, error) {
	if err := spec.Validate(); err != nil {
		return nil, nil, err
	}
	if len(nodes) > MaxFabricNodes {
		return nil, nil, fmt.Errorf("sim fabric: %d nodes: at most %d", len(nodes), MaxFabricNodes)
	}
	railsOf := map[string][]rail{}
	seen := make(map[string]bool, len(nodes))
	type member struct {
		node  FabricNode
		rails []rail
	}
	var members []member
	for i, n := range nodes {
		if n.Name == "" {
			return nil, nil, fmt.Errorf("sim fabric: nodes[%d]: empty name", i)
		}
		if seen[n.Name] {
			return nil, nil, fmt.Errorf("sim fabric: nodes[%d]: node %s listed twice", i, n.Name)
		}
		seen[n.Name] = true
		rails, ok := railsOf[n.Profile]
		if !ok {
			var err error
			if rails, err = profileRails(n.Profile); err != nil {
				return nil, nil, fmt.Errorf("sim fabric: node %s: %w", n.Name, err)
			}
			railsOf[n.Profile] = rails
		}
		if len(rails) > 0 {
			members = append(members, member{n, rails})
		}
	}

	f := &ginv1.FabricTopology{Source: "sim:fat-tree", ScannedAt: timestamppb.Now()}
	neighbors := make(map[string][]*ginv1.FabricNeighbor, len(members))
	if len(members) == 0 {
		return f, neighbors, nil
	}

	spines := make([]*ginv1.FabricSwitch, spec.Spines)
	for s := range spines {
		name := fmt.Sprintf("spine%d", s)
		spines[s] = &ginv1.FabricSwitch{
			Guid: switchGUID(cluster, name), Description: "sim " + name, Tier: 2, Lid: switchLID(cluster, name),
		}
	}

	groups := min(spec.LeafGroups, len(members))
	blockSize := (len(members) + groups - 1) / groups
	for g := 0; g*blockSize < len(members); g++ {
		block := members[g*blockSize : min((g+1)*blockSize, len(members))]
		nRails := 0
		for _, m := range block {
			nRails = max(nRails, len(m.rails))
		}
		for r := range nRails {
			name := fmt.Sprintf("sg%d-rail%d-leaf", g, r)
			leaf := &ginv1.FabricSwitch{Guid: switchGUID(cluster, name), Description: "sim " + name, Tier: 1, Lid: switchLID(cluster, name)}
			f.Switches = append(f.Switches, leaf)
			down := uint32(0)
			var rate uint32
			for _, m := range block {
				if r >= len(m.rails) {
					continue
				}
				rl := m.rails[r]
				if rate == 0 {
					rate = rl.rateGbps
				}
				down++
				pg := PortGUID(cluster, m.node.Name, rl.hca, rl.port)
				f.Links = append(f.Links, &ginv1.FabricLink{
					A:        &ginv1.FabricEndpoint{Kind: ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_HCA, Guid: pg, Port: rl.port, NodeName: m.node.Name, Hca: rl.hca},
					B:        &ginv1.FabricEndpoint{Kind: ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_SWITCH, Guid: leaf.Guid, Port: down},
					RateGbps: rl.rateGbps,
					State:    ginv1.LinkState_LINK_STATE_UP,
				})
				neighbors[m.node.Name] = append(neighbors[m.node.Name], &ginv1.FabricNeighbor{
					Hca: rl.hca, Port: rl.port, SwitchGuid: leaf.Guid, SwitchDescription: leaf.Description,
					SwitchPort: down, SwitchLid: leaf.Lid, RateGbps: rl.rateGbps,
					Source: ginv1.FabricNeighborSource_FABRIC_NEIGHBOR_SOURCE_SIMULATED,
				})
			}
			up := uint32(math.Ceil(float64(down) / spec.Oversubscription))
			for u := range up {
				sp := spines[int(u)%len(spines)]
				sp.PortCount++
				f.Links = append(f.Links, &ginv1.FabricLink{
					A:        &ginv1.FabricEndpoint{Kind: ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_SWITCH, Guid: leaf.Guid, Port: down + 1 + u},
					B:        &ginv1.FabricEndpoint{Kind: ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_SWITCH, Guid: sp.Guid, Port: sp.PortCount},
					RateGbps: rate,
					State:    ginv1.LinkState_LINK_STATE_UP,
				})
			}
			leaf.PortCount = down + up
		}
	}
	f.Switches = append(f.Switches, spines...)
	return f, neighbors, nil
}

// switchLID is a simulated switch LID.
func switchLID(cluster, name string) uint32 { return lid(cluster, "", "switch:"+name, 0) }
