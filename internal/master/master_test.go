package master

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/inventory"
	"github.com/gin-topology/gin/internal/testkit"
)

// startServer runs a single-voter master on loopback with a real Raft data dir.
// hb is the agents' heartbeat interval: liveness marks a node that has sent
// none DOWN after 3×hb, a Raft write, so a test that compares the Raft index
// before and after passes time.Minute (a loaded machine can take seconds).
func startServer(t *testing.T, hb time.Duration) (*Server, *grpc.ClientConn) {
	t.Helper()
	return startServerLogging(t, hb, slog.New(slog.DiscardHandler))
}

func startServerLogging(t *testing.T, hb time.Duration, log *slog.Logger) (*Server, *grpc.ClientConn) {
	t.Helper()
	s, err := New(Config{ID: "m1", Bind: "127.0.0.1:0", RaftBind: "127.0.0.1:0", DataDir: t.TempDir(),
		Bootstrap: true, FastRaft: true, HeartbeatInterval: hb, MissedHeartbeats: 3,
		Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-served
		_ = s.Close()
	})
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := s.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	// Leader, with the cluster id set and itself registered: no background
	// write may race with a test's checks of the Raft index.
	for !s.node.IsLeader() || s.store.ClusterID() == "" || !registered(s) {
		select {
		case <-wctx.Done():
			t.Fatal("no leadership")
		case <-time.After(10 * time.Millisecond):
		}
	}
	return s, dialPlain(t, s.Addr())
}

// dialPlain is a plaintext client connection to addr, closed with the test.
func dialPlain(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func simInventory(t testing.TB, profile, node string) *ginv1.NodeInventory {
	t.Helper()
	src, err := sim.NewSource(profile, sim.NodeOptions{NodeName: node, Cluster: "test"})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := src.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

type session struct {
	t      *testing.T
	stream ginv1.AgentService_SessionClient
}

func openSession(t *testing.T, conn *grpc.ClientConn, inv *ginv1.NodeInventory) (*session, *ginv1.HelloAck) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	st, err := ginv1.NewAgentServiceClient(conn).Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hash, _ := inventory.ContentHash(inv)
	if err := st.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Hello{Hello: &ginv1.Hello{
		NodeName: inv.GetNodeName(), MachineId: inv.GetHost().GetMachineId(), InventoryHash: hash}}}); err != nil {
		t.Fatal(err)
	}
	resp, err := st.Recv()
	if err != nil {
		return &session{t: t, stream: st}, nil
	}
	if resp.GetHeartbeatInterval().AsDuration() <= 0 {
		t.Errorf("response without heartbeat interval: %v", resp)
	}
	return &session{t: t, stream: st}, resp.GetHelloAck()
}

func (s *session) send(inv *ginv1.NodeInventory) (*ginv1.InventoryAck, error) {
	s.t.Helper()
	if err := s.stream.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Inventory{Inventory: inv}}); err != nil && !errors.Is(err, io.EOF) {
		s.t.Fatal(err)
	}
	resp, err := s.stream.Recv()
	if err != nil {
		return nil, err
	}
	return resp.GetInventoryAck(), nil
}

