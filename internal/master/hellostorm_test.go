package master

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/authz"
	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/testkit"
)

// stormOutcome is how the master ended one of the attacker's streams.
type stormOutcome int

const (
	refusedStream stormOutcome = iota // RST_STREAM(REFUSED_STREAM): over the per-connection cap
	helloDeadline                     // grpc-status DEADLINE_EXCEEDED "no hello": the Hello deadline
	identityCap                       // grpc-status RESOURCE_EXHAUSTED: over the per-identity cap
	otherOutcome                      // anything else (a failure)
	nOutcomes
)

func (o stormOutcome) String() string {
	return [...]string{"refused (REFUSED_STREAM)", "ended at the hello deadline", "refused (streams per identity)", "other"}[o]
}

// stormConn is one attacker connection speaking raw HTTP/2: it opens
// Session streams with a HEADERS frame each and never sends a byte of
// data, and it ignores the server's SETTINGS_MAX_CONCURRENT_STREAMS (a
// grpc-go client would queue instead, which holds nothing on the server).
type stormConn struct {
	conn net.Conn
	fr   *http2.Framer
	wmu  sync.Mutex // the framer's writes
	enc  *hpack.Encoder
	hbuf bytes.Buffer

	mu       sync.Mutex
	ended    map[uint32]bool // streams already classified
	outcomes [nOutcomes]int
	others   []string // what the "other" outcomes were (a few)
	resolved atomic.Int64
}

func dialStorm(t *testing.T, addr string, tlsCfg *tls.Config) *stormConn {
	t.Helper()
	var c net.Conn
	var err error
	if tlsCfg != nil {
		c, err = tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, tlsCfg)
	} else {
		c, err = net.DialTimeout("tcp", addr, 10*time.Second)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	sc := &stormConn{conn: c, fr: http2.NewFramer(c, c), ended: map[uint32]bool{}}
	sc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	sc.fr.MaxHeaderListSize = 1 << 20
	sc.enc = hpack.NewEncoder(&sc.hbuf)
	if err := sc.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return sc
}

// open sends the HEADERS of Session streams 1, 3, 5, ... (n of them).
func (sc *stormConn) open(authority, scheme string, n int) error {
	for i := range n {
		sc.wmu.Lock()
		sc.hbuf.Reset()
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", scheme}, {":path", ginv1.AgentService_Session_FullMethodName},
			{":authority", authority}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
			_ = sc.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		err := sc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: sc.hbuf.Bytes(), EndHeaders: true})
		sc.wmu.Unlock()
		if err != nil {
			return fmt.Errorf("stream %d: %w", 2*i+1, err)
		}
	}
	return nil
}

// read classifies every stream the server ends until the connection
// closes; it acknowledges the server's SETTINGS and PINGs.
func (sc *stormConn) read() {
	for {
		f, err := sc.fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				sc.wmu.Lock()
				_ = sc.fr.WriteSettingsAck()
				sc.wmu.Unlock()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				sc.wmu.Lock()
				_ = sc.fr.WritePing(true, f.Data)
				sc.wmu.Unlock()
			}
		case *http2.RSTStreamFrame:
			// After its trailers the server resets a stream the client
			// has not half-closed with NO_ERROR; record ignores that one.
			if f.ErrCode == http2.ErrCodeRefusedStream {
				sc.record(f.StreamID, refusedStream, "")
			} else {
				sc.record(f.StreamID, otherOutcome, fmt.Sprintf("stream %d: RST_STREAM %s", f.StreamID, f.ErrCode))
			}
		case *http2.MetaHeadersFrame:
			if !f.StreamEnded() {
				continue // response headers; the trailers follow
			}
			code, msg := -1, ""
			for _, h := range f.RegularFields() {
				switch h.Name {
				case "grpc-status":
					code, _ = strconv.Atoi(h.Value)
				case "grpc-message":
					msg = h.Value // percent-encoded only outside printable ASCII
				}
			}
			switch {
			case codes.Code(code) == codes.DeadlineExceeded && strings.Contains(msg, "no hello"):
				sc.record(f.StreamID, helloDeadline, "")
			case codes.Code(code) == codes.ResourceExhausted && strings.Contains(msg, "open streams"):
				sc.record(f.StreamID, identityCap, "")
			default:
				sc.record(f.StreamID, otherOutcome, fmt.Sprintf("stream %d: grpc-status %d %q", f.StreamID, code, msg))
			}
		}
	}
}

