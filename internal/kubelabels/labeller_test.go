package kubelabels

import (
	"context"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gin-topology/gin/internal/kubetest"
	"github.com/gin-topology/gin/internal/nodelabels"
)

// Against a real API server: an apply names the Node's uid, so a Node
// deleted (or deleted and created again) since the informer saw it is not
// created or relabelled by GIN; an apply owns only GIN's keys; and a key
// GIN stops applying is removed while someone else's stays.
func TestApplyOwnsOnlyItsKeysOfThatNode(t *testing.T) {
	bin, err := kubetest.Find()
	if err != nil {
		if testingCI() {
			t.Fatalf("CI: %v", err)
		}
		t.Skip(err)
	}
	s := kubetest.Start(t, bin)
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig(t, "admin"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	nodes := l.dyn.Resource(nodesGVR)
	create := func(name string) types.UID {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node",
			"metadata": map[string]any{"name": name, "labels": map[string]any{"team": "ml"}}}}
		got, err := nodes.Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.GetUID()
	}
	r := &run{l: l, seen: map[string]nodeSeen{}, applied: map[string]map[string]string{}, dirty: map[string]bool{}, tainted: map[string]bool{}}
	uid := create("n1")
	r.seen["n1"] = nodeSeen{uid: uid}
	if err := r.applyLabels(ctx, change{node: "n1", uid: uid, labels: map[string]string{nodelabels.KeyLeaf: "leaf01", nodelabels.KeyBlock: "block01"}}); err != nil {
		t.Fatal(err)
	}
	if err := r.applyLabels(ctx, change{node: "n1", uid: uid, labels: map[string]string{nodelabels.KeyLeaf: "leaf02"}}); err != nil {
		t.Fatal(err)
	}
	got, err := nodes.Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l := got.GetLabels(); len(l) != 2 || l["team"] != "ml" || l[nodelabels.KeyLeaf] != "leaf02" {
		t.Fatalf("labels after two applies: %v; want team=ml kept, leaf02, block gone", l)
	}

	// Deleted: the apply fails and creates nothing.
	if err := nodes.Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = r.applyLabels(ctx, change{node: "n1", uid: uid, labels: map[string]string{nodelabels.KeyLeaf: "leaf01"}})
	if err == nil {
		t.Fatal("an apply to a deleted Node succeeded")
	}
	if _, err := nodes.Get(ctx, "n1", metav1.GetOptions{}); err == nil {
		t.Fatal("the apply created the deleted Node again")
	}
	// Deleted and created again: another uid, the stale apply is refused.
	create("n1")
	if err := r.applyLabels(ctx, change{node: "n1", uid: uid, labels: map[string]string{nodelabels.KeyLeaf: "leaf01"}}); err == nil || !strings.Contains(err.Error(), "uid") && !strings.Contains(strings.ToLower(err.Error()), "precondition") && !strings.Contains(err.Error(), "UID") {
		t.Fatalf("a stale uid's apply: %v; want a refusal", err)
	}
	got, err = nodes.Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.GetLabels()[nodelabels.KeyLeaf]; ok {
		t.Fatalf("the new n1 got the old one's labels: %v", got.GetLabels())
	}
}

// testingCI reports whether the tests run in CI (CI=true), where a missing
// API server is a failure.
func testingCI() bool { return os.Getenv("CI") == "true" }
