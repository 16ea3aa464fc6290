package agent

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gin-topology/gin/internal/fakemaster"
)

// An agent and a master that disagree about TLS: the agent says so in one
// sentence naming what to do, once per busyLogEvery however often it
// retries, and keeps collecting.
func TestTLSMismatchIsSaidOnce(t *testing.T) {
	tests := []struct {
		name   string
		master string
		dial   credentials.TransportCredentials
		want   string
	}{
		{"plaintext agent, TLS master", fakemaster.ServeTLS(t, &fakemaster.Plans{}), insecure.NewCredentials(),
			"it serves mutual TLS and this agent dials plaintext; give gin-agent --tls-ca, --tls-cert and --tls-key"},
		{"TLS agent, plaintext master", fakemaster.Serve(t, &fakemaster.Plans{}), fakemaster.ClientTLS(),
			"the master address does not speak TLS: a master started with --insecure"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := newFakeSource("H100")
			var logs syncBuffer
			cfg := testConfig(src, &logs, tc.master)
			cfg.DialOptions = []grpc.DialOption{grpc.WithTransportCredentials(tc.dial)}
			r := runAgent(t, cfg)
			waitStatus(t, r.a, func(s Status) bool { return s.Reconnects >= 5 && s.LastError != nil })
			if n := strings.Count(logs.String(), tc.want); n != 1 {
				t.Fatalf("the sentence %q logged %d times after 5 retries, want once:\n%s", tc.want, n, logs.String())
			}
			if strings.Contains(logs.String(), "no master reachable yet") {
				t.Fatalf("the generic warning was logged besides the sentence:\n%s", logs.String())
			}
			if s := r.a.Status(); s.Connected {
				t.Fatalf("status %+v, want disconnected", s)
			}
		})
	}
}
