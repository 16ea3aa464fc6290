package master

import (
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/ratelog"
)

// The HTTP port (--http-bind) serves /metrics and /healthz as Prometheus'
// exporters do: plaintext by default, TLS and client authentication (or
// basic auth) through a web configuration file (--web-config-file, the
// format of prometheus/exporter-toolkit, reloaded at every connection).
//
// The web view (/ui/ and /ui/api/*) answers what gRPC guards (members,
// addresses, the cluster id, inventories, plans). On a cluster with mutual
// TLS it is served only over TLS, to a client certificate of the cluster's
// CA (verified here against the CA as it is now, whatever the web config's
// client_ca_file) naming a role that may read: reader, scheduler, admin or
// master; a denied certificate is refused like on gRPC. Without TLS the
// cluster has no identities and the view is open like its gRPC reads.

// uiRoles may open the web view on a TLS cluster.
var uiRoles = []pki.Role{pki.RoleReader, pki.RoleScheduler, pki.RoleAdmin, pki.RoleMaster}

// uiGate guards the web view; it counts its refusals by reason.
type uiGate struct {
	s       *Server
	refused [numUIRefusals]atomic.Uint64
	desc    *prometheus.Desc
	// lines bounds the refusal lines: anyone who reaches the HTTP port
	// can cause one per request (every refusal is still counted).
	lines *ratelog.Bucket
}

// Why the web view refused a request (the reason label).
const (
	uiNotTLS = iota
	uiNoCertificate
	uiBadCertificate
	uiDenied
	uiRole
	numUIRefusals
)

func uiRefusalNames() [numUIRefusals]string {
	return [numUIRefusals]string{"not_tls", "no_certificate", "bad_certificate", "denied", "role"}
}

func newUIGate(s *Server) *uiGate {
	return &uiGate{s: s, lines: ratelog.New(rejectLogRate, rejectLogBurst, s.cfg.AgentLogClock.Now), desc: prometheus.NewDesc("gin_master_ui_requests_refused_total",
		"Web view requests (/ui/) refused on a cluster with mutual TLS, by reason: not_tls (plain HTTP: give --web-config-file with tls_server_config), no_certificate, bad_certificate (not of the cluster's CA), denied (on the deny list), role (an agent's).",
		[]string{"server", "reason"}, nil)}
}

// Describe implements prometheus.Collector.
func (g *uiGate) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect implements prometheus.Collector.
func (g *uiGate) Collect(ch chan<- prometheus.Metric) {
	for i, name := range uiRefusalNames() {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.CounterValue, float64(g.refused[i].Load()), g.s.cfg.ID, name)
	}
}

// wrap is h behind the gate (h itself on a cluster without TLS).
func (g *uiGate) wrap(h http.Handler) http.Handler {
	if g.s.cfg.TLS == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reason, code, err := g.check(r)
		if err != nil {
			g.refused[reason].Add(1)
			g.lines.Log(r.Context(), g.s.log, slog.LevelWarn, "web view: request refused",
				slog.String("peer", r.RemoteAddr), slog.String("path", ratelog.Clip(r.URL.Path)), slog.Any("err", err))
			http.Error(w, err.Error()+"\n", code)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// check is nil for a request the web view may answer, or why not.
func (g *uiGate) check(r *http.Request) (reason, code int, err error) {
	if r.TLS == nil {
		return uiNotTLS, http.StatusForbidden, fmt.Errorf("this cluster uses mutual TLS: the web view is served only over TLS to a client certificate of the cluster (reader or above); start gin-master with --web-config-file naming a tls_server_config (docs/SECURITY.md, \"The HTTP port\")")
	}
	if len(r.TLS.PeerCertificates) == 0 {
		return uiNoCertificate, http.StatusUnauthorized, fmt.Errorf("the web view needs a client certificate of the cluster (reader or above): none was given (client_auth_type in --web-config-file must ask for one)")
	}
	leaf := r.TLS.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range r.TLS.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: g.s.cfg.TLS.Pool(), Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return uiBadCertificate, http.StatusUnauthorized, fmt.Errorf("the web view needs a client certificate of the cluster's CA: %w", err)
	}
	id, err := pki.IdentityFromCert(leaf)
	if err != nil {
		return uiBadCertificate, http.StatusUnauthorized, fmt.Errorf("client certificate: %w", err)
	}
	if err := pki.CheckDenied(g.s.store, leaf); err != nil {
		return uiDenied, http.StatusUnauthorized, err
	}
	if err := pki.RequireRole(uiRoles...)(id); err != nil {
		return uiRole, http.StatusForbidden, fmt.Errorf("the web view: %w", err)
	}
	return 0, 0, nil
}

// serveWeb serves srv on the HTTP listener, with TLS and authentication as
// the web config file says (plain HTTP without one).
func (s *Server) serveWeb(srv *http.Server) error {
	path := s.cfg.WebConfigFile
	return web.Serve(s.httpLis, srv, &web.FlagConfig{WebConfigFile: &path}, s.log)
}

// checkWebConfig refuses a web config file that exporter-toolkit would
// refuse, before the master starts (it is read again at every connection).
func checkWebConfig(path string) error {
	if path == "" {
		return nil
	}
	if err := web.Validate(path); err != nil {
		return fmt.Errorf("master: --web-config-file %s: %w", path, err)
	}
	return nil
}
