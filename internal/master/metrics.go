package master

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/buildinfo"
	"github.com/gin-topology/gin/internal/state"
	"github.com/gin-topology/gin/internal/webui"
)

// metrics are the master's own counters; gauges are read at scrape time.
type metrics struct {
	leaderChanges atomic.Uint64
	// reportBytes counts the bytes of the session reports this master
	// sent the leader (reports.go).
	reportBytes  atomic.Uint64
	rejected     *prometheus.CounterVec
	applyLatency prometheus.Histogram
	members      memberRefusals // membergate.go
}

func newMetrics() *metrics {
	return &metrics{
		members: newMemberRefusals(),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gin_master_rejected_messages_total", Help: "Requests and agent messages rejected, by gRPC code and reason: bad input (invalid, conflict, precondition, too_large, malformed) or a limit of the master's (node_limit, plan_limit, deny_list_full, handshakes_busy, stream_limit, watch_behind, names_limit, read_limit, inventory_too_large, inventory_rate).",
		}, []string{"code", "reason"}),
		applyLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gin_master_apply_duration_seconds", Help: "Time from proposing a Raft command to its application on the leader.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
	}
}

// masterCollector reads Raft and state gauges at scrape time.
type masterCollector struct {
	s                                                     *Server
	info, raftState, term, commit, applied, leaderChanges *prometheus.Desc
	nodes, nvlinks, ports, agents, plans                  *prometheus.Desc
	skipped, logStoreErrors, agentLogSuppressed           *prometheus.Desc
	rejectLogSuppressed                                   *prometheus.Desc
	nodesLimit, plansLimit                                *prometheus.Desc
	denied, deniedLimit                                   *prometheus.Desc
	handshakes, handshakesRefused, handshakesAdmitted     *prometheus.Desc
	dataDirFree, dataDirMinFree                           *prometheus.Desc
	agentsReported, leaderUnreached, reportBytes          *prometheus.Desc
}

func newMasterCollector(s *Server) *masterCollector {
	d := prometheus.NewDesc
	id := []string{"server"}
	return &masterCollector{s: s,
		info:                d("gin_master_build_info", "gin-master build; always 1.", []string{"server", "version"}, nil),
		raftState:           d("gin_master_raft_state", "1 for the Raft state this server is in.", []string{"server", "state"}, nil),
		term:                d("gin_master_raft_term", "Current Raft term.", id, nil),
		commit:              d("gin_master_raft_commit_index", "Raft commit index.", id, nil),
		applied:             d("gin_master_raft_applied_index", "Raft applied index.", id, nil),
		leaderChanges:       d("gin_master_leader_changes_total", "Leadership changes seen by this server.", id, nil),
		nodes:               d("gin_master_nodes", "Nodes by state.", []string{"server", "state"}, nil),
		nvlinks:             d("gin_master_nvlinks", "NVLinks over all nodes, by state.", []string{"server", "state"}, nil),
		ports:               d("gin_master_compute_ports", "Compute HCA ports over all nodes, by state.", []string{"server", "state"}, nil),
		agents:              d("gin_master_connected_agents", "Agents holding a session with this server.", id, nil),
		agentsReported:      d("gin_master_reported_agents", "On the leader: agents the other masters report holding sessions with (0 on followers); with gin_master_connected_agents, every attached agent.", id, nil),
		leaderUnreached:     d("gin_master_leader_unreached_seconds", "On a follower: seconds since its session report last reached the leader (0 on the leader); past the reattach grace (and Raft silent too, or past the grace plus the missed heartbeats less one and a report period) it ends its agents' sessions.", id, nil),
		reportBytes:         d("gin_master_session_report_bytes_total", "On a follower: bytes of the session reports sent to the leader since start (full reports, and deltas of what changed once the leader takes them).", id, nil),
		skipped:             d("gin_master_raft_skipped_entries", "Committed Raft entries this server could not apply (written by a newer version); above 0 it does not serve until upgraded.", id, nil),
		plans:               d("gin_master_pinned_plans", "Job plans pinned.", id, nil),
		nodesLimit:          d("gin_master_nodes_limit", "The most nodes this master registers (--max-nodes); compare with sum(gin_master_nodes).", id, nil),
		plansLimit:          d("gin_master_pinned_plans_limit", "The most plans this master pins (--max-plans); compare with gin_master_pinned_plans.", id, nil),
		denied:              d("gin_master_denied_certificates", "Certificate serials on the replicated deny list (ginctl tls deny).", id, nil),
		deniedLimit:         d("gin_master_denied_certificates_limit", "The most entries the deny list holds; compare with gin_master_denied_certificates (ginctl tls allow --expired makes room).", id, nil),
		handshakes:          d("gin_master_agent_handshakes", "Agent handshakes (Hello until in sync) holding one of the --max-handshakes slots (in_flight) or waiting for one (waiting).", []string{"server", "state"}, nil),
		handshakesRefused:   d("gin_master_agent_handshakes_refused_total", "Agent Hellos refused with RESOURCE_EXHAUSTED since start: every --max-handshakes slot taken and --handshake-queue full, the queue's wait at --handshake-rate longer than --hello-timeout, or no slot within --hello-timeout.", id, nil),
		handshakesAdmitted:  d("gin_master_agent_handshakes_admitted_total", "Agent Hellos admitted since start (at most --handshake-rate per second after a burst of --max-handshakes).", id, nil),
		agentLogSuppressed:  d("gin_master_agent_log_lines_suppressed_total", "Agent attach/detach log lines left out by the rate limit (--agent-log-rate, --agent-log-burst) since start.", id, nil),
		rejectLogSuppressed: d("gin_master_rejected_log_lines_suppressed_total", "Rejected-request log lines left out by their rate limit (1/s after a burst of 10) since start; every rejection is still counted in gin_master_rejected_messages_total.", id, nil),
		dataDirFree:         d("gin_master_data_dir_free_bytes", "Free bytes under the data dir (statfs, for an unprivileged writer).", id, nil),
		dataDirMinFree:      d("gin_master_data_dir_min_free_bytes", "Free bytes kept under the data dir (--data-dir-min-free-mib); below it writes are refused with RESOURCE_EXHAUSTED.", id, nil),
		logStoreErrors: d("gin_master_raft_log_store_errors_total", "Raft log store (WAL) operations that failed since start, by operation (store_logs, get_log, delete_range, first_index, last_index).",
			[]string{"server", "op"}, nil),
	}
}

