package kubelabels

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gin-topology/gin/internal/nodelabels"
	"github.com/gin-topology/gin/internal/state"
)

// Defaults of Options.
const (
	DefaultQPS      = 50
	DefaultBurst    = 100
	DefaultPoll     = time.Second
	DefaultWorkers  = 4
	maxRetryBackoff = time.Minute
)

// Options configure a Labeller.
type Options struct {
	// Topograph also writes topograph's keys (nodelabels.TopographTier0, ...).
	Topograph bool
	// TaintFail puts the Taint on nodes whose verdict is fail, and takes it
	// off when they pass again.
	TaintFail bool
	// QPS and Burst bound the requests to the API server (a token bucket;
	// defaults DefaultQPS, DefaultBurst).
	QPS   float32
	Burst int
	// Poll is how often the state's index is compared (default DefaultPoll).
	Poll time.Duration
	// Workers patch nodes in parallel, within QPS (default DefaultWorkers).
	Workers int
	// Health gives the verdicts when Run is given none (default
	// StateHealth).
	Health Health
	Logger *slog.Logger
}

// Store is the replicated state the labels are computed from (the
// master's state.Store).
type Store interface {
	View() state.View
}

// Labeller keeps the labels; Run does the work while this master leads.
type Labeller struct {
	opts    Options
	dyn     dynamic.Interface
	meta    metadata.Interface
	log     *slog.Logger
	metrics metrics
}

// Config returns the API server's client configuration: from kubeconfig
// when given, else the pod's in-cluster service account.
func Config(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("kubernetes in-cluster configuration (outside a pod give --kubeconfig): %w", err)
		}
		return c, nil
	}
	c, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	return c, nil
}

// New returns a Labeller talking to the API server of cfg (copied; its
// rate limit set from opts).
func New(cfg *rest.Config, opts Options) (*Labeller, error) {
	if opts.QPS <= 0 {
		opts.QPS = DefaultQPS
	}
	if opts.Burst <= 0 {
		opts.Burst = DefaultBurst
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.Health == nil {
		opts.Health = StateHealth{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = opts.QPS, opts.Burst
	c.UserAgent = "gin-master (kube-labels)"
	// The metadata client (labels) and the dynamic one (taints) carry no
	// typed API: the full clientset would add ~50 MB to gin-master.
	dyn, err := dynamic.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	meta, err := metadata.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("kubernetes metadata client: %w", err)
	}
	return &Labeller{opts: opts, dyn: dyn, meta: meta, log: opts.Logger, metrics: newMetrics()}, nil
}

// Collectors are the labeller's Prometheus metrics.
func (l *Labeller) Collectors() []prometheus.Collector { return l.metrics.collectors() }

var nodesGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// nodeSeen is what the informer says about one Node: its uid and the
// labels GIN owns on it.
type nodeSeen struct {
	uid    types.UID
	labels map[string]string
}

// run is one leadership's state: what each node carries of GIN's labels
// as far as this leader knows (applied), which nodes must be compared again
// (dirty), and the taints.
type run struct {
	l       *Labeller
	health  Health
	mu      sync.Mutex
	seen    map[string]nodeSeen          // informer: Nodes that exist
	applied map[string]map[string]string // GIN's labels on the node, as last applied or seen
	dirty   map[string]bool              // compare again even if the index did not move
	tainted map[string]bool              // GIN's taint is on the node
	kick    chan struct{}
}

// Run keeps the labels until ctx ends (the leader-only loop), with the
// verdicts of health (nil: Options.Health). It lists and watches the
// Nodes, then at every new index of st, and whenever a Node appears or its
// GIN labels change under it, patches the nodes whose labels differ.
func (l *Labeller) Run(ctx context.Context, st Store, health Health) {
	if health == nil {
		health = l.opts.Health
	}
	r := &run{l: l, health: health, seen: map[string]nodeSeen{}, applied: map[string]map[string]string{},
		dirty: map[string]bool{}, tainted: map[string]bool{}, kick: make(chan struct{}, 1)}
	// A metadata informer (what metadatainformer builds, without its
	// factory, which links every typed API): labels and uids only.
	nodes := l.meta.Resource(nodesGVR)
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return nodes.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return nodes.Watch(ctx, o)
		},
	}, l.meta), &metav1.PartialObjectMetadata{}, 0, cache.Indexers{})
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    r.observe,
		UpdateFunc: func(_, obj any) { r.observe(obj) },
		DeleteFunc: r.forget,
	}); err != nil {
		l.log.Error("kube-labels: node informer", "err", err)
		return
	}
	ictx, cancel := context.WithCancel(ctx)
	defer cancel()
	go inf.RunWithContext(ictx)
	l.log.Info("kube-labels: listing the Nodes")
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return
	}
	if l.opts.TaintFail {
		if err := r.loadTaints(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			l.log.Warn("kube-labels: taints not read; GIN's taint is added or removed only where the verdict changes", "err", err)
		}
	}
	l.metrics.leading.Set(1)
	defer l.metrics.leading.Set(0)
	l.log.Info("kube-labels: keeping GIN's Node labels", "nodes", len(r.seen), "prefix", nodelabels.Prefix, "topograph", l.opts.Topograph, "taint", l.opts.TaintFail)

	t := time.NewTicker(l.opts.Poll)
	defer t.Stop()
	var last uint64
	backoff := time.Duration(0)
	retryAt := time.Time{}
	first := true
	for {
		v := st.View()
		r.mu.Lock()
		pending := len(r.dirty) > 0
		r.mu.Unlock()
		due := !retryAt.IsZero() && !time.Now().Before(retryAt)
		// Nodes left dirty by a failed patch wait for the backoff; a new
		// index or a Node that changed under GIN is compared at once.
		if first || v.Index != last || due || pending && retryAt.IsZero() {
			first = false
			last = v.Index
			if err := r.reconcile(ctx, v); err != nil {
				if ctx.Err() != nil {
					return
				}
				backoff = min(max(2*backoff, l.opts.Poll), maxRetryBackoff)
				retryAt = time.Now().Add(backoff)
				l.log.Warn("kube-labels: some nodes not updated; retrying", "err", err, "retry_in", backoff)
			} else {
				backoff, retryAt = 0, time.Time{}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.kick:
		}
	}
}

