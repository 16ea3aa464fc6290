package main

import (
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// batchWatch serves Watch: events (index, node) after the request's
// since_index, then ends with UNAVAILABLE (cut) or waits for the client
// to leave; since records what each request asked for.
type batchWatch struct {
	ginv1.UnimplementedTopologyServiceServer
	events []*ginv1.WatchResponse
	cut    bool
	since  chan uint64
}

func (b *batchWatch) Watch(req *ginv1.WatchRequest, st ginv1.TopologyService_WatchServer) error {
	b.since <- req.GetSinceIndex()
	for _, ev := range b.events {
		if ev.GetIndex() > req.GetSinceIndex() {
			if err := st.Send(ev); err != nil {
				return err
			}
		}
	}
	if b.cut {
		return status.Error(codes.Unavailable, "master going away")
	}
	<-st.Context().Done()
	return nil
}

func serveWatch(t *testing.T, b *batchWatch) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	ginv1.RegisterTopologyServiceServer(s, b)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

func stateEvent(index uint64, node string) *ginv1.WatchResponse {
	return &ginv1.WatchResponse{Index: index, Kind: ginv1.WatchEventKind_WATCH_EVENT_KIND_NODE_STATE,
		Node: &ginv1.NodeSummary{Name: node}, OldState: ginv1.NodeState_NODE_STATE_UP, NewState: ginv1.NodeState_NODE_STATE_DOWN}
}

// TestWatchKeepsEveryEventOfABatch: a batch of node state changes is one
// Raft entry, so many events share an index. Every one is printed, and a
// watch that moves to another master mid-batch resumes from the index
// before it and prints the rest of the batch once, not again and not lost.
func TestWatchKeepsEveryEventOfABatch(t *testing.T) {
	first := &batchWatch{events: []*ginv1.WatchResponse{stateEvent(5, "n1"), stateEvent(5, "n2")}, cut: true, since: make(chan uint64, 4)}
	second := &batchWatch{events: []*ginv1.WatchResponse{stateEvent(5, "n1"), stateEvent(5, "n2"), stateEvent(5, "n3"), stateEvent(6, "n4")},
		since: make(chan uint64, 4)}
	masters := serveWatch(t, first) + "," + serveWatch(t, second)
	out, errOut := watchUntil(t, masters, 4, nil, "--since", "4", "-o", "json")
	var nodes []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		for _, n := range []string{"n1", "n2", "n3", "n4"} {
			if strings.Contains(line, `"name": "`+n+`"`) || strings.Contains(line, `"name":"`+n+`"`) {
				nodes = append(nodes, n)
			}
		}
	}
	if strings.Join(nodes, ",") != "n1,n2,n3,n4" {
		t.Fatalf("events printed for %v, want n1,n2,n3,n4 once each\nstdout %s\nstderr %s", nodes, out, errOut)
	}
	if got := <-second.since; got != 4 {
		t.Errorf("the resumed watch asked for events after %d, want 4 (the index before the batch it was in)", got)
	}
	if !strings.Contains(errOut, "resuming after index 5") {
		t.Errorf("stderr %q does not say where it resumed", errOut)
	}
}
