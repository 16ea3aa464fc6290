package main

import (
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gin-topology/gin/internal/jsonout"
	"github.com/gin-topology/gin/internal/jsonout/schematest"
)

var update = flag.Bool("update", false, "rewrite the committed JSON schemas and golden files")

const schemaDir = "../../docs/json-schema"

// TestJSONSchemas: each command's committed schema is what jsonout
// generates for the type the command prints, and a valid draft 2020-12
// schema. `go test ./cmd/ginctl -run TestJSONSchemas -update` rewrites them.
func TestJSONSchemas(t *testing.T) {
	want := map[string]bool{}
	for _, o := range jsonOutputs() {
		want[o.file+".json"] = true
		got, err := jsonout.Schema("ginctl "+o.command+" -o json", o.sample)
		if err != nil {
			t.Fatalf("%s: %v", o.command, err)
		}
		if _, err := schematest.Compile(o.file, got); err != nil {
			t.Fatalf("%s: %v", o.command, err)
		}
		path := filepath.Join(schemaDir, o.file+".json")
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		committed, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v (go test ./cmd/ginctl -run TestJSONSchemas -update writes it)", o.command, err)
		}
		if string(committed) != string(got) {
			t.Errorf("%s: %s is stale: the command's JSON changed (go test ./cmd/ginctl -run TestJSONSchemas -update, and say what changed in docs/JSON.md)", o.command, path)
		}
	}
	entries, err := os.ReadDir(schemaDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "ginctl-") && !want[e.Name()] {
			t.Errorf("%s/%s belongs to no command; remove it", schemaDir, e.Name())
		}
	}
}

// TestEveryCommandHasASchema: every runnable ginctl command prints JSON
// with a schema, or says why it has no JSON form.
func TestEveryCommandHasASchema(t *testing.T) {
	covered := map[string]bool{}
	for _, o := range jsonOutputs() {
		name, _, _ := strings.Cut(o.command, " --")
		covered[name] = true
	}
	for name := range noJSONOutput() {
		covered[name] = true
	}
	var missing []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			if sub.Runnable() {
				name := strings.TrimPrefix(sub.CommandPath(), "ginctl ")
				if !covered[name] {
					missing = append(missing, name)
				}
			}
			walk(sub)
		}
	}
	walk((&app{}).rootCmd())
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("commands without a JSON schema in jsonOutputs (or a reason in noJSONOutput): %v", missing)
	}
}
