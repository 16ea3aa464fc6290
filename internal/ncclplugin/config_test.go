package main

import (
	"strings"
	"testing"
	"time"
)

func TestConfigSettings(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		check   func(c config) bool
		warning string // "" = no warning
	}{
		{"defaults", nil, func(c config) bool {
			return c.initTimeout == defaultInitTimeout && c.cacheTimeout == defaultCacheTimeout && c.failover && !c.strict &&
				c.agentSocket == "/run/gin/agent.sock"
		}, ""},
		{"timeout ok", map[string]string{"NCCL_GIN_INIT_TIMEOUT_MS": "250"}, func(c config) bool { return c.initTimeout == 250*time.Millisecond }, ""},
		{"timeout -1", map[string]string{"NCCL_GIN_INIT_TIMEOUT_MS": "-1"}, func(c config) bool { return c.initTimeout == defaultInitTimeout }, `NCCL_GIN_INIT_TIMEOUT_MS="-1"`},
		{"timeout 0", map[string]string{"NCCL_GIN_INIT_TIMEOUT_MS": "0"}, func(c config) bool { return c.initTimeout == defaultInitTimeout }, `NCCL_GIN_INIT_TIMEOUT_MS="0"`},
		{"timeout abc", map[string]string{"NCCL_GIN_INIT_TIMEOUT_MS": "abc"}, func(c config) bool { return c.initTimeout == defaultInitTimeout }, "using the default 5s"},
		{"timeout 1e3", map[string]string{"NCCL_GIN_INIT_TIMEOUT_MS": "1e3"}, func(c config) bool { return c.initTimeout == defaultInitTimeout }, `"1e3"`},
		{"timeout 2^63-1", map[string]string{"NCCL_GIN_INIT_TIMEOUT_MS": "9223372036854775807"}, func(c config) bool { return c.initTimeout == defaultInitTimeout }, "whole milliseconds from 1 to 600000"},
		{"timeout above 10 min", map[string]string{"NCCL_GIN_INIT_TIMEOUT_MS": "600001"}, func(c config) bool { return c.initTimeout == defaultInitTimeout }, "600001"},
		{"cache timeout 0", map[string]string{"NCCL_GIN_CACHE_TIMEOUT": "0"}, func(c config) bool { return c.cacheTimeout == 0 }, ""},
		{"cache timeout 1.5", map[string]string{"NCCL_GIN_CACHE_TIMEOUT": "1.5"}, func(c config) bool { return c.cacheTimeout == defaultCacheTimeout }, "NCCL_GIN_CACHE_TIMEOUT"},
		{"strict yes", map[string]string{"NCCL_GIN_STRICT": "yes"}, func(c config) bool { return !c.strict }, `NCCL_GIN_STRICT="yes" is not valid (want 0 or 1); using the default 0`},
		{"failover 0", map[string]string{"NCCL_GIN_FAILOVER": "0"}, func(c config) bool { return !c.failover }, ""},
		{"failover 2", map[string]string{"NCCL_GIN_FAILOVER": "2"}, func(c config) bool { return c.failover }, "NCCL_GIN_FAILOVER"},
		{"agent socket none", map[string]string{"NCCL_GIN_AGENT_SOCKET": "none"}, func(c config) bool { return c.agentSocket == "" }, ""},
		{"agent socket path", map[string]string{"NCCL_GIN_AGENT_SOCKET": "/tmp/a.sock"}, func(c config) bool { return c.agentSocket == "/tmp/a.sock" }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := configFrom(func(k string) string { return tc.env[k] })
			if !tc.check(c) {
				t.Errorf("config %+v", c)
			}
			got := strings.Join(c.warnings, "\n")
			switch {
			case tc.warning == "" && got != "":
				t.Errorf("unexpected warning %q", got)
			case tc.warning != "" && !strings.Contains(got, tc.warning):
				t.Errorf("warnings %q, want %q", got, tc.warning)
			}
		})
	}
}
