package plansock

import "testing"

// cachedSource is tableSource with the answer prepared once (FrameCache),
// as the agent's store (internal/nodeplans) holds it.
type cachedSource struct {
	tableSource
	frame []byte
}

func (s cachedSource) CachedFrame(job []byte, f Form) ([]byte, string, bool) {
	return s.frame, s.hash, f == FormTable
}

// BenchmarkServeTableCached is BenchmarkServeTable with the source's
// prepared answer: the path every rank of a job takes on a node whose agent
// holds the plan.
//
//	go test -run '^$' -bench BenchmarkServeTableCached -benchmem ./internal/plansock/
func BenchmarkServeTableCached(b *testing.B) {
	benchServe(b, func(body []byte, hash string) Source {
		f, err := AppendResponse(nil, Response{Status: StatusOK, Hash: hash, Body: body})
		if err != nil {
			b.Fatal(err)
		}
		return cachedSource{tableSource{body, hash}, f}
	})
}
