package jsonout_test

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/jsonout"
	"github.com/gin-topology/gin/internal/jsonout/schematest"
)

// view is a Go struct as a command might print it: omitempty is ignored,
// untagged fields are left out, messages inside follow the proto rules.
type view struct {
	Name     string             `json:"name,omitempty"`
	Count    uint64             `json:"count,omitempty"`
	Labels   []string           `json:"labels"`
	Extra    map[string]int     `json:"extra"`
	Node     *ginv1.NodeSummary `json:"node"`
	When     time.Time          `json:"when"`
	internal int
	Untagged int
}

func TestMarshal(t *testing.T) {
	changed := time.Date(2026, 12, 1, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"zero message: every field present, in .proto order",
			&ginv1.NodeSummary{},
			`{"name":"","state":"unspecified","state_reason":"","generation":0,"system_model":"","gpu_count":0,"gpu_model":"","nvlinks_up":0,"nvlinks_total":0,"compute_ports_up":0,"compute_ports_total":0,"nvlink_domain":"","leaf_switch":"","state_changed_at":null,"updated_index":0}`},
		{"enum word, 64-bit number, timestamp",
			&ginv1.NodeSummary{Name: "node001", State: ginv1.NodeState_NODE_STATE_UP, Generation: math.MaxUint64, StateChangedAt: timestamppb.New(changed)},
			`{"name":"node001","state":"up","state_reason":"","generation":18446744073709551615,"system_model":"","gpu_count":0,"gpu_model":"","nvlinks_up":0,"nvlinks_total":0,"compute_ports_up":0,"compute_ports_total":0,"nvlink_domain":"","leaf_switch":"","state_changed_at":"2026-12-01T03:04:05Z","updated_index":0}`},
		{"multi-word enum values, doubles",
			&ginv1.Prediction{Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE, SizeBytes: 14000000000, Algorithm: ginv1.Algorithm_ALGORITHM_NVLS_TREE, Protocol: ginv1.Protocol_PROTOCOL_LL128, TimeUs: 12.5, BusbwGbps: 0.1},
			`{"collective":"all_reduce","size_bytes":14000000000,"algorithm":"nvls_tree","protocol":"ll128","channels":0,"time_us":12.5,"algbw_gbps":0,"busbw_gbps":0.1,"n_ranks":0,"n_nodes":0,"basis":"","evidence":""}`},
		{"an enum number the descriptor does not know",
			&ginv1.MatrixCell{Class: 42},
			`{"class":"unknown_42","count":0,"bottleneck_mb_per_s":0}`},
		{"duration and empty list",
			&ginv1.ReadInfo{Index: 7, Staleness: durationpb.New(1500 * time.Millisecond)},
			`{"index":7,"served_by":"","leader":false,"staleness":"1.5s","lag":0}`},
		{"lists of messages and strings, <> not escaped",
			&ginv1.Path{Label: "NV18", Hops: []*ginv1.PathHop{{Kind: "gpu", Id: "a->b"}}},
			`{"class":"unspecified","label":"NV18","nvlink_count":0,"switch_hops":0,"bottleneck_mb_per_s":0,"oversubscription":0,"from_nic":"","to_nic":"","gpudirect":false,"hops":[{"kind":"gpu","id":"a->b","node_name":"","link_mb_per_s":0}],"note":""}`},
		{"bytes are base64",
			&ginv1.ExportResponse{Content: []byte("hi")},
			`{"content":"aGk=","content_type":"","read":null}`},
		{"a Go struct: zero values present, sorted map keys, nested message",
			view{Extra: map[string]int{"b": 2, "a": 1}, Node: &ginv1.NodeSummary{Name: "n"}, When: changed, Untagged: 3},
			`{"name":"","count":0,"labels":[],"extra":{"a":1,"b":2},"node":{"name":"n","state":"unspecified","state_reason":"","generation":0,"system_model":"","gpu_count":0,"gpu_model":"","nvlinks_up":0,"nvlinks_total":0,"compute_ports_up":0,"compute_ports_total":0,"nvlink_domain":"","leaf_switch":"","state_changed_at":null,"updated_index":0},"when":"2026-12-01T03:04:05Z"}`},
		{"a slice of messages", []*ginv1.Member{{Id: "m1", Leader: true}},
			`[{"id":"m1","address":"","leader":true,"voter":false,"client_address":"","reachable":null,"last_contact_ms":null,"http_address":""}]`},
		{"nil slice is an empty array", []*ginv1.Member(nil), `[]`},
		{"nil message is null", (*ginv1.Member)(nil), `null`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := jsonout.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			if !json.Valid(got) {
				t.Fatalf("not valid JSON: %s", got)
			}
		})
	}
}

func TestMarshalRefusesNonFinite(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		_, err := jsonout.Marshal([]*ginv1.Prediction{{}, {TimeUs: f}})
		if err == nil || !strings.Contains(err.Error(), "[1].time_us") {
			t.Fatalf("Marshal(time_us=%v) = %v, want an error naming [1].time_us", f, err)
		}
	}
}

