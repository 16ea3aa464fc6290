package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/gin-topology/gin/internal/agent"
)

// TestConfigValidate: every range of gin-agent's own knobs (the agent's
// are tested in internal/agent) is checked in validate, the error names
// the flag, and validate changes nothing.
func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*config)
		wantErr string // "" accepts
	}{
		{"defaults", func(*config) {}, ""},
		{"sim profile", func(c *config) { c.Source = "sim:dgx-h100" }, ""},
		{"unknown source", func(c *config) { c.Source = "dcgm" }, `--source "dcgm": want auto, nvml`},
		{"auto with argument", func(c *config) { c.Source = "auto:x" }, "auto takes no argument"},
		{"unknown profile", func(c *config) { c.Source = "sim:nope" }, `unknown profile "nope"`},
		{"agent knob", func(c *config) { c.Agent.FabricScanInterval = time.Millisecond }, "--fabric-scan-interval 1ms"},
		{"zero link threshold", func(c *config) { c.LinkErrors = 0 }, "--link-error-threshold"},
		{"metrics bind without port", func(c *config) { c.MetricsBind = "localhost" }, `--metrics-bind "localhost"`},
		{"metrics off", func(c *config) { c.MetricsBind = "" }, ""},
		{"bad output", func(c *config) { c.Output = "xml" }, `--output "xml": want table, json or yaml`},
		{"yaml", func(c *config) { c.Output = "yaml" }, ""},
		{"bad log level", func(c *config) { c.LogLevel = "loud" }, `--log-level "loud"`},
		{"warning", func(c *config) { c.LogLevel = "WARNING" }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := defaultConfig("n1")
			tc.change(&c)
			before := c
			err := c.validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("validate: %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("validate: %v, want an error containing %q", err, tc.wantErr)
			}
			if !reflect.DeepEqual(c, before) {
				t.Errorf("validate changed the config: %+v, was %+v", c, before)
			}
		})
	}
}

// TestFlagsBindTheConfig: each flag sets its field of the config and no
// other; defaults are defaultConfig's.
func TestFlagsBindTheConfig(t *testing.T) {
	tests := []struct {
		args []string
		want func(*config)
	}{
		{nil, func(*config) {}},
		{[]string{"--home-probe-interval", "0"}, func(c *config) { c.Agent.HomeProbeInterval = agent.NoHomeProbe }},
		{[]string{"--home-probe-interval", "2m"}, func(c *config) { c.Agent.HomeProbeInterval = 2 * time.Minute }},
		{[]string{"--heartbeat-interval", "3s"}, func(c *config) { c.Agent.HeartbeatInterval = 3 * time.Second }},
		{[]string{"--fabric-scan-interval", "1h"}, func(c *config) { c.Agent.FabricScanInterval = time.Hour }},
		{[]string{"--node-name", "x"}, func(c *config) { c.Agent.NodeName = "x" }},
		{[]string{"--plan-socket", "", "--plan-dir", "/p"}, func(c *config) { c.Plans.socket, c.Plans.dir = "", "/p" }},
		{[]string{"--storage-hcas", "mlx5_2,mlx5_3"}, func(c *config) { c.StorageHCAs = []string{"mlx5_2", "mlx5_3"} }},
		{[]string{"--once", "-o", "json"}, func(c *config) { c.Once, c.Output = true, "json" }},
		{[]string{"--tls-ca", "a", "--tls-cert", "b", "--tls-key", "c"}, func(c *config) { c.TLS.CA, c.TLS.Cert, c.TLS.Key = "a", "b", "c" }},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			got := defaultConfig("n1")
			f := pflag.NewFlagSet("gin-agent", pflag.ContinueOnError)
			bindFlags(f, &got)
			if err := f.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			want := defaultConfig("n1")
			tc.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("config = %+v\nwant     %+v", got, want)
			}
		})
	}
}

// TestFlagHelpIsOneLine: the details are in docs/OPERATIONS.md.
func TestFlagHelpIsOneLine(t *testing.T) {
	c := defaultConfig("n1")
	f := pflag.NewFlagSet("gin-agent", pflag.ContinueOnError)
	bindFlags(f, &c)
	f.VisitAll(func(fl *pflag.Flag) {
		if strings.Contains(fl.Usage, "\n") || len(fl.Usage) > 100 {
			t.Errorf("--%s: help of %d characters; want one short line", fl.Name, len(fl.Usage))
		}
	})
}