// observe records a Node the informer has (added or updated). A node
// whose GIN labels are not what this leader applied is compared again: a
// new Node, a new leader's first view, or someone else's change.
func (r *run) observe(obj any) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	own := nodelabels.Owned(m.Labels, r.l.opts.Topograph)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[m.Name] = nodeSeen{uid: m.UID, labels: own}
	if prev, ok := r.applied[m.Name]; !ok || !equal(prev, own) {
		r.applied[m.Name] = own
		r.dirty[m.Name] = true
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

func (r *run) forget(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.seen, m.Name)
	delete(r.applied, m.Name)
	delete(r.dirty, m.Name)
	delete(r.tainted, m.Name)
}

// loadTaints reads which Nodes carry GIN's taint (a paged list).
func (r *run) loadTaints(ctx context.Context) error {
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := r.l.dyn.Resource(nodesGVR).List(ctx, opts)
		if err != nil {
			return err
		}
		r.mu.Lock()
		for i := range list.Items {
			if hasTaint(taints(&list.Items[i])) {
				r.tainted[list.Items[i].GetName()] = true
			}
		}
		r.mu.Unlock()
		if list.GetContinue() == "" {
			return nil
		}
		opts.Continue = list.GetContinue()
	}
}

// change is one node to patch.
type change struct {
	node   string
	uid    types.UID
	labels map[string]string
	taint  *bool // nil: leave the taint alone
}

// reconcile patches every node whose GIN labels (or taint) differ from
// what the state at v says. Nodes with no Node object are skipped; nodes
// that carry GIN labels but are no GIN node (deleted from GIN) lose them.
func (r *run) reconcile(ctx context.Context, v state.View) error {
	start := time.Now()
	want, err := Desired(v, r.health, r.l.opts.Topograph)
	if err != nil {
		return err
	}
	r.mu.Lock()
	var todo []change
	for name, s := range r.seen {
		labels, gin := want[name]
		if !gin {
			labels = map[string]string{}
		}
		c := change{node: name, uid: s.uid}
		if !equal(r.applied[name], labels) {
			c.labels = labels
		}
		if r.l.opts.TaintFail {
			fail := labels[nodelabels.KeyHealth] == string(nodelabels.Fail)
			if fail != r.tainted[name] {
				c.taint = &fail
			}
		}
		delete(r.dirty, name)
		if c.labels != nil || c.taint != nil {
			todo = append(todo, c)
		}
	}
	r.mu.Unlock()
	r.l.metrics.ginNodes.Set(float64(len(want)))
	defer r.l.metrics.reconciles.Inc()
	if len(todo) == 0 {
		return nil
	}
	slices.SortFunc(todo, func(a, b change) int {
		if a.node < b.node {
			return -1
		}
		return 1
	})
	work := make(chan change)
	errs := make(chan error, len(todo))
	var wg sync.WaitGroup
	for range min(r.l.opts.Workers, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				errs <- r.apply(ctx, c)
			}
		}()
	}
feed:
	for _, c := range todo {
		select {
		case work <- c:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	var failed []error
	for err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	r.l.metrics.reconcileSeconds.Observe(time.Since(start).Seconds())
	r.l.log.Info("kube-labels: nodes updated", "index", v.Index, "changed", len(todo)-len(failed), "failed", len(failed), "took", time.Since(start).Round(time.Millisecond))
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d nodes: %w", len(failed), len(todo), errors.Join(failed[:min(len(failed), 3)]...))
	}
	return nil
}

// apply patches one node. On failure the node is marked dirty, so that it
// is tried again.
func (r *run) apply(ctx context.Context, c change) error {
	err := r.applyLabels(ctx, c)
	if err == nil {
		err = r.applyTaint(ctx, c)
	}
	if err != nil {
		r.mu.Lock()
		if _, ok := r.seen[c.node]; ok {
			r.dirty[c.node] = true
		}
		r.mu.Unlock()
	}
	return err
}

