package main

import (
	"os"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/nccltests"
)

func parseFixture(t *testing.T, name string) *nccltests.Log {
	t.Helper()
	f, err := os.Open("../../internal/nccltests/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := nccltests.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestImportRequests(t *testing.T) {
	smoke := parseFixture(t, "xxrjun_smoke_N2_G1.log")
	one := parseFixture(t, "xxrjun_N1_G8.log")
	tests := []struct {
		name      string
		log       *nccltests.Log
		nodes     []string
		gpn       int
		algo      string
		wantColls []ginv1.Collective
		wantAlgo  ginv1.Algorithm
		wantBy    string
		skipped   int
		err       string
	}{
		{name: "2 nodes, default", log: smoke, nodes: []string{"a", "b"},
			wantColls: []ginv1.Collective{ginv1.Collective_COLLECTIVE_ALL_REDUCE}, wantBy: "default", skipped: 1},
		{name: "forced by flag", log: smoke, nodes: []string{"a", "b"}, algo: "tree",
			wantColls: []ginv1.Collective{ginv1.Collective_COLLECTIVE_ALL_REDUCE}, wantAlgo: ginv1.Algorithm_ALGORITHM_TREE, wantBy: "flag", skipped: 1},
		{name: "one node, three collectives", log: one, nodes: []string{"a"},
			wantColls: []ginv1.Collective{ginv1.Collective_COLLECTIVE_ALL_REDUCE, ginv1.Collective_COLLECTIVE_ALL_GATHER, ginv1.Collective_COLLECTIVE_REDUCE_SCATTER},
			wantBy:    "default", skipped: 2},
		{name: "node count differs", log: smoke, nodes: []string{"a"}, err: "ran on 2 node(s)"},
		{name: "GPU count differs", log: one, nodes: []string{"a"}, gpn: 4, err: "8 ranks"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reqs, skipped, err := importRequests(tc.log, tc.nodes, strings.Join(tc.nodes, ","), tc.gpn, tc.algo, "", "dir/x.log")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(reqs) != len(tc.wantColls) || len(skipped) != tc.skipped {
				t.Fatalf("%d requests, %d skipped (%v); want %d, %d", len(reqs), len(skipped), skipped, len(tc.wantColls), tc.skipped)
			}
			for i, r := range reqs {
				if r.GetCollective() != tc.wantColls[i] || r.GetAlgorithm() != tc.wantAlgo || r.GetForcedBy() != tc.wantBy ||
					r.GetNcclVersion() != "2.29.2" || !strings.HasPrefix(r.GetSource(), "x.log:") || len(r.GetPoints()) == 0 {
					t.Errorf("request %d: %v", i, r)
				}
			}
		})
	}
}

// TestExamplesImport: the logs the README's tour imports are the published
// fixtures byte for byte, and import on the nodes the tour names.
func TestExamplesImport(t *testing.T) {
	tests := []struct {
		example, fixture string
		nodes            []string
	}{
		{"dgx-h100-1x8.log", "xxrjun_N1_G8.log", []string{"node001"}},
		{"dgx-h100-10x8.log", "xxrjun_N10_G8.log", []string{"node001", "node002", "node003", "node004", "node005", "node006", "node007", "node008", "node009", "node010"}},
	}
	for _, tc := range tests {
		t.Run(tc.example, func(t *testing.T) {
			ex, err := os.ReadFile("../../examples/nccl-tests/" + tc.example)
			if err != nil {
				t.Fatal(err)
			}
			fx, err := os.ReadFile("../../internal/nccltests/testdata/" + tc.fixture)
			if err != nil {
				t.Fatal(err)
			}
			if string(ex) != string(fx) {
				t.Fatalf("examples/nccl-tests/%s differs from the fixture %s it was copied from", tc.example, tc.fixture)
			}
			reqs, skipped, err := importRequests(parseFixture(t, tc.fixture), tc.nodes, strings.Join(tc.nodes, ","), 0, "", "", tc.example)
			if err != nil {
				t.Fatal(err)
			}
			if len(reqs) != 3 || len(skipped) != 2 {
				t.Fatalf("%d requests, %d skipped (%v); want all_reduce, all_gather, reduce_scatter and alltoall, sendrecv skipped", len(reqs), len(skipped), skipped)
			}
		})
	}
}
