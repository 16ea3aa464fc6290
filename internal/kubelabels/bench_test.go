package kubelabels

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/kubetest"
)

// BenchmarkKubeLabels labels GIN_KUBE_BENCH_NODES (default 10,000) Nodes
// of a real kube-apiserver from scratch (32 nodes per leaf group), then
// fails one leaf group (its 32 nodes DOWN: the leaf switch died) and
// relabels; it reports the time and the label patches of each step, at
// GIN_KUBE_BENCH_QPS (default 1000) requests per second.
//
//	go test -run XXX -bench KubeLabels -benchtime 1x ./internal/kubelabels
func BenchmarkKubeLabels(b *testing.B) {
	n := envInt(b, "GIN_KUBE_BENCH_NODES", 10000)
	qps := envInt(b, "GIN_KUBE_BENCH_QPS", 1000)
	bin, err := kubetest.Find()
	if err != nil {
		b.Skip(err)
	}
	s := kubetest.Start(b, bin)
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig(b, "admin"))
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 2000, 2000
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	groups := (n + 31) / 32
	st, _ := simStore(b, "dgx-h100", n, &sim.FabricSpec{LeafGroups: groups, Spines: 8, Oversubscription: 1})
	t0 := time.Now()
	createNodes(b, dyn, n)
	b.Logf("%d Nodes created in %s", n, time.Since(t0).Round(time.Millisecond))

	for b.Loop() {
		l, err := New(cfg, Options{QPS: float32(qps), Burst: qps, Workers: 16})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		start := time.Now()
		go func() { defer close(done); l.Run(ctx, st, nil) }()
		ok := func() float64 { return testutil.ToFloat64(l.metrics.patches.WithLabelValues("labels", "ok")) }
		waitPatches(b, ok, float64(n))
		scratch := time.Since(start)

		// One leaf group fails: its nodes DOWN in one batch of entries.
		before := ok()
		start = time.Now()
		idx := st.Index() + 1
		for i := 0; i < 32 && i < n; i++ {
			if _, err := st.SetNodeState(idx, &statev1.SetNodeState{NodeName: fmt.Sprintf("node%03d", i+1), State: ginv1.NodeState_NODE_STATE_DOWN}); err != nil {
				b.Fatal(err)
			}
			idx++
		}
		waitPatches(b, ok, before+float64(min(32, n)))
		leaf := time.Since(start)
		cancel()
		<-done
		b.ReportMetric(scratch.Seconds(), "s-from-scratch")
		b.ReportMetric(before, "patches-from-scratch")
		b.ReportMetric(leaf.Seconds(), "s-one-leaf")
		b.ReportMetric(ok()-before, "patches-one-leaf")
		b.Logf("from scratch: %d nodes in %s, %v label patches; one leaf failed: %s, %v patches",
			n, scratch.Round(time.Millisecond), before, leaf.Round(time.Millisecond), ok()-before)
	}
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// waitPatches waits until count reaches want. It polls a counter the
// labeller keeps; how long that takes is what the benchmark measures.
func waitPatches(b *testing.B, count func() float64, want float64) {
	b.Helper()
	deadline := time.Now().Add(30 * time.Minute)
	for count() < want {
		if time.Now().After(deadline) {
			b.Fatalf("%v of %v patches after 30 min", count(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func createNodes(b *testing.B, dyn dynamic.Interface, n int) {
	b.Helper()
	work := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node",
					"metadata": map[string]any{"name": fmt.Sprintf("node%03d", i+1), "labels": map[string]any{"kubernetes.io/hostname": fmt.Sprintf("node%03d", i+1)}}}}
				if _, err := dyn.Resource(nodesGVR).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}