func TestSessionRegistersAndResyncsByGeneration(t *testing.T) {
	s, conn := startServer(t, time.Second)
	inv := simInventory(t, "dgx-h100", "node001")

	sess, ack := openSession(t, conn, inv)
	if ack == nil || ack.GetHeldGeneration() != 0 || ack.GetInSync() {
		t.Fatalf("first hello ack = %v, want held 0, not in sync", ack)
	}
	inv.Generation = 1
	iack, err := sess.send(inv)
	if err != nil || iack.GetAcceptedGeneration() != 1 || iack.GetIndex() == 0 {
		t.Fatalf("inventory ack = %v, %v; want generation 1 with an index", iack, err)
	}
	_ = sess.stream.CloseSend()

	// Reconnect with the same content: nothing needs to be sent.
	_, ack = openSession(t, conn, inv)
	if ack == nil || ack.GetHeldGeneration() != 1 || !ack.GetInSync() {
		t.Fatalf("reconnect hello ack = %v, want held 1, in sync", ack)
	}

	// The same entry applied again (an agent retrying after an unknown
	// outcome) is a no-op.
	before := s.store.Index()
	sess2, _ := openSession(t, conn, inv)
	iack, err = sess2.send(inv)
	if err != nil || iack.GetAcceptedGeneration() != 1 {
		t.Fatalf("re-sent generation 1: %v, %v", iack, err)
	}
	rec, _ := s.store.Node("node001")
	if rec.GetUpdatedIndex() > before {
		t.Errorf("duplicate inventory changed the record (updated index %d > %d)", rec.GetUpdatedIndex(), before)
	}

	// A changed node at the next generation is taken.
	changed := proto.CloneOf(inv)
	changed.Generation = 2
	changed.Gpus[0].Nvlinks[0].State = ginv1.LinkState_LINK_STATE_DOWN
	sess3, ack := openSession(t, conn, changed)
	if ack.GetInSync() {
		t.Fatal("changed content reported in sync")
	}
	if iack, err = sess3.send(changed); err != nil || iack.GetAcceptedGeneration() != 2 {
		t.Fatalf("generation 2: %v, %v", iack, err)
	}

	// A delta against generation 2 brings the link back up at generation 3.
	healed := proto.CloneOf(changed)
	healed.Generation = 3
	healed.Gpus[0].Nvlinks[0].State = ginv1.LinkState_LINK_STATE_UP
	d := inventory.Diff(changed, healed)
	if len(d.GetUpsertGpus()) != 1 || len(d.GetUpsertHcas()) != 0 {
		t.Fatalf("delta carries %d GPUs and %d HCAs, want 1 and 0", len(d.GetUpsertGpus()), len(d.GetUpsertHcas()))
	}
	if err := sess3.stream.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Delta{Delta: d}}); err != nil {
		t.Fatal(err)
	}
	if r, err := sess3.stream.Recv(); err != nil || r.GetInventoryAck().GetAcceptedGeneration() != 3 {
		t.Fatalf("delta to generation 3: %v, %v", r, err)
	}
	rec, _ = s.store.Node("node001")
	if want, _ := inventory.ContentHash(healed); rec.GetContentHash() != want {
		t.Fatal("the master's inventory after the delta differs from the agent's")
	}

	resp, err := ginv1.NewTopologyServiceClient(conn).ListNodes(context.Background(), &ginv1.ListNodesRequest{})
	if err != nil || len(resp.GetNodes()) != 1 {
		t.Fatalf("ListNodes = %v, %v", resp, err)
	}
	n := resp.GetNodes()[0]
	if n.GetGeneration() != 3 || n.GetState() != ginv1.NodeState_NODE_STATE_UP || n.GetNvlinksUp() != n.GetNvlinksTotal() {
		t.Errorf("node summary = %v; want generation 3, up, every NVLink up", n)
	}
	if resp.GetRead().GetIndex() == 0 || resp.GetRead().GetServedBy() != "m1" || !resp.GetRead().GetLeader() {
		t.Errorf("read info = %v", resp.GetRead())
	}
}

// An agent older than canonical identities sends them as its sources
// wrote them (NVML's bus ids, sysfs's GUIDs): the master stores the
// canonical form under its hash, and an agent that hashes the canonical
// form is found in sync.
func TestSourceFormIdentitiesAreStoredCanonical(t *testing.T) {
	s, conn := startServer(t, time.Second)
	canon := simInventory(t, "dgx-h100", "node001")
	canon.Generation = 1
	if c, changed := inventory.Canonical(canon); changed {
		t.Fatalf("the simulator's inventory is not canonical: %v", c)
	}
	raw := proto.CloneOf(canon)
	for _, g := range raw.GetGpus() {
		g.PciBusId = "0000" + strings.ToUpper(g.GetPciBusId()) // NVML: "00000000:1B:00.0"
	}
	for _, h := range raw.GetHcas() {
		h.NodeGuid = sysfsGUID(h.GetNodeGuid())
		for _, p := range h.GetPorts() {
			p.PortGuid = sysfsGUID(p.GetPortGuid())
		}
	}
	sess, _ := openSession(t, conn, raw)
	if ack, err := sess.send(raw); err != nil || ack.GetAcceptedGeneration() != 1 {
		t.Fatalf("source-form inventory: %v, %v", ack, err)
	}
	rec, _ := s.store.Node("node001")
	if !proto.Equal(rec.GetInventory(), canon) {
		t.Errorf("stored inventory is not the canonical form of what was sent")
	}
	if want, _ := inventory.ContentHash(canon); rec.GetContentHash() != want {
		t.Errorf("stored hash %.12s, want the canonical form's %.12s", rec.GetContentHash(), want)
	}
	if _, ack := openSession(t, conn, canon); !ack.GetInSync() {
		t.Error("an agent holding the canonical form is not in sync")
	}
}