// record classifies stream id by how it ended, once.
func (sc *stormConn) record(id uint32, o stormOutcome, what string) {
	sc.mu.Lock()
	if sc.ended[id] {
		sc.mu.Unlock()
		return
	}
	sc.ended[id] = true
	sc.outcomes[o]++
	if what != "" && len(sc.others) < 5 {
		sc.others = append(sc.others, what)
	}
	sc.mu.Unlock()
	sc.resolved.Add(1)
}

// liveSessionHandlers counts the goroutines running the master's agent
// Session handler: every stream the master holds open has one.
func liveSessionHandlers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "master.(*agentService).Session(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestHelloLessStreamsHeldBounded is the issue #11 finding "80,000 streams
// that never send Hello: all accepted, master RSS 116 MB → 1.02 GB" as an
// attack: 10,000 Session streams that never say hello, opened as fast as
// raw HTTP/2 allows over a few connections that ignore the announced
// stream limit. The master holds at most the per-connection cap
// (plaintext) or the per-identity cap (mTLS, one agent certificate over
// every connection) at once, refuses the rest (REFUSED_STREAM, or
// RESOURCE_EXHAUSTED naming the identity cap), ends every held stream at
// the hello deadline with DEADLINE_EXCEEDED, ends up holding none, and
// still serves an agent that says hello.
//
// Counts, not times: the handler count is sampled from the goroutine
// stacks (a sample can only miss a peak, never invent one), and the test
// waits for conditions. Its one assumption about speed: a connection's
// first cap+1 HEADERS frames reach the master within the 2 s hello
// deadline, so that something is refused.
func TestHelloLessStreamsHeldBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 streams")
	}
	const (
		conns          = 4
		streamsPerConn = 2500 // 10,000 in all
		perConn        = 100  // --max-streams-per-conn in the test
		hello          = 2 * time.Second
	)
	tests := []struct {
		name string
		tls  bool
		// bound: the most Session handlers the master may run at once.
		bound int
		// refusedBy: the outcome that must refuse streams over the bound.
		refusedBy stormOutcome
	}{
		{"plaintext, per-connection cap", false, conns * perConn, refusedStream},
		{"mTLS, one agent certificate on every connection", true, authz.DefaultMaxStreamsPerIdentity, identityCap},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p *testPKI
			s := startServerWith(t, func(c *Config) {
				c.HelloTimeout = hello
				c.MaxStreamsPerConn = perConn
				if tc.tls {
					p = newTestPKI(t)
					c.TLS = p.source(t, pki.Identity{Role: pki.RoleMaster, Name: "m1"})
				}
			})
			var tlsCfg *tls.Config
			scheme := "http"
			var agentSrc *pki.Source
			if tc.tls {
				scheme = "https"
				agentSrc = p.source(t, pki.Identity{Role: pki.RoleAgent, Name: "node001"})
				tlsCfg = pki.ClientConfig(agentSrc, pki.RequireRole(pki.RoleMaster))
				tlsCfg.NextProtos = []string{"h2"}
				tlsCfg.ServerName = "127.0.0.1"
			}
			baseline := runtime.NumGoroutine()

			var maxHandlers, maxGoroutines atomic.Int64
			sample := func() {
				if n := int64(liveSessionHandlers()); n > maxHandlers.Load() {
					maxHandlers.Store(n)
				}
				if n := int64(runtime.NumGoroutine()); n > maxGoroutines.Load() {
					maxGoroutines.Store(n)
				}
			}
			var cs []*stormConn
			var readers sync.WaitGroup
			for range conns {
				sc := dialStorm(t, s.Addr(), tlsCfg)
				cs = append(cs, sc)
				readers.Go(sc.read)
			}
			t.Cleanup(func() {
				for _, sc := range cs {
					_ = sc.conn.Close()
				}
				readers.Wait()
			})
			resolved := func() int64 {
				var n int64
				for _, sc := range cs {
					n += sc.resolved.Load()
				}
				return n
			}
			// Sample while the storm runs: after sending and then all
			// along until every stream has ended.
			stopSampling := make(chan struct{})
			var sampler sync.WaitGroup
			sampler.Go(func() {
				for {
					sample()
					select {
					case <-stopSampling:
						return
					case <-time.After(20 * time.Millisecond):
					}
				}
			})
			var senders sync.WaitGroup
			sendErr := make(chan error, conns)
			for _, sc := range cs {
				senders.Go(func() {
					if err := sc.open(s.Addr(), scheme, streamsPerConn); err != nil {
						sendErr <- err
					}
				})
			}
			senders.Wait()
			close(sendErr)
			for err := range sendErr {
				t.Fatalf("sending the storm: %v", err)
			}
			sample()
			testkit.WaitFor(t, 2*time.Minute, "the master to end all 10,000 streams", func() bool {
				return resolved() >= conns*streamsPerConn
			}, func() string { return fmt.Sprintf("%d ended", resolved()) })
			close(stopSampling)
			sampler.Wait()

			var total [nOutcomes]int
			var others []string
			for _, sc := range cs {
				sc.mu.Lock()
				for o := range nOutcomes {
					total[o] += sc.outcomes[o]
				}
				others = append(others, sc.others...)
				sc.mu.Unlock()
			}
			t.Logf("%d streams: %d %s, %d %s, %d %s, %d other; at most %d Session handlers at once (bound %d), goroutines %d → at most %d",
				conns*streamsPerConn, total[refusedStream], refusedStream, total[identityCap], identityCap, total[helloDeadline], helloDeadline,
				total[otherOutcome], maxHandlers.Load(), tc.bound, baseline, maxGoroutines.Load())
			if total[otherOutcome] > 0 {
				t.Errorf("%d streams ended otherwise, e.g. %v", total[otherOutcome], others)
			}
			if sum := total[refusedStream] + total[helloDeadline] + total[identityCap] + total[otherOutcome]; sum != conns*streamsPerConn {
				t.Errorf("%d outcomes for %d streams", sum, conns*streamsPerConn)
			}
			if total[tc.refusedBy] == 0 {
				t.Errorf("nothing was %s: the cap held nothing back", tc.refusedBy)
			}
			// Whatever got through was held until the deadline: at least
			// the first bound streams (nothing ends them earlier).
			if total[helloDeadline] < tc.bound {
				t.Errorf("%d streams ended at the hello deadline, want at least %d", total[helloDeadline], tc.bound)
			}
			if got := maxHandlers.Load(); got > int64(tc.bound) || got == 0 {
				t.Errorf("the master ran up to %d Session handlers at once, want 1..%d", got, tc.bound)
			}
			// A stream costs a few goroutines while grpc-go runs its
			// handler (at most --max-streams-per-conn per connection);
			// unbounded, 10,000 held streams would cost 20,000+.
			if extra, most := maxGoroutines.Load()-int64(baseline), int64(3*conns*perConn+200); extra > most {
				t.Errorf("goroutines grew by %d during the storm, want at most %d", extra, most)
			}
			testkit.WaitFor(t, 30*time.Second, "no Session handler left", func() bool { return liveSessionHandlers() == 0 },
				func() string { return fmt.Sprintf("%d left", liveSessionHandlers()) })

			// The master still serves an agent that says hello.
			creds := insecure.NewCredentials()
			if tc.tls {
				creds = pki.ClientCredentialsFrom(agentSrc)
			}
			agent, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(creds))
			if err != nil {
				t.Fatal(err)
			}
			defer agent.Close()
			if _, ack := openSession(t, agent, simInventory(t, "dgx-h100", "node001")); ack == nil {
				t.Fatal("an agent that says hello was refused after the storm")
			}
		})
	}
}
