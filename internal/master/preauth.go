package master

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gin-topology/gin/internal/preauth"
)

// Pre-authentication bounds of the gRPC port (--bind) and the HTTP port
// (--http-bind), issue #21; the Raft port has its own (internal/raft,
// preauth.go). A connection past a bound is closed at once, so a flood
// from one address neither waits in the accept loop nor holds more than
// its share; a connection past its TLS handshake (HTTP: its first
// request) no longer counts.
const (
	// grpcConnectionTimeout bounds a gRPC connection's TLS handshake and
	// HTTP/2 preface (grpc-go's default is 120 s). A TLS 1.3 handshake
	// takes milliseconds; 10 s leaves a loaded master room.
	grpcConnectionTimeout = 10 * time.Second
	// grpcPreAuthPerSource bounds the gRPC handshakes one address holds
	// at once; agents dial from an address each, and tests run thousands
	// from 127.0.0.1 (a refused agent reconnects with its backoff).
	grpcPreAuthPerSource = 256
	// grpcPreAuthTotal bounds the gRPC handshakes of all addresses: a
	// cluster-wide reconnect of 25,000 agents is paced after the
	// handshake (admission.go), this only bounds the memory of the
	// handshakes themselves (a few tens of KiB each).
	grpcPreAuthTotal = 8192
	// httpPreAuthPerSource and httpPreAuthTotal bound the HTTP
	// connections before their first request (scrapers and browsers are
	// few); the deadline is the server's ReadHeaderTimeout, which bounds a
	// TLS handshake too.
	httpPreAuthPerSource = 16
	httpPreAuthTotal     = 256
)

// preAuthLimits are the limiters of the gRPC and HTTP ports.
type preAuthLimits struct{ grpc, http *preauth.Limiter }

func newPreAuthLimits(log *slog.Logger) preAuthLimits {
	g, err := preauth.New("grpc", grpcPreAuthPerSource, grpcPreAuthTotal, log)
	if err != nil {
		panic(err) // constant bounds
	}
	h, err := preauth.New("http", httpPreAuthPerSource, httpPreAuthTotal, log)
	if err != nil {
		panic(err)
	}
	return preAuthLimits{grpc: g, http: h}
}

// preAuthCollector exports the refusals of both ports.
type preAuthCollector struct {
	s    *Server
	desc *prometheus.Desc
}

func newPreAuthCollector(s *Server) *preAuthCollector {
	return &preAuthCollector{s: s, desc: prometheus.NewDesc("gin_master_preauth_connections_refused_total",
		"Connections the gRPC (--bind, TLS only) or HTTP (--http-bind) port closed before authentication, by port and reason: source (its address already held 256 gRPC handshakes, or 16 HTTP connections before their first request), prefix (its IPv4 /24 or IPv6 /64 already held 1024, or 64), busy (all 8192, or 256, taken). The Raft port's are gin_master_raft_connections_refused_total.",
		[]string{"server", "port", "reason"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *preAuthCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *preAuthCollector) Collect(ch chan<- prometheus.Metric) {
	for port, l := range map[string]*preauth.Limiter{"grpc": c.s.preAuth.grpc, "http": c.s.preAuth.http} {
		r := l.Refused()
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(r.Source), c.s.cfg.ID, port, preauth.ReasonSource)
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(r.Prefix), c.s.cfg.ID, port, preauth.ReasonPrefix)
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(r.Busy), c.s.cfg.ID, port, preauth.ReasonBusy)
	}
}
