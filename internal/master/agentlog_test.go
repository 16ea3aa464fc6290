package master

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gin-topology/gin/internal/testkit"
)

// TestAgentAttachLogIsRateLimited: a burst of agent sessions logs at most
// --agent-log-burst "agent attached" lines; the rest are counted in
// gin_master_agent_log_lines_suppressed_total, and the next line let
// through (once the bucket refills) says how many were left out.
func TestAgentAttachLogIsRateLimited(t *testing.T) {
	logs := &testkit.LogBuffer{}
	clk := newFakeClockAt(time.Unix(1_800_000_000, 0))
	s := startServerWith(t, func(c *Config) {
		c.HeartbeatInterval, c.Logger = time.Minute, slog.New(slog.NewTextHandler(logs, nil))
		c.AgentLogRate, c.AgentLogBurst, c.AgentLogClock = 1, 2, clk
	})
	conn := dialPlain(t, s.Addr())
	attached := func() int { return strings.Count(logs.String(), `msg="agent attached"`) }
	const sessions = 6
	for i := 1; i <= sessions; i++ {
		openSession(t, conn, simInventory(t, "dgx-h100", fmt.Sprintf("node%03d", i)))
	}
	// Each session's line (or its count) follows its HelloAck.
	testkit.WaitFor(t, 30*time.Second, "every attach logged or counted",
		func() bool { return attached()+int(s.agentLog.Suppressed()) == sessions }, logs.String)
	if got := attached(); got != 2 {
		t.Fatalf("%d agent attached lines for %d sessions with burst 2, want 2:\n%s", got, sessions, logs.String())
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newMasterCollector(s))
	want := fmt.Sprintf(`# HELP gin_master_agent_log_lines_suppressed_total Agent attach/detach log lines left out by the rate limit (--agent-log-rate, --agent-log-burst) since start.
# TYPE gin_master_agent_log_lines_suppressed_total counter
gin_master_agent_log_lines_suppressed_total{server="m1"} %d
`, sessions-2)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gin_master_agent_log_lines_suppressed_total"); err != nil {
		t.Fatal(err)
	}
	// One second later one token is back: the next attach is logged and
	// says how many lines were left out before it.
	clk.Advance(time.Second)
	openSession(t, conn, simInventory(t, "dgx-h100", "node099"))
	testkit.WaitFor(t, 30*time.Second, "the line after the refill", func() bool { return attached() == 3 }, logs.String)
	if !strings.Contains(logs.String(), fmt.Sprintf("node=node099 held_generation=0 in_sync=false agent_version=\"\" suppressed=%d", sessions-2)) {
		t.Fatalf("the line after the refill does not say %d were suppressed:\n%s", sessions-2, logs.String())
	}
}
