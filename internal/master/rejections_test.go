package master

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	ginraft "github.com/gin-topology/gin/internal/raft"
	"github.com/gin-topology/gin/internal/ratelog"
	"github.com/gin-topology/gin/internal/state"
	"github.com/gin-topology/gin/internal/testkit"
)

// rawCodec sends bytes as they are, so a test can put on the wire what no
// generated client would: bytes that are not a protobuf message.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("rawCodec: %T", v)
	}
	return *b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("rawCodec: %T", v)
	}
	*b = append((*b)[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "proto" } // the server decodes it as protobuf

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer = testkit.LogBuffer

// Messages the master cannot or must not read are refused with the status
// gRPC defines for them, counted in gin_master_rejected_messages_total,
// logged, and change nothing.
func TestOversizedAndMalformedMessagesAreRejected(t *testing.T) {
	logs := &lockedBuffer{}
	s, conn := startServerLogging(t, time.Minute, slog.New(slog.NewTextHandler(logs, nil)))
	good := simInventory(t, "dgx-h100", "node001")
	good.Generation = 1
	sess, _ := openSession(t, conn, good)
	if _, err := sess.send(good); err != nil {
		t.Fatal(err)
	}
	held, _ := s.store.Node("node001")

	// 0x0a = field 1, length-delimited, with a length running past the end.
	truncated := []byte{0x0a, 0xff, 0xff, 0x03, 'x'}
	// A valid GetOrCreatePlanRequest one byte over the limit.
	big, err := proto.Marshal(&ginv1.GetOrCreatePlanRequest{JobId: "j", Nodes: strings.Repeat("n", MaxMessageBytes)})
	if err != nil {
		t.Fatal(err)
	}
	bigInv := proto.CloneOf(good)
	bigInv.Generation = 2
	for proto.Size(bigInv) <= MaxMessageBytes {
		bigInv.Host.KernelVersion += strings.Repeat("k", 1<<20)
	}

	tests := []struct {
		name   string
		call   func(ctx context.Context) error
		code   codes.Code
		reason string
	}{
		{"unary request that does not parse", func(ctx context.Context) error {
			var out []byte
			return conn.Invoke(ctx, ginv1.PlanService_GetOrCreatePlan_FullMethodName, &truncated, &out, grpc.ForceCodec(rawCodec{}))
		}, codes.Internal, "malformed"},
		{"unary request over the size limit", func(ctx context.Context) error {
			var out []byte
			return conn.Invoke(ctx, ginv1.PlanService_GetOrCreatePlan_FullMethodName, &big, &out, grpc.ForceCodec(rawCodec{}), grpc.MaxCallSendMsgSize(64<<20))
		}, codes.ResourceExhausted, "too_large"},
		{"agent stream message that does not parse", func(ctx context.Context) error {
			st, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, ginv1.AgentService_Session_FullMethodName, grpc.ForceCodec(rawCodec{}))
			if err != nil {
				return err
			}
			if err := st.SendMsg(&truncated); err != nil {
				return err
			}
			var out []byte
			return st.RecvMsg(&out)
		}, codes.Internal, "malformed"},
		{"inventory over the size limit", func(ctx context.Context) error {
			sess, _ := openSession(t, conn, good)
			_, err := sess.send(bigInv)
			return err
		}, codes.ResourceExhausted, "too_large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := s.store.Index()
			counted := testutil.ToFloat64(s.metrics.rejected.WithLabelValues(tc.code.String(), tc.reason))
			want := "reason=" + tc.reason
			logged := strings.Count(logs.String(), want) // two cases share a reason: this one's line is the next
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := tc.call(ctx)
			if status.Code(err) != tc.code {
				t.Fatalf("status = %v, want %v", err, tc.code)
			}
			// The stats handler runs after the status went out: poll (bounded).
			testkit.WaitFor(t, 30*time.Second, fmt.Sprintf("gin_master_rejected_messages_total{code=%q,reason=%q} to pass %v", tc.code, tc.reason, counted), func() bool {
				return testutil.ToFloat64(s.metrics.rejected.WithLabelValues(tc.code.String(), tc.reason)) >= counted+1
			})
			testkit.WaitFor(t, 30*time.Second, "a log line with "+want, func() bool { return strings.Count(logs.String(), want) > logged },
				func() string { return "logs:\n" + logs.String() })
			rec, _ := s.store.Node("node001")
			if !proto.Equal(rec, held) || s.store.Index() != before {
				t.Errorf("state changed after a rejected message (index %d -> %d)", before, s.store.Index())
			}
		})
	}
	if n := testutil.ToFloat64(s.metrics.rejected.WithLabelValues(codes.FailedPrecondition.String(), "precondition")); n != 0 {
		t.Errorf("rejected{FailedPrecondition} = %v; redirects and these cases must not count as such", n)
	}
}

