package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gin-topology/gin/internal/agentmetrics"
	"github.com/gin-topology/gin/internal/buildinfo"
	"github.com/gin-topology/gin/internal/discovery"
)

// defaultMetricsBind is where /metrics is served unless --metrics-bind says
// otherwise (9400 is dcgm-exporter's, 9100 node_exporter's).
const defaultMetricsBind = ":9410"

type metricsServer struct {
	srv *http.Server
	lis net.Listener
}

// serveMetrics binds the metrics endpoint on the agent's own registry;
// extra are further collectors (the plan path's, when plans are served).
func serveMetrics(bind, node string, state agentmetrics.AgentState, counters discovery.CounterSource, extra ...prometheus.Collector) (*metricsServer, string, error) {
	reg := prometheus.NewRegistry()
	var cs agentmetrics.CounterSource
	if counters != nil {
		cs = counters
	}
	reg.MustRegister(
		agentmetrics.New(node, buildinfo.String(), state, cs),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	reg.MustRegister(extra...)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, Timeout: agentmetrics.ScrapeTimeout}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	lis, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, "", fmt.Errorf("--metrics-bind %s: %w", bind, err)
	}
	return &metricsServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, lis: lis}, lis.Addr().String(), nil
}

func (m *metricsServer) serve() error {
	if err := m.srv.Serve(m.lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics server: %w", err)
	}
	return nil
}

func (m *metricsServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
}
