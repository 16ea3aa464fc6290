package webui

import (
	"context"
	"embed"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/inventory"
	"github.com/gin-topology/gin/internal/jsonout"
)

//go:embed static
var static embed.FS

// Backend is what the page reads: the master's own read paths.
type Backend interface {
	ListNodes(context.Context, *ginv1.ListNodesRequest) (*ginv1.ListNodesResponse, error)
	GetNode(context.Context, *ginv1.GetNodeRequest) (*ginv1.GetNodeResponse, error)
	GetMatrix(context.Context, *ginv1.GetMatrixRequest) (*ginv1.GetMatrixResponse, error)
	GetClusterInfo(context.Context, *ginv1.GetClusterInfoRequest) (*ginv1.GetClusterInfoResponse, error)
	// PinnedPlans returns the plans pinned in this replica's state.
	PinnedPlans(context.Context) ([]*ginv1.Plan, error)
	// Topology returns this replica's canonical graph and the imported
	// fabric scan (nil when none), which the pictures are drawn from.
	Topology(context.Context) (*graph.Graph, *ginv1.FabricTopology, error)
	// Measurements returns the stored measurements (the plan charts'
	// measured points).
	Measurements(context.Context) ([]*ginv1.Measurement, error)
	// Estimate answers as PlanService's Estimate (the estimate page).
	Estimate(context.Context, *ginv1.EstimateRequest) (*ginv1.EstimateResponse, error)
	// JobLive returns a running job's ranks and suspects as LiveService's
	// GetJobLive answers (the leader's: a follower asks it), or nil, nil
	// when the job is not live (no rank reported within the live
	// horizon). An error (no leader known, the leader not answering) is
	// shown on the job page as "live state unavailable".
	JobLive(ctx context.Context, job string) (*ginv1.GetJobLiveResponse, error)
}

// MaxPlans bounds the plans one /ui/api/plans answer carries (the first by
// job id; the answer says how many there are).
const MaxPlans = 200

// csp allows nothing but this origin's own files and data: images.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

// requestTimeout bounds one API request.
const requestTimeout = 10 * time.Second

// Register adds GET /ui/ (the page, with the fabric drawn), the pictures
// /ui/node?name=N, /ui/job?id=J and /ui/estimate?gpus=N, GET
// /ui/api/cluster, /ui/api/nodes, /ui/api/node?name=N,
// /ui/api/matrix?node=N and /ui/api/plans to mux. Every other method is
// refused: the view is read-only.
func Register(mux *http.ServeMux, b Backend, log *slog.Logger) {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	h := &handler{b: b, log: log, pages: newPages()}
	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
	mux.Handle("GET /ui/", secure(files))
	mux.Handle("GET /ui/{$}", secure(http.HandlerFunc(h.index)))
	mux.Handle("GET /ui/node", secure(http.HandlerFunc(h.nodePage)))
	mux.Handle("GET /ui/job", secure(http.HandlerFunc(h.jobPage)))
	mux.Handle("GET /ui/estimate", secure(http.HandlerFunc(h.estimatePage)))
	mux.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
	mux.Handle("GET /ui/api/cluster", secure(http.HandlerFunc(h.cluster)))
	mux.Handle("GET /ui/api/nodes", secure(http.HandlerFunc(h.nodes)))
	mux.Handle("GET /ui/api/node", secure(http.HandlerFunc(h.node)))
	mux.Handle("GET /ui/api/matrix", secure(http.HandlerFunc(h.matrix)))
	mux.Handle("GET /ui/api/plans", secure(http.HandlerFunc(h.plans)))
}

func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", csp)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

type handler struct {
	b     Backend
	log   *slog.Logger
	pages *pages
}

func (h *handler) cluster(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	resp, err := h.b.GetClusterInfo(ctx, &ginv1.GetClusterInfoRequest{})
	h.write(w, resp, err)
}

func (h *handler) nodes(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	resp, err := h.b.ListNodes(ctx, &ginv1.ListNodesRequest{})
	h.write(w, resp, err)
}

func (h *handler) node(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	if err := inventory.ValidNodeName(name); err != nil {
		http.Error(w, "name: node name "+err.Error(), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	resp, err := h.b.GetNode(ctx, &ginv1.GetNodeRequest{Name: name})
	h.write(w, resp, err)
}

func (h *handler) matrix(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("node")
	if err := inventory.ValidNodeName(name); err != nil {
		http.Error(w, "node: node name "+err.Error(), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	resp, err := h.b.GetMatrix(ctx, &ginv1.GetMatrixRequest{Nodes: name, IncludeNics: true})
	h.write(w, resp, err)
}

// plansAnswer is /ui/api/plans.
type plansAnswer struct {
	Total int           `json:"total"`
	Plans []*ginv1.Plan `json:"plans"`
}

func (h *handler) plans(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	ps, err := h.b.PinnedPlans(ctx)
	if err != nil {
		h.write(w, nil, err)
		return
	}
	a := plansAnswer{Total: len(ps), Plans: ps}
	if len(a.Plans) > MaxPlans {
		a.Plans = a.Plans[:MaxPlans]
	}
	if a.Plans == nil {
		a.Plans = []*ginv1.Plan{}
	}
	h.write(w, a, nil)
}

// write sends v as the JSON ginctl -o json prints, or the error with the
// HTTP status matching its gRPC code.
func (h *handler) write(w http.ResponseWriter, v any, err error) {
	if err != nil {
		code := http.StatusInternalServerError
		switch status.Code(err) {
		case codes.NotFound:
			code = http.StatusNotFound
		case codes.InvalidArgument:
			code = http.StatusBadRequest
		case codes.Unavailable, codes.FailedPrecondition:
			code = http.StatusServiceUnavailable
		case codes.DeadlineExceeded:
			code = http.StatusGatewayTimeout
		}
		if errors.Is(err, context.DeadlineExceeded) {
			code = http.StatusGatewayTimeout
		}
		h.log.Debug("web view request failed", "err", err)
		http.Error(w, status.Convert(err).Message(), code)
		return
	}
	b, err := jsonout.Marshal(v)
	if err != nil {
		h.log.Error("web view: encode", "err", err)
		http.Error(w, "encode failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