// A follower's redirect carries ErrorInfo NOT_LEADER and is no rejection.
func TestRejectionReason(t *testing.T) {
	redirect, _ := status.New(codes.FailedPrecondition, "not the leader").WithDetails(apierr.NotLeaderInfo("m2"))
	full, _ := status.New(codes.ResourceExhausted, "data dir /d is full").WithDetails(apierr.DataDirFullInfo("/d"))
	streams, _ := status.New(codes.ResourceExhausted, "agent/n1 already holds 64 open streams").WithDetails(apierr.Info(apierr.ReasonStreamLimit, nil))
	tests := []struct {
		name string
		st   *status.Status
		want string
	}{
		{"redirect to the leader", redirect, ""},
		{"stale generation", status.New(codes.FailedPrecondition, "stale generation"), "precondition"},
		{"bad field", status.New(codes.InvalidArgument, "x"), "invalid"},
		{"identity conflict", status.New(codes.AlreadyExists, "x"), "conflict"},
		{"oversized", status.New(codes.ResourceExhausted, "grpc: received message larger than max"), "too_large"},
		{"a full data dir is the master's, not the request's", full, ""},
		{"--max-nodes", status.Convert(toStatus(exhaustedf(apierr.ReasonNodeLimit, "node n9 not registered"))), "node_limit"},
		{"--max-plans", status.Convert(toStatus(exhaustedf(apierr.ReasonPlanLimit, "plan for job 7 not pinned"))), "plan_limit"},
		{"the deny list's bound (state)", status.Convert(toStatus(fmt.Errorf("apply: %w", state.ErrTooManyDenied))), "deny_list_full"},
		{"the deny list's bound (service)", status.Convert(toStatus(exhaustedf(apierr.ReasonDenyListFull, "serial 1 not denied"))), "deny_list_full"},
		{"--max-handshakes and its queue", status.Convert(toStatus(&errHandshakeBusy{msg: "busy", retryAfter: time.Second})), "handshakes_busy"},
		{"streams of one identity (authz)", streams, "stream_limit"},
		{"a watcher behind", status.Convert(toStatus(exhaustedf(apierr.ReasonWatchBehind, "watcher fell behind"))), "watch_behind"},
		{"a full data dir through toStatus", status.Convert(toStatus(&ginraft.DataDirFullError{Dir: "/d", Free: 1, MinFree: 2})), ""},
		{"unparsable", status.New(codes.Internal, "grpc: failed to unmarshal the received message: x"), "malformed"},
		{"a server bug is no rejection", status.New(codes.Internal, "boom"), ""},
		{"not found is an answer", status.New(codes.NotFound, "plan not found"), ""},
		{"unavailable", status.New(codes.Unavailable, "x"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := rejectionReason(tc.st); got != tc.want {
				t.Fatalf("rejectionReason = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestUnregisteredReportIsRetriedNotRejected: a first boot's follower that
// reports before the leader applied its Join gets UNAVAILABLE (it retries
// with its next report), not a rejected request logged at WARN.
func TestUnregisteredReportIsRetriedNotRejected(t *testing.T) {
	s := status.Convert(toStatus(fmt.Errorf("master %q: %w", "m3", errNotRegistered)))
	if s.Code() != codes.Unavailable {
		t.Fatalf("code %v, want Unavailable", s.Code())
	}
	if r := rejectionReason(s); r != "" {
		t.Fatalf("rejection reason %q, want none (not counted, not logged)", r)
	}
	if !strings.Contains(s.Message(), `master "m3": not a registered master yet`) {
		t.Fatalf("message %q", s.Message())
	}
}

// TestRejectedRequestLogIsBounded: a caller repeating a bad request with a
// 1 MiB hostlist gets every rejection counted, but writes at most the
// burst of lines, each echoing at most ratelog.MaxEcho bytes of its
// input; once the bucket refills the next line says how many were left
// out.
func TestRejectedRequestLogIsBounded(t *testing.T) {
	logs := &testkit.LogBuffer{}
	clk := newFakeClockAt(time.Unix(1_800_000_000, 0))
	s := startServerWith(t, func(c *Config) {
		c.HeartbeatInterval, c.Logger = time.Minute, slog.New(slog.NewTextHandler(logs, nil))
		c.AgentLogClock = clk
	})
	conn := dialPlain(t, s.Addr())
	plans := ginv1.NewPlanServiceClient(conn)
	bad := &ginv1.GetOrCreatePlanRequest{JobId: "flood", Nodes: "node[" + strings.Repeat("9", 1<<20)}
	rejected := func() float64 {
		return testutil.ToFloat64(s.metrics.rejected.WithLabelValues(codes.InvalidArgument.String(), "invalid"))
	}
	lines := func() int { return strings.Count(logs.String(), `msg="rejected request"`) }
	send := func(n int) {
		t.Helper()
		for range n {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			_, err := plans.GetOrCreatePlan(ctx, bad)
			cancel()
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("bad hostlist: %v, want InvalidArgument", err)
			}
		}
	}
	const flood = 3 * rejectLogBurst
	send(flood)
	// The stats handler runs after the status went out: poll (bounded).
	testkit.WaitFor(t, 30*time.Second, "every rejection counted", func() bool { return rejected() == flood })
	if got := lines(); got != rejectLogBurst {
		t.Fatalf("%d rejected-request lines for %d rejections, want the burst %d", got, flood, rejectLogBurst)
	}
	if got := s.rejectLog.Suppressed(); got != flood-rejectLogBurst {
		t.Fatalf("suppressed %d, want %d", got, flood-rejectLogBurst)
	}
	for l := range strings.Lines(logs.String()) {
		if len(l) > 2*ratelog.MaxEcho+400 {
			t.Fatalf("a %d-byte line for a 1 MiB request: %.300s…", len(l), l)
		}
	}
	clk.Advance(time.Second)
	send(1)
	testkit.WaitFor(t, 30*time.Second, "the line after the refill", func() bool { return lines() == rejectLogBurst+1 }, logs.String)
	if want := fmt.Sprintf("suppressed=%d", flood-rejectLogBurst); !strings.Contains(logs.String(), want) {
		t.Fatalf("the line after the refill does not say %s:\n%.2000s", want, logs.String())
	}
}
