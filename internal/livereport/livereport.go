package livereport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/health"
	"github.com/gin-topology/gin/internal/rankreport"
	"github.com/gin-topology/gin/internal/redirect"
)

// Bounds of the agent's live state.
const (
	// MaxPending bounds the windows held between flushes (a node's ranks
	// send one a second each; masters down for long lose the oldest).
	MaxPending = 4096
	// MaxOwners bounds the (job, communicator, rank) owners remembered;
	// past it the table starts over.
	MaxOwners = 16384
	// DefaultFlush is how often the windows go to the masters.
	DefaultFlush = time.Second
)

// Sender is where the windows go (the masters).
type Sender interface {
	ReportRanks(ctx context.Context, req *ginv1.ReportRanksRequest) (*ginv1.ReportRanksResponse, error)
}

// Collector holds the node's windows between flushes; safe for concurrent
// use.
type Collector struct {
	node  string
	nicOf func(gpu int32) string
	log   *slog.Logger

	mu      sync.Mutex
	pending []*ginv1.RankWindow
	owners  map[ownerKey]uint32

	taken, refused, dropped, sent, sendFailed atomic.Uint64
}

type ownerKey struct {
	job  string
	comm uint64
	rank uint32
}

// New returns a collector for node; nicOf names the NIC nearest a GPU
// index ("" unknown; nil: none known).
func New(node string, nicOf func(gpu int32) string, log *slog.Logger) *Collector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if nicOf == nil {
		nicOf = func(int32) string { return "" }
	}
	return &Collector{node: node, nicOf: nicOf, log: log, owners: map[ownerKey]uint32{}}
}

// Errors of Report.
var (
	ErrNoJob   = errors.New("report without a job id (set NCCL_GIN_JOB_ID, or run under Slurm)")
	ErrPID     = errors.New("report's pid is not the sending process's")
	ErrOwner   = errors.New("rank reported by another user")
	errDecoded = errors.New("report frame")
)

// Report takes one frame from a process of uid and pid (plansock's
// ReportSink).
func (c *Collector) Report(uid, pid uint32, frame []byte) error {
	rep, err := rankreport.Decode(frame)
	if err != nil {
		c.refused.Add(1)
		return fmt.Errorf("%w: %w", errDecoded, err)
	}
	switch {
	case rep.Job == "":
		c.refused.Add(1)
		return ErrNoJob
	case rep.PID != pid:
		c.refused.Add(1)
		return fmt.Errorf("%w: says %d, sent by %d", ErrPID, rep.PID, pid)
	}
	k := ownerKey{rep.Job, rep.CommID, rep.Rank}
	w := window(rep, c.nicOf(rep.GPU))
	c.mu.Lock()
	defer c.mu.Unlock()
	if owner, ok := c.owners[k]; ok && owner != uid {
		c.refused.Add(1)
		return fmt.Errorf("%w: rank %d of communicator %#x of job %q is uid %d's, not uid %d's", ErrOwner, rep.Rank, rep.CommID, rep.Job, owner, uid)
	}
	if len(c.owners) >= MaxOwners {
		clear(c.owners)
	}
	c.owners[k] = uid
	if len(c.pending) >= MaxPending {
		n := len(c.pending) - MaxPending + 1
		c.pending = append(c.pending[:0], c.pending[n:]...)
		c.dropped.Add(uint64(n))
	}
	c.pending = append(c.pending, w)
	c.taken.Add(1)
	return nil
}

func window(rep rankreport.Report, nic string) *ginv1.RankWindow {
	w := &ginv1.RankWindow{
		Job: rep.Job, CommId: rep.CommID, Nranks: rep.NRanks, Nnodes: rep.NNodes, Rank: rep.Rank,
		GpuIndex: rep.GPU, Nic: nic, Pid: rep.PID,
		StartUnixNano: int64(rep.StartNs), EndUnixNano: int64(rep.EndNs),
		CollectivesStarted: rep.Started, CollectivesDone: rep.Done,
		InFlightSinceUnixNano: int64(rep.InFlightSinceNs), EventsDropped: rep.Dropped,
	}
	for _, cl := range rep.Colls {
		w.Collectives = append(w.Collectives, &ginv1.CollectiveWindow{
			Collective: cl.Func.String(), Log2Bytes: uint32(cl.Log2Size), Count: cl.Count, SumNs: cl.SumNs, MaxNs: cl.MaxNs})
	}
	for _, p := range rep.Peers {
		w.Peers = append(w.Peers, &ginv1.PeerWindow{Peer: p.Peer, Send: p.Dir == rankreport.Send, Bytes: p.Bytes, Steps: p.Steps,
			WaitNs: []uint64{p.WaitNs[0], p.WaitNs[1], p.WaitNs[2]}})
	}
	for _, a := range rep.Arrivals {
		w.Arrivals = append(w.Arrivals, &ginv1.Arrival{Seq: a.Seq, StartUnixNano: int64(a.StartNs)})
	}
	return w
}

