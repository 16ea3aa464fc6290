package master

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/state"
)

// BenchmarkSessionReportBytes measures what one follower's session report
// to the leader weighs, before (every report a full list: node and age of
// each session, as older masters send) and after (deltas against the last
// accepted report, with a full report every 5 minutes), for a follower
// holding 8,333 (25,000 agents over three masters), 10,000 and 25,000
// sessions. Agents beat every heartbeat interval (5 s, the default; each
// beat up to 10% late), reports go every half interval on a simulated
// clock through the real sessions table and report tracker, and
// churn_per_report of the sessions end and others attach between two
// reports (0: a steady cluster; 0.002: 1,000 of 25,000 agents moving per
// minute). Each op builds and marshals one report; the metrics are the
// mean bytes per report over the run (b.N reports: past 5 minutes the
// periodic full reports are in the mean), the mean of the deltas alone
// and the largest report (a full one).
func BenchmarkSessionReportBytes(b *testing.B) {
	for _, n := range []int{8333, 10000, 25000} {
		for _, churn := range []float64{0, 0.002} {
			for _, mode := range []string{"full", "delta"} {
				b.Run(fmt.Sprintf("sessions=%d/churn_per_report=%g/%s", n, churn, mode), func(b *testing.B) {
					benchReports(b, n, churn, mode == "delta")
				})
			}
		}
	}
}

func benchReports(b *testing.B, n int, churn float64, deltas bool) {
	const interval = 5 * time.Second
	rnd := rand.New(rand.NewPCG(1, uint64(n)))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	var sess sessions
	next := make([]time.Time, n)
	attached := make([]bool, n)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("gb200-tray-%05d", i)
		next[i] = t0.Add(time.Duration(rnd.Int64N(int64(interval))))
	}
	tr := newReportTracker(freshWithin(interval, 3))
	// advance moves the simulated clock by half an interval: agents that
	// are due beat (attaching first), churn ends some sessions.
	advance := func() {
		now = now.Add(interval / 2)
		for i := range n {
			if churn > 0 && attached[i] && rnd.Float64() < churn {
				sess.remove(names[i], rnd.IntN(2) == 0, now)
				attached[i] = false
				next[i] = now.Add(time.Duration(rnd.Int64N(int64(interval))))
				continue
			}
			for !next[i].After(now) {
				if !attached[i] {
					sess.add(names[i], next[i])
					attached[i] = true
				} else {
					sess.beat(names[i], next[i])
				}
				next[i] = next[i].Add(interval + time.Duration(rnd.Int64N(int64(interval/10))))
			}
		}
	}
	// Warm up past the first beats and the first full report.
	for range 3 {
		advance()
	}
	report := func() *ginv1.ReportSessionsRequest {
		p := tr.build(now, "leader", "m2", sess.lastHeard(now), sess.takeLeft())
		if !deltas {
			tr.reset() // every report full, as before deltas
		} else {
			tr.accepted(now, "leader", p, true)
		}
		return p.req
	}
	report()
	var total, largest, deltaBytes, deltaReports int
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		advance()
		b.StartTimer()
		req := report()
		buf, err := proto.Marshal(req)
		if err != nil {
			b.Fatal(err)
		}
		total += len(buf)
		if !req.GetFull() {
			deltaBytes += len(buf)
			deltaReports++
		}
		largest = max(largest, len(buf))
	}
	b.ReportMetric(float64(total)/float64(b.N), "B/report")
	b.ReportMetric(float64(largest), "max-B/report")
	if deltaReports > 0 {
		b.ReportMetric(float64(deltaBytes)/float64(deltaReports), "B/delta")
	}
	b.ReportMetric(float64(sess.count()), "sessions-held")
}

// BenchmarkLeaderAppliesReport measures the leader's side of one session
// report from a follower holding n sessions, all heard from within the
// last interval: before, a full list with exact ages (as older masters
// send; every node's time set from its age); after, a steady delta that
// lists nothing (every held node counted heard from fresh_within ago).
// Both walk every node the follower holds; the delta saves decoding the
// list, not that walk.
func BenchmarkLeaderAppliesReport(b *testing.B) {
	for _, n := range []int{8333, 25000} {
		names := make([]string, n)
		ages := make([]uint32, n)
		for i := range names {
			names[i] = fmt.Sprintf("gb200-tray-%05d", i)
			ages[i] = uint32(i % 5000)
		}
		for _, mode := range []string{"full", "delta"} {
			b.Run(fmt.Sprintf("sessions=%d/%s", n, mode), func(b *testing.B) {
				now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
				l := newLiveness(5*time.Second, 3, state.New(nil), slog.New(slog.DiscardHandler),
					perNode(func(context.Context, string, ginv1.NodeState, string) error { return nil }))
				l.now = func() time.Time { return now }
				l.rearm()
				fresh := freshWithin(5*time.Second, 3)
				if !l.report(context.Background(), "m2", sessionReport{full: true, seq: 1, freshWithin: fresh, nodes: names, agesMs: ages}) {
					b.Fatal("full report not applied")
				}
				seq := uint64(1)
				b.ResetTimer()
				for range b.N {
					now = now.Add(2500 * time.Millisecond)
					seq++
					rep := sessionReport{seq: seq, base: seq - 1, freshWithin: fresh}
					if mode == "full" {
						rep = sessionReport{full: true, seq: seq, nodes: names, agesMs: ages}
					}
					if !l.report(context.Background(), "m2", rep) {
						b.Fatal("report not applied")
					}
				}
			})
		}
	}
}