// sysfsGUID writes "0x0002c903004f1a2b" as sysfs does: "0002:c903:004f:1a2b".
func sysfsGUID(g string) string {
	h := strings.TrimPrefix(g, "0x")
	if len(h) != 16 {
		return g
	}
	return h[0:4] + ":" + h[4:8] + ":" + h[8:12] + ":" + h[12:16]
}

func TestBadInventoryIsRejectedAndChangesNothing(t *testing.T) {
	s, conn := startServer(t, time.Minute)
	good := simInventory(t, "dgx-h100", "node001")
	good.Generation = 1
	sess, _ := openSession(t, conn, good)
	if _, err := sess.send(good); err != nil {
		t.Fatal(err)
	}
	held, _ := s.store.Node("node001")

	tests := []struct {
		name   string
		mutate func(*ginv1.NodeInventory)
		code   codes.Code
		field  string
	}{
		{"two GPUs with one UUID", func(i *ginv1.NodeInventory) { i.Gpus[1].Uuid = i.Gpus[0].Uuid }, codes.InvalidArgument, "gpus[1].uuid"},
		{"NVLink to a GPU that does not exist", func(i *ginv1.NodeInventory) {
			i.Gpus[0].Nvlinks[0].RemoteType = ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_GPU
			i.Gpus[0].Nvlinks[0].RemotePciBusId = "0000:ee:00.0"
		}, codes.InvalidArgument, "gpus[0].nvlinks[0].remote_pci_bus_id"},
		{"too many GPUs", func(i *ginv1.NodeInventory) {
			for k := 0; k < inventory.MaxGPUs; k++ {
				g := proto.CloneOf(i.Gpus[0])
				g.Uuid, g.Index, g.PciBusId, g.Nvlinks = g.Uuid+"x"+string(rune('a'+k%26))+string(rune('a'+k/26)), uint32(100+k), "", nil
				i.Gpus = append(i.Gpus, g)
			}
		}, codes.InvalidArgument, "gpus"},
		{"stale generation with other content", func(i *ginv1.NodeInventory) {
			i.Generation = 1
			i.Gpus[0].Model = "something else"
		}, codes.FailedPrecondition, ""},
		{"inventory for another node", func(i *ginv1.NodeInventory) { i.NodeName = "node002" }, codes.InvalidArgument, "inventory.node_name"},
		{"a node GUID that is no GUID", func(i *ginv1.NodeInventory) { i.Hcas[0].NodeGuid = "mlx5_0" }, codes.InvalidArgument, "hcas[0].node_guid"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bad := proto.CloneOf(good)
			bad.Generation = 2
			tc.mutate(bad)
			before := s.store.Index()
			sess, _ := openSession(t, conn, good)
			_, err := sess.send(bad)
			st := status.Convert(err)
			if st.Code() != tc.code {
				t.Fatalf("code = %v (%v), want %v", st.Code(), err, tc.code)
			}
			if tc.field != "" {
				found := false
				for _, d := range st.Details() {
					if br, ok := d.(*errdetails.BadRequest); ok {
						for _, fv := range br.GetFieldViolations() {
							found = found || fv.GetField() == tc.field
						}
					}
				}
				if !found {
					t.Errorf("status %v does not name field %q", st, tc.field)
				}
			}
			rec, _ := s.store.Node("node001")
			if !proto.Equal(rec, held) || s.store.Index() != before {
				t.Errorf("state changed after a rejected inventory (index %d -> %d)", before, s.store.Index())
			}
		})
	}

	t.Run("empty node name", func(t *testing.T) {
		inv := proto.CloneOf(good)
		inv.NodeName = ""
		sess, ack := openSession(t, conn, inv)
		if ack != nil {
			t.Fatalf("hello with an empty node name was acked: %v", ack)
		}
		_, err := sess.stream.Recv()
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("code = %v, want InvalidArgument", err)
		}
	})
	// An empty machine_id is a mismatch, never a skip (issue #11: a hello
	// without one and a higher generation shrank a node from 8 GPUs to 2).
	for _, machine := range []string{"another-machine", ""} {
		t.Run("name claimed by machine "+strconv.Quote(machine), func(t *testing.T) {
			before := s.store.Index()
			inv := proto.CloneOf(good)
			inv.Host.MachineId = machine
			sess, ack := openSession(t, conn, inv)
			if ack != nil {
				t.Fatalf("hello from machine %q was acked: %v", machine, ack)
			}
			_, err := sess.stream.Recv()
			if status.Code(err) != codes.AlreadyExists {
				t.Fatalf("code = %v, want AlreadyExists", err)
			}
			if s.store.Index() != before {
				t.Fatalf("state changed (index %d -> %d)", before, s.store.Index())
			}
		})
	}
	t.Run("inventory without machine id after a good hello", func(t *testing.T) {
		before := s.store.Index()
		sess, ack := openSession(t, conn, good)
		if ack == nil {
			t.Fatal("the real agent's hello was refused")
		}
		inv := proto.CloneOf(good)
		inv.Host.MachineId = ""
		inv.Generation = good.GetGeneration() + 100
		inv.Gpus = inv.Gpus[:2]
		if _, err := sess.send(inv); status.Code(err) != codes.AlreadyExists {
			t.Fatalf("inventory without machine id: %v, want AlreadyExists", err)
		}
		rec, _ := s.store.Node("node001")
		if len(rec.GetInventory().GetGpus()) != len(good.GetGpus()) || s.store.Index() != before {
			t.Fatalf("node001 has %d GPUs (index %d -> %d), want %d and no write", len(rec.GetInventory().GetGpus()), before, s.store.Index(), len(good.GetGpus()))
		}
	})
}

