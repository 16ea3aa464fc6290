package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/render"
)

func (a *app) topoCmd() *cobra.Command {
	var (
		matrix, bw, noNICs bool
		nodes              string
	)
	cmd := &cobra.Command{
		Use:   "topo -m",
		Short: "Print the cluster-wide nvidia-smi topo -m matrix",
		Long: `Print the connection matrix between the GPUs (and NICs) of the selected nodes, as
nvidia-smi topo -m prints it for one node: X, NV#, PIX, PXB, PHB, NODE, SYS inside
a node, plus MNNVL (same multi-node NVLink clique) and NET# (over the scale-out
network through # switches) across nodes. --bw prints the bottleneck bandwidth
in GB/s per direction instead. At most 512 devices: narrow with --nodes. On a
terminal narrower than the matrix, a line on stderr says how to narrow it.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !matrix {
				return usagef("topo needs -m (the matrix)")
			}
			var resp *ginv1.GetMatrixResponse
			err := a.withTopology(cmd.Context(), func(ctx context.Context, tc ginv1.TopologyServiceClient) (err error) {
				resp, err = tc.GetMatrix(ctx, &ginv1.GetMatrixRequest{Nodes: nodes, IncludeNics: !noNICs, Consistency: a.consistency()})
				return err
			})
			if err != nil {
				return err
			}
			if a.output == "json" {
				return a.printJSON(toMatrixJSON(resp))
			}
			var b bytes.Buffer
			if err := render.TopoMatrix(&b, resp, bw); err != nil {
				return err
			}
			if hint := widthHint(widestLine(b.Bytes()), a.terminalColumns(), nodes, noNICs); hint != "" {
				fmt.Fprintln(a.stderr, hint)
			}
			_, err = a.stdout.Write(b.Bytes())
			return err
		},
	}
	cmd.Flags().BoolVarP(&matrix, "matrix", "m", false, "print the connection matrix")
	cmd.Flags().BoolVar(&bw, "bw", false, "print bottleneck bandwidth (GB/s per direction) instead of classes")
	cmd.Flags().BoolVar(&noNICs, "no-nics", false, "leave NIC rows and columns out")
	cmd.Flags().StringVar(&nodes, "nodes", "", "only these nodes (Slurm hostlist: node[001-004,010])")
	return cmd
}

// matrixJSON is `ginctl topo -m -o json`: the devices, the n×n labels the
// table prints (labels[i][j] from devices[i] to devices[j]: "X", "NV18",
// "NET3"...), the cells behind them in row-major order, and the read.
type matrixJSON struct {
	Devices []*ginv1.MatrixDevice `json:"devices"`
	Labels  [][]string            `json:"labels"`
	Cells   []*ginv1.MatrixCell   `json:"cells"`
	Read    *ginv1.ReadInfo       `json:"read"`
}

func toMatrixJSON(m *ginv1.GetMatrixResponse) matrixJSON {
	n := len(m.GetDevices())
	labels := make([][]string, n)
	for i := range labels {
		labels[i] = make([]string, n)
		for j := range labels[i] {
			if k := i*n + j; k < len(m.GetCells()) {
				c := m.GetCells()[k]
				labels[i][j] = render.ClassLabel(c.GetClass(), c.GetCount())
			}
		}
	}
	return matrixJSON{Devices: m.GetDevices(), Labels: labels, Cells: m.GetCells(), Read: m.GetRead()}
}

func (a *app) pathCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "path GPU_A GPU_B",
		Short: "Show the path between two GPUs",
		Long: `Show the path between two GPUs anywhere in the cluster: its class, NVLinks or
switch hops, bottleneck bandwidth, oversubscription and the NICs it uses.
A GPU is named by UUID or as NODE/GPU<index> (node001/GPU3).`,
		Args:              args("GPU_A", "GPU_B"),
		ValidArgsFunction: a.completeGPUs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp *ginv1.GetPathResponse
			err := a.withTopology(cmd.Context(), func(ctx context.Context, tc ginv1.TopologyServiceClient) (err error) {
				resp, err = tc.GetPath(ctx, &ginv1.GetPathRequest{FromGpu: args[0], ToGpu: args[1], Consistency: a.consistency()})
				return err
			})
			if err != nil {
				return err
			}
			if a.output == "json" {
				return a.printJSON(resp)
			}
			p := resp.GetPath()
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "Class:\t%s\n", p.GetLabel())
			fmt.Fprintf(tw, "Bottleneck:\t%.1f GB/s per direction\n", float64(p.GetBottleneckMbPerS())/1000)
			if p.GetNvlinkCount() > 0 {
				fmt.Fprintf(tw, "NVLinks:\t%d\n", p.GetNvlinkCount())
			}
			if p.GetClass() == ginv1.PathClass_PATH_CLASS_NET {
				fmt.Fprintf(tw, "Switch hops:\t%d\n", p.GetSwitchHops())
				fmt.Fprintf(tw, "Oversubscription:\t%.2g:1\n", p.GetOversubscription())
				fmt.Fprintf(tw, "NICs:\t%s -> %s (GPUDirect RDMA: %v)\n", p.GetFromNic(), p.GetToNic(), p.GetGpudirect())
			}
			if p.GetNote() != "" {
				fmt.Fprintf(tw, "Note:\t%s\n", p.GetNote())
			}
			var hops []string
			for i, h := range p.GetHops() {
				id := h.GetId()
				// The GPUs at the ends as the user named them (node001/GPU0), not by UUID.
				if h.GetKind() == "gpu" && i == 0 && strings.Contains(args[0], "/") {
					id = args[0]
				} else if h.GetKind() == "gpu" && i == len(p.GetHops())-1 && strings.Contains(args[1], "/") {
					id = args[1]
				}
				hops = append(hops, h.GetKind()+":"+id)
			}
			if len(hops) > 0 {
				fmt.Fprintf(tw, "Hops:\t%s\n", strings.Join(hops, " -> "))
			}
			return tw.Flush()
		},
	}
}

func (a *app) clusterCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cluster",
		Short: "Show the Raft cluster as the answering master sees it",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			resp, err := a.clusterInfo(cmd.Context())
			if err != nil {
				return err
			}
			if a.output == "json" {
				return a.printJSON(resp)
			}
			a.summary("server %s: %s, term %d, commit %d, applied %d, leader %s (%s)%s", resp.GetServerId(), resp.GetRaftState(),
				resp.GetTerm(), resp.GetCommitIndex(), resp.GetAppliedIndex(), dash(resp.GetLeaderId()), dash(resp.GetLeaderAddress()),
				catchingUp(resp.GetRaftState(), resp.GetCommitIndex(), resp.GetAppliedIndex()))
			t := a.newTable("ID", "RAFT_ADDRESS", "VOTER", "LEADER", "REACHABLE", "LAST_CONTACT")
			for _, m := range resp.GetMembers() {
				t.row(m.GetId(), m.GetAddress(), m.GetVoter(), m.GetLeader(), reachable(m), lastContact(m))
			}
			return t.flush()
		},
	}
}

// catchingUp says why a master's indexes look empty or behind: a master
// that just started knows no commit until the leader's first heartbeat,
// and applies what it learns after that.
func catchingUp(state string, commit, applied uint64) string {
	switch {
	case state == "Leader":
		return ""
	case commit == 0:
		return "; catching up: it has heard from no leader since it started (ask again in a few seconds)"
	case applied < commit:
		return fmt.Sprintf("; catching up: %d committed entries not applied yet", commit-applied)
	}
	return ""
}

// widestLine is the widest line of b, in characters.
func widestLine(b []byte) int {
	w := 0
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		w = max(w, utf8.RuneCount(line))
	}
	return w
}

// terminalColumns is the width of the terminal ginctl writes to: $COLUMNS
// when set, else the terminal's own; 0 when stdout is not a terminal (a
// pipe or a file: the matrix is for a program or a pager then).
func (a *app) terminalColumns() int {
	f, ok := a.stdout.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0
	}
	if n, err := strconv.Atoi(a.getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	if w, _, err := term.GetSize(int(f.Fd())); err == nil {
		return w
	}
	return 0
}

// widthHint says how to narrow a matrix wider than the terminal ("" when
// it fits or there is no terminal).
func widthHint(width, cols int, nodes string, noNICs bool) string {
	if cols <= 0 || width <= cols {
		return ""
	}
	var ways []string
	if nodes == "" {
		ways = append(ways, "--nodes LIST (fewer nodes)")
	} else {
		ways = append(ways, "a shorter --nodes list")
	}
	if !noNICs {
		ways = append(ways, "--no-nics")
	}
	ways = append(ways, "or a pager that scrolls sideways (| less -S)")
	return fmt.Sprintf("ginctl: the matrix is %d columns wide, the terminal %d: narrow it with %s", width, cols, strings.Join(ways, ", "))
}
