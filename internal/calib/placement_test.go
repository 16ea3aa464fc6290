package calib

import (
	"fmt"
	"strings"
	"testing"
)

func TestCheckPlacement(t *testing.T) {
	b200 := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "NVIDIA B200"
		}
		return out
	}
	cluster := map[string][]string{"node001": b200(8), "node002": b200(8)}
	ranks := func(host0, host1, model string, perHost int) []RankPlace {
		var out []RankPlace
		for i := range 2 * perHost {
			h := host0
			if i >= perHost {
				h = host1
			}
			out = append(out, RankPlace{Where: fmt.Sprintf("line %d", 6+i), Rank: i, Host: h, GPUModel: model})
		}
		return out
	}
	nodes := []string{"node001", "node002"}
	for _, tc := range []struct {
		name  string
		ranks []RankPlace
		gpn   int
		want  []string // substrings, in order; none: no difference
	}{
		{"same hosts and GPUs", ranks("node001", "node002", "NVIDIA B200", 8), 8, nil},
		{"FQDN hosts", ranks("node001.cluster.local", "node002.cluster.local", "nvidia b200", 8), 8, nil},
		{"no rank lines", nil, 8, nil},
		{"a B300 log onto B200 nodes", ranks("node001", "node002", "NVIDIA B300 SXM6 AC", 8), 8,
			[]string{"line 6: rank 0 ran on an NVIDIA B300 SXM6 AC; node001 has NVIDIA B200 GPUs", "line 14: rank 8 ran on an NVIDIA B300"}},
		{"other hosts", ranks("cnode3-002", "cnode3-003", "NVIDIA B200", 8), 8,
			[]string{"line 6: rank 0 ran on host cnode3-002, not on node001", "line 14: rank 8 ran on host cnode3-003, not on node002"}},
		{"more ranks than GPUs", ranks("node001", "node002", "NVIDIA B200", 9), 9,
			[]string{"9 rank(s) ran on node001; node001 has 8 GPU(s)"}},
		{"fewer ranks than --gpus-per-node", ranks("node001", "node002", "NVIDIA B200", 4), 8,
			[]string{"4 rank(s) ran on node001, not the 8 GPUs per node"}},
		{"one host for two nodes", ranks("node001", "node001", "NVIDIA B200", 4), 8,
			[]string{"ran on 1 host(s), --nodes names 2"}},
		{"unknown node", ranks("node001", "node003", "NVIDIA B200", 8), 8, []string{"rank 8 ran on host node003, not on node002"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckPlacement(tc.ranks, nodes, tc.gpn, cluster)
			if len(tc.want) == 0 {
				if len(got) != 0 {
					t.Fatalf("differences %q, want none", got)
				}
				return
			}
			all := strings.Join(got, "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("differences %q lack %q", got, w)
				}
			}
		})
	}
}