func TestWriteIsStableAndIndented(t *testing.T) {
	v := &ginv1.GetClusterInfoResponse{ServerId: "m1", Members: []*ginv1.Member{{Id: "m1"}, {Id: "m2"}}}
	var a, b bytes.Buffer
	if err := jsonout.Write(&a, v); err != nil {
		t.Fatal(err)
	}
	if err := jsonout.Write(&b, v); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Fatal("two writes of one value differ")
	}
	if !strings.HasPrefix(a.String(), "{\n  \"server_id\": \"m1\",\n") || !strings.HasSuffix(a.String(), "}\n") {
		t.Fatalf("not indented by two spaces with a final newline:\n%s", a.String())
	}
	var line bytes.Buffer
	if err := jsonout.WriteLine(&line, v); err != nil {
		t.Fatal(err)
	}
	if strings.Count(line.String(), "\n") != 1 || !strings.HasSuffix(line.String(), "}\n") {
		t.Fatalf("WriteLine wrote not one line: %q", line.String())
	}
}

func TestEnumWord(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"node state", jsonout.EnumWord(ginv1.NodeState_NODE_STATE_DRAINING.Descriptor(), 3), "draining"},
		{"path class sharing a letter after the prefix", jsonout.EnumWord(ginv1.PathClass_PATH_CLASS_NODE.Descriptor(), 6), "node"},
		{"watch event kind", jsonout.EnumWord(ginv1.WatchEventKind_WATCH_EVENT_KIND_FABRIC_IMPORTED.Descriptor(), 3), "fabric_imported"},
		{"zero value", jsonout.EnumWord(ginv1.Algorithm_ALGORITHM_UNSPECIFIED.Descriptor(), 0), "unspecified"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

// TestSchemaAcceptsWhatMarshalWrites checks each generated schema with a
// full validator: it is a valid draft 2020-12 schema, the encoder's output
// conforms, and documents in another dialect (protojson's) do not.
func TestSchemaAcceptsWhatMarshalWrites(t *testing.T) {
	full := &ginv1.GetNodeResponse{
		Summary:   &ginv1.NodeSummary{Name: "node001", State: ginv1.NodeState_NODE_STATE_UP, Generation: 3, StateChangedAt: timestamppb.Now()},
		Inventory: &ginv1.NodeInventory{NodeName: "node001", Gpus: []*ginv1.Gpu{{Index: 0, Nvlinks: []*ginv1.NvLink{{}}}}},
		Read:      &ginv1.ReadInfo{Staleness: durationpb.New(0)},
	}
	tests := []struct {
		name   string
		sample any
		v      any
		reject []string
	}{
		{"node", (*ginv1.GetNodeResponse)(nil), full, []string{
			`{}`,
			strings.Replace(mustMarshal(t, full), `"generation":3`, `"generation":"3"`, 1),
			strings.Replace(mustMarshal(t, full), `"state":"up"`, `"state":"NODE_STATE_UP"`, 1),
			strings.Replace(mustMarshal(t, full), `"state_reason":"",`, ``, 1),
		}},
		{"nodes", []*ginv1.NodeSummary(nil), []*ginv1.NodeSummary{full.Summary, {}}, []string{`{}`, `[{"name":"x"}]`}},
		{"view", view{}, view{Node: &ginv1.NodeSummary{}}, []string{`{"name":""}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			schema, err := jsonout.Schema("test "+tc.name, tc.sample)
			if err != nil {
				t.Fatal(err)
			}
			s, err := schematest.Compile(tc.name, schema)
			if err != nil {
				t.Fatalf("%v\n%s", err, schema)
			}
			if err := schematest.Validate(s, []byte(mustMarshal(t, tc.v)), false); err != nil {
				t.Fatalf("the encoder's output does not conform: %v", err)
			}
			for _, bad := range tc.reject {
				if err := schematest.Validate(s, []byte(bad), false); err == nil {
					t.Errorf("schema accepts %s", bad)
				}
			}
		})
	}
}

func TestSchemaRefusesTypesWithoutJSONForm(t *testing.T) {
	for _, sample := range []any{nil, map[int]string{}, make(chan int)} {
		if _, err := jsonout.Schema("bad", sample); err == nil {
			t.Errorf("Schema(%T) = nil error", sample)
		}
	}
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := jsonout.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestWriteYAML: -o yaml is the JSON document in YAML: same keys and order,
// strings that look like other types stay strings, 64-bit numbers exact.
func TestWriteYAML(t *testing.T) {
	v := []*ginv1.NodeSummary{{Name: "node001", State: ginv1.NodeState_NODE_STATE_UP, Generation: math.MaxUint64, GpuModel: "yes", SystemModel: "1.0"}}
	var b bytes.Buffer
	if err := jsonout.WriteYAML(&b, v); err != nil {
		t.Fatal(err)
	}
	want := `- name: node001
  state: up
  state_reason: ""
  generation: 18446744073709551615
  system_model: "1.0"
  gpu_count: 0
  gpu_model: "yes"
  nvlinks_up: 0
  nvlinks_total: 0
  compute_ports_up: 0
  compute_ports_total: 0
  nvlink_domain: ""
  leaf_switch: ""
  state_changed_at: null
  updated_index: 0
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}
