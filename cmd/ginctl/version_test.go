package main

import (
	"context"
	"encoding/json"
	"runtime"
	"testing"

	"github.com/gin-topology/gin/internal/buildinfo"
	"github.com/gin-topology/gin/internal/jsonout/schematest"
)

// TestVersion: `ginctl version`, `ginctl --version` print the line every
// GIN binary prints; -o json conforms to its schema.
func TestVersion(t *testing.T) {
	want := buildinfo.Line("ginctl") + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := ctl(context.Background(), "", "", args...)
		if r.code != 0 || r.stdout != want {
			t.Errorf("ginctl %v: exit %d, %q; want %q", args, r.code, r.stdout, want)
		}
	}
	r := ctl(context.Background(), "", "", "version", "-o", "json")
	o := schemaFor(t, []string{"version"})
	if err := schematest.Validate(compileSchema(t, o), []byte(r.stdout), false); err != nil {
		t.Fatal(err)
	}
	var v versionJSON
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Binary != "ginctl" || v.Go != runtime.Version() || v.Version != buildinfo.String() {
		t.Fatalf("version -o json = %s (%v)", r.stdout, err)
	}
}
