package jsonout_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/jsonout"
)

func sampleInventory() *ginv1.NodeInventory {
	return &ginv1.NodeInventory{
		NodeName: "node001", Generation: 1 << 60, Source: "sim:dgx-h100",
		CollectedAt: timestamppb.New(time.Date(2026, 12, 1, 0, 0, 0, 5, time.UTC)),
		Gpus: []*ginv1.Gpu{{Index: 0, Uuid: "GPU-0", NumaNode: 0, MemoryBytes: 80 << 30,
			Nvlinks: []*ginv1.NvLink{{Index: 0, State: ginv1.LinkState_LINK_STATE_UP}, {Index: 1, State: ginv1.LinkState_LINK_STATE_DOWN}}}},
		Hcas: []*ginv1.Hca{{Name: "mlx5_0", Role: ginv1.HcaRole_HCA_ROLE_COMPUTE, Ports: []*ginv1.HcaPort{{Port: 1, State: ginv1.PortState_PORT_STATE_ACTIVE, LinkLayer: ginv1.LinkLayer_LINK_LAYER_INFINIBAND}}}},
	}
}

func TestUnmarshalRoundTrip(t *testing.T) {
	inv := sampleInventory()
	ours, err := jsonout.Marshal(inv)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := protojson.Marshal(inv)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"jsonout": ours, "protojson": theirs} {
		got := &ginv1.NodeInventory{NodeName: "left over"}
		if err := jsonout.Unmarshal(b, got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !proto.Equal(got, inv) {
			t.Fatalf("%s: read back %v, want %v", name, got, inv)
		}
	}
}

func TestUnmarshalErrors(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"not JSON", `{"node_name":`, "json:"},
		{"two values", `{} {}`, "more than one value"},
		{"unknown field", `{"gpus":[{"nope":1}]}`, `gpus[0]: unknown field "nope"`},
		{"unknown enum word", `{"gpus":[{"nvlinks":[{"state":"sideways"}]}]}`, `gpus[0].nvlinks[0].state: "sideways" is not a value of LinkState`},
		{"wrong type", `{"generation":"x"}`, "generation"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := jsonout.Unmarshal([]byte(tc.doc), &ginv1.NodeInventory{})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// FuzzUnmarshal: any input either is refused or reads into a message that
// Marshal writes and Unmarshal reads back to the same message.
func FuzzUnmarshal(f *testing.F) {
	b, err := jsonout.Marshal(sampleInventory())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"gpus":[{"nvlinks":[{"state":"LINK_STATE_UP"},{"state":2}]}]}`))
	f.Add([]byte(`{"generation":"12","collected_at":"2026-12-01T00:00:00Z"}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		m := &ginv1.NodeInventory{}
		if err := jsonout.Unmarshal(doc, m); err != nil {
			return
		}
		out, err := jsonout.Marshal(m)
		if err != nil {
			return // a non-finite double cannot be written; refused, not lost
		}
		back := &ginv1.NodeInventory{}
		if err := jsonout.Unmarshal(out, back); err != nil {
			t.Fatalf("cannot read back our own output: %v\n%s", err, out)
		}
		if !proto.Equal(m, back) {
			t.Fatalf("round trip changed the message:\n%v\n%v", m, back)
		}
	})
}
