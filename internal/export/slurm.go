package export

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/gin-topology/gin/internal/devid"
	"github.com/gin-topology/gin/internal/hostlist"
	"github.com/gin-topology/gin/internal/natsort"
)

// Slurm switch names SlurmTree reserves.
const (
	// UnknownSwitch holds the nodes whose compute ports reach no known switch.
	UnknownSwitch = "unknown"
)

// maxSlurmName is Slurm's limit on SwitchName and BlockName.
const maxSlurmName = 64

// SlurmTree renders t.Tree as a Slurm topology.conf for
// TopologyPlugin=topology/tree (see the package documentation for how the
// Clos tiers are merged into a tree and how switches are named). It fails
// on a model without nodes (Slurm must never get an empty tree) or with
// node names no hostlist can carry.
func (t *Topology) SlurmTree() ([]byte, error) {
	if err := t.slurmReady(); err != nil {
		return nil, slurmError(err)
	}
	var b bytes.Buffer
	b.WriteString("# Slurm topology.conf for TopologyPlugin=topology/tree, written by GIN from its topology graph.\n")
	fmt.Fprintf(&b, "# %d nodes; fabric tiers merged into a tree (switches serving the same nodes are one SwitchName).\n", len(t.Nodes))
	if roots := t.Tree.Roots; len(roots) > 1 {
		tops := make([]string, len(roots))
		for i, r := range roots {
			tops[i] = r.Name
		}
		fmt.Fprintf(&b, "# %d separate trees (top switches %s): no switch connects them, so Slurm keeps each job\n", len(roots), strings.Join(tops, ", "))
		b.WriteString("# within one of them (slurmctld logs that no switch reaches all nodes; that is intended).\n")
	}
	for _, v := range t.Tree.Switches {
		for _, s := range v.Fabric {
			where := fmt.Sprintf("tier %d", s.Tier)
			if s.FromInventory {
				where = "tier 1, known only from node inventories"
			}
			fmt.Fprintf(&b, "# %s: %s %s %s\n", v.Name, devid.GUIDText(s.GUID), commentText(s.Description), where)
		}
		for _, c := range v.Comment {
			fmt.Fprintf(&b, "# %s\n", c)
		}
		if len(v.Children) == 0 {
			fmt.Fprintf(&b, "SwitchName=%s Nodes=%s\n", v.Name, hostlist.Compress(v.Nodes))
			continue
		}
		kids := make([]string, len(v.Children))
		for i, c := range v.Children {
			kids[i] = c.Name
		}
		fmt.Fprintf(&b, "SwitchName=%s Switches=%s\n", v.Name, hostlist.Compress(kids))
	}
	return b.Bytes(), nil
}

// slurmError says why no topology.conf can be written from the graph.
func slurmError(err error) error {
	if errors.Is(err, ErrNoNodes) {
		return err
	}
	return fmt.Errorf("cannot write a Slurm topology.conf: %w", err)
}

func isNameChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

// checkNodeNames rejects names a Slurm hostlist cannot carry.
func checkNodeNames(names []string) error {
	for _, n := range names {
		if n == "" {
			return errors.New("empty node name")
		}
		for i := 0; i < len(n); i++ {
			if !isNameChar(n[i]) {
				return fmt.Errorf("node name %q: character %q is not allowed in a Slurm hostlist", n, n[i])
			}
		}
	}
	return nil
}

// SlurmBlock renders t.Blocks as a Slurm topology.conf for
// TopologyPlugin=topology/block: one BlockName per MNNVL NVLink domain and
// Slurm's default BlockSizes, the smallest block's node count doubled while
// the doubled size still fits the number of blocks. Every node must be in
// an NVLink domain.
func (t *Topology) SlurmBlock() ([]byte, error) {
	if err := t.slurmReady(); err != nil {
		return nil, slurmError(err)
	}
	if len(t.NoDomain) > 0 {
		return nil, fmt.Errorf("topology/block needs MNNVL NVLink domains, and %d of %d nodes are in none (%s); export slurm (topology/tree) for them instead",
			len(t.NoDomain), len(t.Nodes), hostlist.Compress(t.NoDomain))
	}
	base := len(t.Blocks[0].Nodes)
	for _, b := range t.Blocks {
		base = min(base, len(b.Nodes))
	}
	sizes := []string{fmt.Sprint(base)}
	for k := 2; k <= len(t.Blocks); k *= 2 {
		sizes = append(sizes, fmt.Sprint(base*k))
	}
	var out bytes.Buffer
	out.WriteString("# Slurm topology.conf for TopologyPlugin=topology/block, written by GIN from its topology graph.\n")
	fmt.Fprintf(&out, "# %d nodes in %d MNNVL NVLink domains (one block each); blocks are paired in this order into larger blocks.\n", len(t.Nodes), len(t.Blocks))
	for _, b := range t.Blocks {
		fmt.Fprintf(&out, "# %s: NVLink domain %s\n", b.Name, commentText(b.Domain))
		fmt.Fprintf(&out, "BlockName=%s Nodes=%s\n", b.Name, hostlist.Compress(b.Nodes))
	}
	fmt.Fprintf(&out, "BlockSizes=%s\n", strings.Join(sizes, ","))
	return out.Bytes(), nil
}

// commentText quotes free text for a one-line comment.
func commentText(s string) string {
	if s == "" {
		return `""`
	}
	return fmt.Sprintf("%q", s)
}

// sortNatural sorts names so that node2 comes before node10.
func sortNatural(names []string) {
	sort.SliceStable(names, func(i, j int) bool { return natsort.Less(names[i], names[j]) })
}
