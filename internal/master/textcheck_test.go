package master

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// TestControlCharactersRefusedInRequests: a control character, invalid
// UTF-8 or a bidi override in any request string (not only inventories)
// is refused with INVALID_ARGUMENT naming the field, and nothing is
// written. Each request is otherwise valid: without the planted byte it
// would be accepted (the last case checks one such).
func TestControlCharactersRefusedInRequests(t *testing.T) {
	s, conn := startServer(t, time.Minute)
	registerNodes(t, s, "dgx-h100", "node001", "node002")
	admin := ginv1.NewAdminServiceClient(conn)
	cal := ginv1.NewCalibrationServiceClient(conn)
	plans := ginv1.NewPlanServiceClient(conn)
	topo := ginv1.NewTopologyServiceClient(conn)
	measurement := func(edit func(*ginv1.ImportMeasurementRequest)) *ginv1.ImportMeasurementRequest {
		r := &ginv1.ImportMeasurementRequest{
			Nodes: "node[001-002]", GpusPerNode: 8, Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE,
			Algorithm: ginv1.Algorithm_ALGORITHM_TREE, ForcedBy: "flag", NcclVersion: "2.21.5", Source: "x.log:1",
			Points: []*ginv1.MeasuredPoint{{Bytes: 1 << 20, TimeUs: 60, BusBwGbps: 30}, {Bytes: 1 << 30, TimeUs: 11000, BusBwGbps: 180}},
		}
		edit(r)
		return r
	}
	tests := []struct {
		name  string
		call  func(ctx context.Context) error
		field string
	}{
		{"calibration source ESC", func(ctx context.Context) error {
			_, err := cal.ImportMeasurement(ctx, measurement(func(r *ginv1.ImportMeasurementRequest) { r.Source = "x.log\x1b[2J" }))
			return err
		}, "source"},
		{"calibration forced_by bidi", func(ctx context.Context) error {
			_, err := cal.ImportMeasurement(ctx, measurement(func(r *ginv1.ImportMeasurementRequest) { r.ForcedBy = "fl\u202eag" }))
			return err
		}, "forced_by"},
		{"calibration nccl_version newline", func(ctx context.Context) error {
			_, err := cal.ImportMeasurement(ctx, measurement(func(r *ginv1.ImportMeasurementRequest) { r.NcclVersion = "2.21.5\nforged log line" }))
			return err
		}, "nccl_version"},
		{"plan node list ESC", func(ctx context.Context) error {
			_, err := plans.GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "42", Nodes: "node[001-002]\x1b[31m", GpusPerNode: 8})
			return err
		}, "nodes"},
		{"estimate node list C1", func(ctx context.Context) error {
			_, err := plans.Estimate(ctx, &ginv1.EstimateRequest{Nodes: "node001\u009b", Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE, SizeBytes: 1 << 20})
			return err
		}, "nodes"},
		{"fabric switch description", func(ctx context.Context) error {
			_, err := admin.ImportFabric(ctx, &ginv1.ImportFabricRequest{Fabric: &ginv1.FabricTopology{Source: "test",
				Switches: []*ginv1.FabricSwitch{{Guid: "0x1", Description: "leaf\x1b]0;owned\x07"}}}})
			return err
		}, "fabric.switches[0].description"},
		{"remove server id", func(ctx context.Context) error {
			_, err := admin.RemoveServer(ctx, &ginv1.RemoveServerRequest{ServerId: "m9\r"})
			return err
		}, "server_id"},
		{"join client address", func(ctx context.Context) error {
			_, err := admin.Join(ctx, &ginv1.JoinRequest{ServerId: "m9", RaftAddress: "127.0.0.1:1", ClientAddress: "127.0.0.1:2\u2066", ClusterId: s.store.ClusterID()})
			return err
		}, "client_address"},
		{"get node name", func(ctx context.Context) error {
			_, err := topo.GetNode(ctx, &ginv1.GetNodeRequest{Name: "node001\u202e"})
			return err
		}, "name"},
		{"path gpu id", func(ctx context.Context) error {
			_, err := topo.GetPath(ctx, &ginv1.GetPathRequest{FromGpu: "node001:0\x00", ToGpu: "node002:0"})
			return err
		}, "from_gpu"},
		{"session hello agent_version", func(ctx context.Context) error {
			st, err := ginv1.NewAgentServiceClient(conn).Session(ctx)
			if err != nil {
				return err
			}
			if err := st.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Hello{Hello: &ginv1.Hello{
				NodeName: "node003", MachineId: "m-node003", AgentVersion: "1.0\x1b[8m"}}}); err != nil {
				return err
			}
			_, err = st.Recv()
			return err
		}, "hello.agent_version"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			before := s.store.Index()
			err := tc.call(ctx)
			if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), tc.field+": ") {
				t.Fatalf("err = %v; want INVALID_ARGUMENT naming %s", err, tc.field)
			}
			if !strings.Contains(err.Error(), "character") && !strings.Contains(err.Error(), "UTF-8") && !strings.Contains(err.Error(), "bidirectional") {
				t.Errorf("err = %v; want it to say what was wrong", err)
			}
			if after := s.store.Index(); after != before {
				t.Errorf("a refused request changed the state (index %d -> %d)", before, after)
			}
		})
	}
	// Invalid UTF-8 never gets this far: proto3 string fields are refused
	// by the protobuf codec on both sides.
	// The same import without the planted byte is accepted: the cases
	// above were refused for the character, not for something else.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cal.ImportMeasurement(ctx, measurement(func(*ginv1.ImportMeasurementRequest) {})); err != nil {
		t.Fatalf("clean import: %v", err)
	}
}