func (c *masterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.info, c.raftState, c.term, c.commit, c.applied, c.leaderChanges, c.nodes, c.nvlinks, c.ports, c.agents, c.plans, c.skipped, c.logStoreErrors, c.agentLogSuppressed, c.rejectLogSuppressed, c.nodesLimit, c.plansLimit, c.denied, c.deniedLimit, c.handshakes, c.handshakesRefused, c.handshakesAdmitted, c.dataDirFree, c.dataDirMinFree, c.agentsReported, c.leaderUnreached, c.reportBytes} {
		ch <- d
	}
}

func (c *masterCollector) Collect(ch chan<- prometheus.Metric) {
	s, id := c.s, c.s.cfg.ID
	g := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	st := s.node.Stats()
	g(c.info, 1, id, buildinfo.String())
	for _, name := range []string{"Follower", "Candidate", "Leader", "Shutdown"} {
		v := 0.0
		if st.State == name {
			v = 1
		}
		g(c.raftState, v, id, name)
	}
	g(c.term, float64(st.Term), id)
	g(c.commit, float64(st.CommitIndex), id)
	g(c.applied, float64(st.AppliedIndex), id)
	ch <- prometheus.MustNewConstMetric(c.leaderChanges, prometheus.CounterValue, float64(s.metrics.leaderChanges.Load()), id)
	v := s.store.View()
	byState := map[ginv1.NodeState]int{}
	var nvUp, nvTotal, pUp, pTotal int
	for _, n := range v.NodeNames() {
		h, _ := v.Head(n)
		byState[h.State()]++
		if info, ok := v.Graph.NodeInfo(n); ok {
			nvUp, nvTotal = nvUp+info.NVLinksUp, nvTotal+info.NVLinksTotal
			pUp, pTotal = pUp+info.ComputePortsUp, pTotal+info.ComputePortsTotal
		}
	}
	for _, ns := range []ginv1.NodeState{ginv1.NodeState_NODE_STATE_UP, ginv1.NodeState_NODE_STATE_DOWN, ginv1.NodeState_NODE_STATE_DRAINING} {
		g(c.nodes, float64(byState[ns]), id, stateLabel(ns))
	}
	g(c.nvlinks, float64(nvUp), id, "up")
	g(c.nvlinks, float64(nvTotal-nvUp), id, "down")
	g(c.ports, float64(pUp), id, "up")
	g(c.ports, float64(pTotal-pUp), id, "down")
	g(c.agents, float64(s.sessions.count()), id)
	g(c.agentsReported, float64(s.live.reportedCount()), id)
	g(c.leaderUnreached, s.leaderUnreached().Seconds(), id)
	ch <- prometheus.MustNewConstMetric(c.reportBytes, prometheus.CounterValue, float64(s.metrics.reportBytes.Load()), id)
	g(c.skipped, float64(s.node.SkippedEntries()), id)
	_, nplans := s.store.Counts()
	g(c.plans, float64(nplans), id)
	g(c.nodesLimit, float64(s.cfg.MaxNodes), id)
	g(c.plansLimit, float64(s.cfg.MaxPlans), id)
	g(c.denied, float64(s.store.DeniedCount()), id)
	g(c.deniedLimit, float64(state.MaxDeniedCertificates), id)
	g(c.handshakes, float64(s.admission.inFlight()), id, "in_flight")
	g(c.handshakes, float64(s.admission.waiting.Load()), id, "waiting")
	ch <- prometheus.MustNewConstMetric(c.handshakesRefused, prometheus.CounterValue, float64(s.admission.refused.Load()), id)
	ch <- prometheus.MustNewConstMetric(c.handshakesAdmitted, prometheus.CounterValue, float64(s.admission.admitted.Load()), id)
	if free, minFree, err := s.node.DataDirSpace(); err == nil {
		g(c.dataDirFree, float64(free), id)
		g(c.dataDirMinFree, float64(minFree), id)
	}
	ch <- prometheus.MustNewConstMetric(c.agentLogSuppressed, prometheus.CounterValue, float64(s.agentLog.Suppressed()), id)
	ch <- prometheus.MustNewConstMetric(c.rejectLogSuppressed, prometheus.CounterValue, float64(s.rejectLog.Suppressed()), id)
	for _, e := range s.node.LogStoreErrors() {
		ch <- prometheus.MustNewConstMetric(c.logStoreErrors, prometheus.CounterValue, float64(e.Errors), id, e.Op)
	}
}