func (r *run) applyLabels(ctx context.Context, c change) error {
	if c.labels == nil {
		return nil
	}
	// The uid makes the apply a precondition on this very Node: a Node
	// deleted meanwhile is not created again by the apply.
	body, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": c.node, "uid": c.uid, "labels": c.labels}})
	if err != nil {
		return err
	}
	force := true
	_, err = r.l.meta.Resource(nodesGVR).Patch(ctx, c.node, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: nodelabels.FieldManager, Force: &force})
	if err != nil {
		r.l.metrics.patches.WithLabelValues("labels", "error").Inc()
		return fmt.Errorf("node %s: labels: %w", c.node, err)
	}
	r.l.metrics.patches.WithLabelValues("labels", "ok").Inc()
	r.mu.Lock()
	if _, ok := r.seen[c.node]; ok {
		r.applied[c.node] = c.labels
	}
	r.mu.Unlock()
	return nil
}

// applyTaint adds or removes GIN's taint. The taint list is atomic, so
// the whole list is written, by a JSON patch that first tests the
// resourceVersion just read: a Node changed meanwhile fails the test and is
// read again (a few times). A patch, not an update: the ClusterRole grants
// patch alone.
func (r *run) applyTaint(ctx context.Context, c change) error {
	if c.taint == nil {
		return nil
	}
	want := *c.taint
	nodes := r.l.dyn.Resource(nodesGVR)
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		err = r.patchTaint(ctx, nodes, c, want)
		if err == nil || !(apierrors.IsInvalid(err) || apierrors.IsConflict(err)) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		r.l.metrics.patches.WithLabelValues("taint", "error").Inc()
		return fmt.Errorf("node %s: taint: %w", c.node, err)
	}
	r.l.metrics.patches.WithLabelValues("taint", "ok").Inc()
	r.mu.Lock()
	if _, ok := r.seen[c.node]; ok {
		r.tainted[c.node] = want
	}
	r.mu.Unlock()
	return nil
}

func (r *run) patchTaint(ctx context.Context, nodes dynamic.NamespaceableResourceInterface, c change, want bool) error {
	n, err := nodes.Get(ctx, c.node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if n.GetUID() != c.uid {
		return apierrors.NewNotFound(nodesGVR.GroupResource(), c.node)
	}
	ts := taints(n)
	if hasTaint(ts) == want {
		return nil
	}
	ts = slices.DeleteFunc(ts, isGINTaint)
	if want {
		ts = append(ts, map[string]any{"key": nodelabels.TaintKey, "value": nodelabels.TaintValue, "effect": nodelabels.TaintEffect})
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": n.GetResourceVersion()},
		{"op": "add", "path": "/spec/taints", "value": ts},
	})
	if err != nil {
		return err
	}
	_, err = nodes.Patch(ctx, c.node, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: nodelabels.FieldManager})
	return err
}

// taints returns a Node's spec.taints (a copy of the list; nil when none).
func taints(n *unstructured.Unstructured) []map[string]any {
	list, _, _ := unstructured.NestedSlice(n.Object, "spec", "taints")
	out := make([]map[string]any, 0, len(list))
	for _, t := range list {
		if m, ok := t.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func isGINTaint(t map[string]any) bool {
	return t["key"] == nodelabels.TaintKey && t["effect"] == nodelabels.TaintEffect
}

func hasTaint(ts []map[string]any) bool { return slices.ContainsFunc(ts, isGINTaint) }

// metrics are the labeller's Prometheus metrics.
type metrics struct {
	patches          *prometheus.CounterVec
	ginNodes         prometheus.Gauge
	leading          prometheus.Gauge
	reconciles       prometheus.Counter
	reconcileSeconds prometheus.Histogram
}

func newMetrics() metrics {
	return metrics{
		patches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gin_master_kube_node_patches_total",
			Help: "Node updates sent to the Kubernetes API server by --kube-labels, by what (labels: a server-side apply; taint) and result (ok, error)."},
			[]string{"what", "result"}),
		ginNodes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gin_master_kube_gin_nodes",
			Help: "GIN nodes whose labels --kube-labels computed at its last comparison."}),
		leading: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gin_master_kube_labels_active",
			Help: "1 while this master's --kube-labels loop runs (it leads and has listed the Nodes)."}),
		reconciles: prometheus.NewCounter(prometheus.CounterOpts{Name: "gin_master_kube_reconciles_total",
			Help: "Comparisons of the labels the state gives with those on the Nodes that --kube-labels finished (patches included)."}),
		reconcileSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gin_master_kube_reconcile_seconds",
			Help: "Time of one --kube-labels comparison that patched nodes, patches included.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 8)}),
	}
}

func (m metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.patches, m.ginNodes, m.leading, m.reconciles, m.reconcileSeconds}
}