// The walk names the refused field by its whole path (list indexes, map
// keys, nested messages), and a clean request passes.
func TestCheckRequestTextPaths(t *testing.T) {
	inv := simInventory(t, "dgx-h100", "node001")
	badGPU := proto.CloneOf(inv)
	badGPU.Gpus[1].Uuid = "GPU-\x1b[2J"
	badLink := proto.CloneOf(inv)
	badLink.Gpus[3].Nvlinks[2].RemotePciBusId = "0000:01:00.0\u202e"
	str := func(s string) *structpb.Value { return structpb.NewStringValue(s) }
	tests := []struct {
		name string
		m    proto.Message
		want string // the field named, "" for none
	}{
		{"clean inventory", &ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Inventory{Inventory: inv}}, ""},
		{"gpu uuid", &ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Inventory{Inventory: badGPU}}, "inventory.gpus[1].uuid"},
		{"nvlink remote", &ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Inventory{Inventory: badLink}}, "inventory.gpus[3].nvlinks[2].remote_pci_bus_id"},
		{"map value", &structpb.Struct{Fields: map[string]*structpb.Value{"ok": str("a"), "k": str("b\x00")}}, `fields["k"].string_value`},
		{"map key after good entries", &structpb.Struct{Fields: map[string]*structpb.Value{"a": str("x"), "b": str("y"), "c\x1b": str("z")}}, "fields"},
		{"list in a map", &structpb.Struct{Fields: map[string]*structpb.Value{"a": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{str("x"), str("y\r")}})}},
			`fields["a"].list_value.values[1].string_value`},
		{"clean struct", &structpb.Struct{Fields: map[string]*structpb.Value{"a": str("x"), "b": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{str("y")}})}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkRequestText(tt.m)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused a clean request: %v", err)
				}
				return
			}
			var br *badRequest
			if !errors.As(err, &br) {
				t.Fatalf("want a bad request naming %s, got %v", tt.want, err)
			}
			if br.field != tt.want {
				t.Errorf("names %q, want %q (%v)", br.field, tt.want, err)
			}
		})
	}
}