func stateLabel(s ginv1.NodeState) string {
	switch s {
	case ginv1.NodeState_NODE_STATE_UP:
		return "up"
	case ginv1.NodeState_NODE_STATE_DOWN:
		return "down"
	case ginv1.NodeState_NODE_STATE_DRAINING:
		return "draining"
	}
	return strconv.Itoa(int(s))
}

// serveHTTP serves /metrics and /healthz (200 while a leader is known) on
// cfg.HTTPBind until ctx ends.
func (s *Server) serveHTTP(ctx context.Context) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newMasterCollector(s), newBoundsCollector(s), newRaftGuardCollector(s), newPreAuthCollector(s), s.metrics.rejected, s.metrics.applyLatency,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(s.cfg.Collectors...)
	checks := s.newCheck()
	reg.MustRegister(newHealthCollector(checks), newLiveCollector(s.liveJobs))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if id, _ := s.node.Leader(); id == "" {
			http.Error(w, "no Raft leader known\n", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	// The read-only web view (/ui/), answered from this replica like gRPC
	// reads, behind the gate of a TLS cluster (httpserve.go).
	ui := http.NewServeMux()
	webui.Register(ui, webView{webBackend{s.topology, s.admin, s.plans, s.calib, checks}, newWebLive(s)}, s.log)
	gate := newUIGate(s)
	reg.MustRegister(gate)
	mux.Handle("/ui", gate.wrap(ui))
	mux.Handle("/ui/", gate.wrap(ui))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	s.preAuth.http.GuardHTTP(srv) // preauth.go
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := s.serveWeb(srv); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("master: http: %w", err)
	}
	return nil
}

// listenHTTP binds the HTTP listener when configured.
func listenHTTP(bind, webConfig string) (net.Listener, error) {
	if bind == "" {
		return nil, nil
	}
	if err := checkWebConfig(webConfig); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("master: listen on --http-bind %s: %w", bind, err)
	}
	return l, nil
}
