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
	"github.com/gin-topology/gin/internal/testlog"
	"github.com/gin-topology/gin/internal/testwait"
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
type lockedBuffer = testlog.Buffer

// Messages the master cannot or must not read are refused with the status
// gRPC defines for them, counted in gin_master_rejected_messages_total,
// logged, and change nothing.
func TestOversizedAndMalformedMessagesAreRejected(t *testing.T) {
	logs := &lockedBuffer{}
	s, conn := startServerLogging(t, time.Second, slog.New(slog.NewTextHandler(logs, nil)))
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
		}, codes.ResourceExhausted, "too large"},
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
		}, codes.ResourceExhausted, "too large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := s.store.Index()
			counted := testutil.ToFloat64(s.metrics.rejected.WithLabelValues(tc.code.String()))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := tc.call(ctx)
			if status.Code(err) != tc.code {
				t.Fatalf("status = %v, want %v", err, tc.code)
			}
			// The stats handler runs after the status went out: poll (bounded).
			testwait.For(t, 10*time.Second, fmt.Sprintf("gin_master_rejected_messages_total{code=%q} to pass %v", tc.code, counted), func() bool {
				return testutil.ToFloat64(s.metrics.rejected.WithLabelValues(tc.code.String())) >= counted+1
			})
			want := fmt.Sprintf("reason=%q", tc.reason)
			if tc.reason == "malformed" {
				want = "reason=malformed"
			}
			testwait.For(t, 10*time.Second, "a log line with "+want, func() bool { return strings.Contains(logs.String(), want) },
				func() string { return "logs:\n" + logs.String() })
			rec, _ := s.store.Node("node001")
			if !proto.Equal(rec, held) || s.store.Index() != before {
				t.Errorf("state changed after a rejected message (index %d -> %d)", before, s.store.Index())
			}
		})
	}
	if n := testutil.ToFloat64(s.metrics.rejected.WithLabelValues(codes.FailedPrecondition.String())); n != 0 {
		t.Errorf("rejected{FailedPrecondition} = %v; redirects and these cases must not count as such", n)
	}
}

// A follower's redirect carries ErrorInfo NOT_LEADER and is no rejection.
func TestRejectionReason(t *testing.T) {
	redirect, _ := status.New(codes.FailedPrecondition, "not the leader").WithDetails(apierr.NotLeaderInfo("m2"))
	full, _ := status.New(codes.ResourceExhausted, "data dir /d is full").WithDetails(apierr.DataDirFullInfo("/d"))
	tests := []struct {
		name string
		st   *status.Status
		want string
	}{
		{"redirect to the leader", redirect, ""},
		{"stale generation", status.New(codes.FailedPrecondition, "stale generation"), "precondition"},
		{"bad field", status.New(codes.InvalidArgument, "x"), "invalid"},
		{"identity conflict", status.New(codes.AlreadyExists, "x"), "conflict"},
		{"oversized", status.New(codes.ResourceExhausted, "grpc: received message larger than max"), "too large"},
		{"a full data dir is the master's, not the request's", full, ""},
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
