package sysfs

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/gin-topology/gin/internal/discovery"
)

// errItems returns the ItemErrors' items with root replaced by "<root>",
// sorted, after checking each error is well formed.
func errItems(t *testing.T, root string, errs []discovery.ItemError) []string {
	t.Helper()
	var out []string
	for _, e := range errs {
		if e.Source != "sysfs" || e.Err == nil || e.Item == "" {
			t.Errorf("ill-formed ItemError %#v", e)
		}
		out = append(out, strings.ReplaceAll(filepath.ToSlash(e.Item), filepath.ToSlash(root), "<root>"))
	}
	slices.Sort(out)
	return out
}

func wantErrItems(t *testing.T, root string, errs []discovery.ItemError, want ...string) {
	t.Helper()
	got := errItems(t, root, errs)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("ItemErrors:\n got %q\nwant %q\nerrors: %v", got, want, errs)
	}
}

func protoDiff(t *testing.T, what string, got, want proto.Message) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Errorf("%s:\n got %s\nwant %s", what, prototext.Format(got), prototext.Format(want))
	}
}

var errNotExist = fs.ErrNotExist