func TestMissedHeartbeatsMarkNodeDownAndBackUp(t *testing.T) {
	s, conn := startServer(t, 50*time.Millisecond)
	inv := simInventory(t, "rtx3090-nvlink-pair", "ws01")
	inv.Generation = 1
	sess, _ := openSession(t, conn, inv)
	if _, err := sess.send(inv); err != nil {
		t.Fatal(err)
	}
	waitState := func(want ginv1.NodeState) {
		t.Helper()
		testkit.WaitFor(t, 20*time.Second, "ws01 to be "+want.String(), func() bool {
			rec, _ := s.store.Node("ws01")
			return rec.GetState() == want
		})
	}
	waitState(ginv1.NodeState_NODE_STATE_DOWN) // no heartbeats are sent
	rec, _ := s.store.Node("ws01")
	if rec.GetStateReason() == "" {
		t.Error("down without a reason")
	}
	beat := func(seq uint64) {
		t.Helper()
		if err := sess.stream.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Heartbeat{Heartbeat: &ginv1.Heartbeat{Sequence: seq, Generation: 1}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := sess.stream.Recv(); err != nil { // the heartbeat ack: the beat was seen
			t.Fatal(err)
		}
	}
	// Damping: one stray heartbeat does not bring a down node back.
	beat(1)
	if rec, _ := s.store.Node("ws01"); rec.GetState() != ginv1.NodeState_NODE_STATE_DOWN {
		t.Fatalf("one heartbeat brought the node back: %v", rec.GetState())
	}
	beat(2)
	waitState(ginv1.NodeState_NODE_STATE_UP)
}

func TestReadsRejectBadSelectors(t *testing.T) {
	_, conn := startServer(t, time.Second)
	tc := ginv1.NewTopologyServiceClient(conn)
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
		code codes.Code
	}{
		{"bad hostlist", func() error {
			_, err := tc.ListNodes(ctx, &ginv1.ListNodesRequest{Nodes: "node[1-"})
			return err
		}, codes.InvalidArgument},
		{"unknown node", func() error {
			_, err := tc.GetMatrix(ctx, &ginv1.GetMatrixRequest{Nodes: "nope[1-2]"})
			return err
		}, codes.NotFound},
		{"unknown GPU", func() error {
			_, err := tc.GetPath(ctx, &ginv1.GetPathRequest{FromGpu: "x/GPU0", ToGpu: "y/GPU1"})
			return err
		}, codes.NotFound},
		{"consistent read on the leader", func() error {
			_, err := tc.ListNodes(ctx, &ginv1.ListNodesRequest{Consistency: ginv1.ReadConsistency_READ_CONSISTENCY_CONSISTENT})
			return err
		}, codes.OK},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			if got := status.Code(c.call()); got != c.code {
				t.Fatalf("code = %v, want %v", got, c.code)
			}
		})
	}
}

func registered(s *Server) bool {
	_, ok := s.store.Server(s.cfg.ID)
	return ok
}
