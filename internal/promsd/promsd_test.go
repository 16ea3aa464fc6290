package promsd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestBuild(t *testing.T) {
	tests := []struct {
		name    string
		nodes   []string
		masters []Master
		ap, mp  int
		want    []Group
		wantErr string
	}{
		{
			name:    "agents and masters, sorted, IPv6 bracketed",
			nodes:   []string{"node002", "node001"},
			masters: []Master{{ID: "m2", ClientAddress: "[fd00::2]:5000"}, {ID: "m1", ClientAddress: "10.0.0.1:5000"}},
			ap:      9410, mp: 5002,
			want: []Group{
				{Targets: []string{"node001:9410"}, Labels: map[string]string{"job": "gin-agent", "gin_node": "node001"}},
				{Targets: []string{"node002:9410"}, Labels: map[string]string{"job": "gin-agent", "gin_node": "node002"}},
				{Targets: []string{"10.0.0.1:5002"}, Labels: map[string]string{"job": "gin-master", "gin_server": "m1"}},
				{Targets: []string{"[fd00::2]:5002"}, Labels: map[string]string{"job": "gin-master", "gin_server": "m2"}},
			},
		},
		{
			name:    "a master's registered --http-bind wins over the default port",
			masters: []Master{{ID: "m1", ClientAddress: "10.0.0.1:5000", HTTPAddress: "10.0.0.1:9090"}, {ID: "m2", ClientAddress: "10.0.0.2:5000"}},
			ap:      9410, mp: 5002,
			want: []Group{
				{Targets: []string{"10.0.0.1:9090"}, Labels: map[string]string{"job": "gin-master", "gin_server": "m1"}},
				{Targets: []string{"10.0.0.2:5002"}, Labels: map[string]string{"job": "gin-master", "gin_server": "m2"}},
			},
		},
		{name: "empty cluster", ap: 9410, mp: 5002, want: []Group{}},
		{name: "bad agent port", ap: 0, mp: 5002, wantErr: "agent port 0"},
		{name: "bad master port", ap: 9410, mp: 70000, wantErr: "master port 70000"},
		{name: "master without host", masters: []Master{{ID: "m1", ClientAddress: ":5000"}}, ap: 9410, mp: 5002, wantErr: "has no host"},
		{name: "empty node", nodes: []string{""}, ap: 9410, mp: 5002, wantErr: "empty node name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Build(tc.nodes, tc.masters, tc.ap, tc.mp)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// The file is what Prometheus's file_sd reads: a JSON array of
// {targets, labels}, "[]" for no targets (not null).
func TestMarshalAndWriteFile(t *testing.T) {
	b, err := Marshal(nil)
	if err != nil || strings.TrimSpace(string(b)) != "[]" {
		t.Fatalf("Marshal(nil) = %q, %v; want []", b, err)
	}
	groups, _ := Build([]string{"n1"}, nil, 9410, 5002)
	b, err = Marshal(groups)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "targets.json")
	if err := WriteFile(path, b); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back []map[string]any
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if len(back) != 1 || back[0]["targets"].([]any)[0] != "n1:9410" || back[0]["labels"].(map[string]any)["job"] != "gin-agent" {
		t.Fatalf("file = %s", raw)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
	if err := WriteFile(filepath.Join(t.TempDir(), "missing", "t.json"), b); err == nil {
		t.Fatal("WriteFile into a missing directory succeeded")
	}
}
