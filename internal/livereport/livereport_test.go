package livereport

import (
	"context"
	"errors"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/rankreport"
)

func frame(t *testing.T, edit func(*rankreport.Report)) []byte {
	t.Helper()
	r := rankreport.Report{CommID: 1, NRanks: 4, NNodes: 2, Rank: 1, LocalRank: 1, GPU: 1, PID: 500, Job: "7",
		StartNs: 1, EndNs: 2, Started: 3, Done: 3,
		Peers: []rankreport.Peer{{Peer: 3, Dir: rankreport.Send, Bytes: 10, Steps: 1, WaitNs: [3]uint64{1, 2, 3}}}}
	if edit != nil {
		edit(&r)
	}
	b, err := rankreport.Append(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type sink struct {
	reqs []*ginv1.ReportRanksRequest
	err  error
}

func (s *sink) ReportRanks(_ context.Context, r *ginv1.ReportRanksRequest) (*ginv1.ReportRanksResponse, error) {
	s.reqs = append(s.reqs, r)
	return &ginv1.ReportRanksResponse{}, s.err
}

func TestReportChecksTheSender(t *testing.T) {
	c := New("node001", func(g int32) string { return map[int32]string{1: "mlx5_3"}[g] }, nil)
	if err := c.Report(1000, 500, frame(t, nil)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		uid, pid uint32
		frame    []byte
		want     error
	}{
		{"pid not the sender's", 1000, 501, frame(t, nil), ErrPID},
		{"another user's rank", 1001, 500, frame(t, nil), ErrOwner},
		{"no job", 1000, 500, frame(t, func(r *rankreport.Report) { r.Job = "" }), ErrNoJob},
		{"malformed", 1000, 500, frame(t, nil)[:20], errDecoded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := c.Report(tc.uid, tc.pid, tc.frame); !errors.Is(err, tc.want) {
				t.Fatalf("%v, want %v", err, tc.want)
			}
		})
	}
	// Another user's rank of another job is its own.
	if err := c.Report(1001, 600, frame(t, func(r *rankreport.Report) { r.Job, r.PID = "8", 600 })); err != nil {
		t.Fatal(err)
	}
	if n := c.Counts(); n.Taken != 2 || n.Refused != 4 {
		t.Fatalf("counts %+v, want 2 taken, 4 refused", n)
	}
	s := &sink{}
	if err := c.Flush(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if len(s.reqs) != 1 || len(s.reqs[0].GetWindows()) != 2 || s.reqs[0].GetNodeName() != "node001" {
		t.Fatalf("flushed %v", s.reqs)
	}
	w := s.reqs[0].GetWindows()[0]
	if w.GetNic() != "mlx5_3" || w.GetGpuIndex() != 1 || w.GetPeers()[0].GetWaitNs()[2] != 3 || !w.GetPeers()[0].GetSend() {
		t.Errorf("window %v", w)
	}
	// Nothing held: a flush sends nothing.
	if err := c.Flush(context.Background(), s); err != nil || len(s.reqs) != 1 {
		t.Fatalf("empty flush: %v, %d calls", err, len(s.reqs))
	}
}

func TestPendingIsBoundedAndFailuresCounted(t *testing.T) {
	c := New("node001", nil, nil)
	for i := 0; i < MaxPending+10; i++ {
		if err := c.Report(0, 500, frame(t, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Counts(); n.Dropped != 10 {
		t.Fatalf("dropped %d, want 10", n.Dropped)
	}
	s := &sink{err: errors.New("masters down")}
	if err := c.Flush(context.Background(), s); err == nil {
		t.Fatal("a failed send must say so")
	}
	if len(s.reqs) != (MaxPending+maxPerCall-1)/maxPerCall {
		t.Errorf("%d calls for %d windows", len(s.reqs), MaxPending)
	}
	if n := c.Counts(); n.SendFailed != MaxPending || n.Sent != 0 {
		t.Fatalf("counts %+v", n)
	}
}