// Counts are the collector's counters since it started.
type Counts struct {
	Taken, Refused, Dropped, Sent, SendFailed uint64
}

// Counts returns the counters (for /metrics).
func (c *Collector) Counts() Counts {
	return Counts{c.taken.Load(), c.refused.Load(), c.dropped.Load(), c.sent.Load(), c.sendFailed.Load()}
}

// Flush sends the held windows in calls of at most maxPerCall; windows a
// failed call carried are dropped (a window is worth little once the next
// is due) and counted.
func (c *Collector) Flush(ctx context.Context, s Sender) error {
	c.mu.Lock()
	ws := c.pending
	c.pending = nil
	c.mu.Unlock()
	var errs []error
	for len(ws) > 0 {
		n := min(len(ws), maxPerCall)
		if _, err := s.ReportRanks(ctx, &ginv1.ReportRanksRequest{NodeName: c.node, Windows: ws[:n]}); err != nil {
			c.sendFailed.Add(uint64(n))
			errs = append(errs, err)
		} else {
			c.sent.Add(uint64(n))
		}
		ws = ws[n:]
	}
	return errors.Join(errs...)
}

// maxPerCall is the master's MaxRankWindows.
const maxPerCall = 1024

// Run flushes every interval until ctx ends, logging a failing send at
// most once a minute.
func (c *Collector) Run(ctx context.Context, interval time.Duration, s Sender) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var lastLog time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fctx, cancel := context.WithTimeout(ctx, interval*2)
		err := c.Flush(fctx, s)
		cancel()
		if err != nil && time.Since(lastLog) >= time.Minute {
			lastLog = time.Now()
			c.log.Warn("live telemetry: windows not delivered to the masters", "failed_total", c.sendFailed.Load(), "err", err)
		}
	}
}

// NICOf returns the nearest-NIC function over the agent's current
// inventory (health.NearestNIC: the HCA NCCL pairs with the GPU).
func NICOf(inv func() *ginv1.NodeInventory) func(int32) string {
	return func(gpu int32) string {
		in := inv()
		if in == nil || gpu < 0 {
			return ""
		}
		for _, g := range in.GetGpus() {
			if int32(g.GetIndex()) == gpu {
				return health.NearestNIC(in, g).GetName()
			}
		}
		return ""
	}
}

// Masters sends to the masters of a list (the one failover walk,
// internal/redirect; a follower forwards to the leader).
type Masters struct {
	addrs []string
	conns *redirect.Pool
}

// NewMasters dials lazily.
func NewMasters(addrs []string, opts ...grpc.DialOption) (*Masters, error) {
	if len(addrs) == 0 {
		return nil, errors.New("no masters")
	}
	return &Masters{addrs: addrs, conns: redirect.NewPool(opts...)}, nil
}

// ReportRanks implements Sender.
func (m *Masters) ReportRanks(ctx context.Context, req *ginv1.ReportRanksRequest) (*ginv1.ReportRanksResponse, error) {
	var resp *ginv1.ReportRanksResponse
	_, err := redirect.Do(ctx, m.addrs, redirect.Options{ShareDeadline: true}, func(actx context.Context, addr string) error {
		c, err := m.conns.Conn(addr)
		if err != nil {
			return status.Error(codes.Unavailable, err.Error())
		}
		r, err := ginv1.NewLiveServiceClient(c).ReportRanks(actx, req)
		resp = r
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("masters %s: %w", strings.Join(m.addrs, ","), err)
	}
	return resp, nil
}

// Close closes the connections.
func (m *Masters) Close() error { return m.conns.Close() }
