package main

import (
	"flag"
	"os"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/jsonout"
	"github.com/gin-topology/gin/internal/jsonout/schematest"
)

var update = flag.Bool("update", false, "rewrite the committed JSON schema")

const onceSchema = "../../docs/json-schema/gin-agent-once.json"

// TestOnceJSONSchema: the committed schema of `gin-agent --once -o json`
// is current, and what the agent prints for the test inventory and for a
// simulated DGX H100 conforms to it.
func TestOnceJSONSchema(t *testing.T) {
	schema, err := jsonout.Schema("gin-agent --once -o json", (*ginv1.NodeInventory)(nil))
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(onceSchema, schema, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := os.ReadFile(onceSchema)
	if err != nil {
		t.Fatal(err)
	}
	if string(committed) != string(schema) {
		t.Fatalf("%s is stale (go test ./cmd/gin-agent -run TestOnceJSONSchema -update)", onceSchema)
	}
	s, err := schematest.Compile("gin-agent-once", schema)
	if err != nil {
		t.Fatal(err)
	}
	for _, source := range []string{testInventory, "sim:dgx-h100"} {
		code, stdout, stderr := runArgs(t, nil, "--once", "-o", "json", "--source", source, "--node-name", "node001")
		if code != exitOK {
			t.Fatalf("%s: exit %d: %s", source, code, stderr)
		}
		if err := schematest.Validate(s, []byte(stdout), false); err != nil {
			t.Errorf("%s: output does not conform to %s: %v", source, onceSchema, err)
		}
	}
}
