package planread

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

const allReduce = ginv1.Collective_COLLECTIVE_ALL_REDUCE

// sample is a small hand-written plan: all-reduce on 16 ranks/2 nodes,
// ring/simple from 1 MiB up, NCCL below.
func sample() *ginv1.Plan {
	p := &ginv1.Plan{FormatVersion: FormatVersion, JobId: "42", Nodes: []string{"n1", "n2"}, GpusPerNode: 8,
		Rules: []*ginv1.PlanRule{
			{Collective: allReduce, NRanks: 16, NNodes: 2, MinLog2Bytes: 0, MaxLog2Bytes: 19},
			{Collective: allReduce, NRanks: 16, NNodes: 2, MinLog2Bytes: 20, MaxLog2Bytes: MaxLog2Bytes,
				Algorithm: ginv1.Algorithm_ALGORITHM_RING, Protocol: ginv1.Protocol_PROTOCOL_SIMPLE, Channels: 8},
		}}
	p.ContentHash = Hash(p)
	return p
}

func TestVerify(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *ginv1.Plan)
		want   string // "" = accepted
	}{
		{"as built", func(*ginv1.Plan) {}, ""},
		{"nil", nil, "nil"},
		{"other format", func(p *ginv1.Plan) { p.FormatVersion = 2 }, "format_version"},
		{"tampered rule", func(p *ginv1.Plan) { p.Rules[1].Channels = 4 }, "content_hash"},
		{"overlap", func(p *ginv1.Plan) { p.Rules[1].MinLog2Bytes = 19; p.ContentHash = Hash(p) }, "overlaps"},
		{"bucket range", func(p *ginv1.Plan) { p.Rules[1].MaxLog2Bytes = 41; p.ContentHash = Hash(p) }, "buckets"},
		{"reversed range", func(p *ginv1.Plan) { p.Rules[0].MinLog2Bytes = 30; p.ContentHash = Hash(p) }, "buckets"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p *ginv1.Plan
			if tc.mutate != nil {
				p = sample()
				tc.mutate(p)
			}
			err := Verify(p)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Verify: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Verify = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestLookup(t *testing.T) {
	p := sample()
	tests := []struct {
		name          string
		coll          ginv1.Collective
		ranks, nodes  int
		bytes         uint64
		ok            bool
		wantAlgorithm ginv1.Algorithm
	}{
		{"small goes to NCCL's rule", allReduce, 16, 2, 1 << 10, true, ginv1.Algorithm_ALGORITHM_UNSPECIFIED},
		{"bucket edge below", allReduce, 16, 2, 1<<20 - 1, true, ginv1.Algorithm_ALGORITHM_UNSPECIFIED},
		{"bucket edge", allReduce, 16, 2, 1 << 20, true, ginv1.Algorithm_ALGORITHM_RING},
		{"above the last bucket", allReduce, 16, 2, 1 << 62, true, ginv1.Algorithm_ALGORITHM_RING},
		{"zero bytes", allReduce, 16, 2, 0, true, ginv1.Algorithm_ALGORITHM_UNSPECIFIED},
		{"other shape", allReduce, 8, 1, 1 << 20, false, 0},
		{"other collective", ginv1.Collective_COLLECTIVE_BROADCAST, 16, 2, 1 << 20, false, 0},
		{"negative ranks", allReduce, -1, 2, 1 << 20, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := Lookup(p, tc.coll, tc.ranks, tc.nodes, tc.bytes)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if ok && r.GetAlgorithm() != tc.wantAlgorithm {
				t.Fatalf("algorithm %v, want %v", r.GetAlgorithm(), tc.wantAlgorithm)
			}
		})
	}
	if _, ok := Lookup(nil, allReduce, 16, 2, 8); ok {
		t.Fatal("Lookup on a nil plan found a rule")
	}
}

func TestDecode(t *testing.T) {
	good, err := proto.Marshal(sample())
	if err != nil {
		t.Fatal(err)
	}
	many := sample()
	many.Rules = make([]*ginv1.PlanRule, MaxRules+1)
	for i := range many.Rules {
		many.Rules[i] = &ginv1.PlanRule{Collective: allReduce, NRanks: uint32(i + 1), NNodes: 1}
	}
	tooMany, err := proto.Marshal(many)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"good", good, ""},
		{"truncated", good[:len(good)-3], "cannot decode"},
		{"garbage", []byte{0xff, 0xff, 0xff}, "cannot decode"},
		{"empty is an unverified plan", nil, "format_version"},
		{"too large", make([]byte, MaxBytes+1), "limit"},
		{"too many rules", tooMany, "rules"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Decode(tc.in)
			if tc.want == "" {
				if err != nil || p.GetContentHash() != sample().GetContentHash() {
					t.Fatalf("Decode = %v, %v", p, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestExplain(t *testing.T) {
	lines := Explain(sample())
	if len(lines) != 4 || !strings.HasPrefix(lines[1], "COLLECTIVE") {
		t.Fatalf("%d lines, want a summary, a column header and 2 rules:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, want := range []string{"job 42", "2 rules, 1 override NCCL"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("header %q lacks %q", lines[0], want)
		}
	}
	if !strings.Contains(lines[3], "ring/simple×8ch") || !strings.Contains(lines[3], "1M-∞") {
		t.Errorf("rule line %q", lines[3])
	}
	if Explain(nil) != nil {
		t.Error("Explain(nil) is not empty")
	}
}

// FuzzDecode: any bytes give a verified plan or an error, never a panic,
// and a plan Decode accepts re-encodes to one it accepts again.
func FuzzDecode(f *testing.F) {
	good, err := proto.Marshal(sample())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte{})
	withChoices := sample()
	withChoices.Rules[1].Algorithm, withChoices.Rules[1].Protocol = 0, 0
	withChoices.Rules[1].Choices = []*ginv1.PlanChoice{
		{Algorithm: ginv1.Algorithm_ALGORITHM_NVLS_TREE, NcclIfOffered: true},
		{Algorithm: ginv1.Algorithm_ALGORITHM_TREE, Protocol: ginv1.Protocol_PROTOCOL_SIMPLE, MinNcclVersion: 22703, MaxNcclVersion: 22703},
	}
	withChoices.ContentHash = Hash(withChoices)
	if b, err := proto.Marshal(withChoices); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Decode(b)
		if err != nil {
			return
		}
		again, err := proto.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(again); err != nil {
			t.Fatalf("accepted plan fails after re-encoding: %v", err)
		}
	})
}

// TestChoices: a rule's ordered choices verify, name themselves and count
// as an override only where one forces a cell.
func TestChoices(t *testing.T) {
	nvlsTree := &ginv1.PlanChoice{Algorithm: ginv1.Algorithm_ALGORITHM_NVLS_TREE, NcclIfOffered: true}
	tree := &ginv1.PlanChoice{Algorithm: ginv1.Algorithm_ALGORITHM_TREE, Protocol: ginv1.Protocol_PROTOCOL_SIMPLE, Channels: 4,
		MinNcclVersion: 22703, MaxNcclVersion: 22903}
	for _, tc := range []struct {
		name    string
		choices []*ginv1.PlanChoice
		want    string // "" valid
		names   string
		forces  bool
	}{
		{"nvls tree if offered, else tree", []*ginv1.PlanChoice{nvlsTree, tree}, "", "nccl(nvls_tree),tree/simple×4ch", true},
		{"if offered only", []*ginv1.PlanChoice{nvlsTree}, "", "nccl(nvls_tree)", false},
		{"too many", []*ginv1.PlanChoice{nvlsTree, tree, tree, tree, tree}, "5 choices", "", false},
		{"forced without a protocol", []*ginv1.PlanChoice{{Algorithm: ginv1.Algorithm_ALGORITHM_RING}}, "without a protocol", "", false},
		{"NCCL's choice with a condition", []*ginv1.PlanChoice{{NcclIfOffered: true}}, "names a protocol or a condition", "", false},
		{"versions reversed", []*ginv1.PlanChoice{{Algorithm: ginv1.Algorithm_ALGORITHM_RING, Protocol: ginv1.Protocol_PROTOCOL_LL, MinNcclVersion: 22903, MaxNcclVersion: 22703}}, "NCCL versions", "", false},
		{"algorithm out of range", []*ginv1.PlanChoice{{Algorithm: 99, Protocol: ginv1.Protocol_PROTOCOL_LL}}, "out of range", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := sample()
			p.Rules[1].Algorithm, p.Rules[1].Protocol, p.Rules[1].Channels = 0, 0, 0
			p.Rules[1].Choices = tc.choices
			p.ContentHash = Hash(p)
			err := Verify(p)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Verify = %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := Choices(p.Rules[1]); got != tc.names {
				t.Errorf("Choices = %q, want %q", got, tc.names)
			}
			if Overrides(p.Rules[1]) != tc.forces {
				t.Errorf("Overrides = %v", !tc.forces)
			}
		})
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]uint32{"2.27.3": 22703, "2.30.7-1": 23007, "2.21.5+cuda12.4": 22105, "2.27": 0, "x": 0, "2.100.1": 0, "": 0} {
		if got := ParseVersion(in); got != want {
			t.Errorf("ParseVersion(%q) = %d, want %d", in, got, want)
		}
		if want != 0 && ParseVersion(VersionName(want)) != want {
			t.Errorf("VersionName(%d) does not parse back", want)
		}
	}
}
