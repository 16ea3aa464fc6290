package livejob

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// BenchmarkLeaderSecond is one second of the leader's live work for 2,048
// nodes × 8 ranks (128 jobs of 16 nodes, one communicator each): decode
// every node's ReportRanks request (one a second each), take its 8
// windows, and evaluate every job once. ns/op over 1e9 is the share of
// one core; bytes/node/min is what each agent sends.
func BenchmarkLeaderSecond(b *testing.B) {
	const nodes, perNode, nodesPerJob = 2048, 8, 16
	ranks := nodesPerJob * perNode
	reqs := make([][]byte, nodes)
	s := newSim(1)
	s.ranks, s.perNode = ranks, perNode
	s.started = make([]uint64, ranks)
	ws, _ := s.windows(0)
	for n := 0; n < nodes; n++ {
		job := n / nodesPerJob
		req := &ginv1.ReportRanksRequest{NodeName: fmt.Sprintf("node%05d", n)}
		for l := 0; l < perNode; l++ {
			r := (n%nodesPerJob)*perNode + l
			w := proto.CloneOf(ws[r])
			w.Job = fmt.Sprintf("job%d", job)
			// As the harness's windows: ~40 sampled arrivals a second
			// (435 B a window there), not the simulator's 8.
			for k := uint64(len(w.Arrivals)); k < 40; k++ {
				w.Arrivals = append(w.Arrivals, &ginv1.Arrival{Seq: 4 * (100 + k), StartUnixNano: w.GetStartUnixNano() + int64(k)*25_000_000})
			}
			req.Windows = append(req.Windows, w)
		}
		bs, err := proto.Marshal(req)
		if err != nil {
			b.Fatal(err)
		}
		reqs[n] = bs
	}
	var total int
	for _, r := range reqs {
		total += len(r)
	}
	d := New(Config{}, nil)
	now := time.Unix(1_800_000_000, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now = now.Add(time.Second)
		for _, bs := range reqs {
			var req ginv1.ReportRanksRequest
			if err := proto.Unmarshal(bs, &req); err != nil {
				b.Fatal(err)
			}
			for _, w := range req.GetWindows() {
				if err := d.Add(req.GetNodeName(), w, now); err != nil {
					b.Fatal(err)
				}
			}
		}
		d.Evaluate(now)
	}
	b.ReportMetric(float64(total)/nodes*60, "bytes/node/min")
	b.ReportMetric(float64(total), "bytes/s")
}
