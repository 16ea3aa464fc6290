package agent

import (
	"strings"
	"testing"
	"time"
)

func TestDefaultConfigIsValid(t *testing.T) {
	cfg := DefaultConfig()
	cfg.NodeName = "n1"
	if err := cfg.Validate(); err != nil {
		t.Fatalf("DefaultConfig with a node name: %v", err)
	}
	if cfg.HeartbeatInterval != DefaultHeartbeatInterval || cfg.FabricScanInterval != DefaultFabricScanInterval || cfg.HomeProbeInterval != DefaultHomeProbeInterval {
		t.Errorf("DefaultConfig = %+v, want the Default* constants", cfg)
	}
}

// TestConfigValidate: a knob outside its range is refused with an error
// naming gin-agent's flag, and Validate changes nothing.
func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Config)
		wantErr string // "" accepts
	}{
		{"defaults", func(*Config) {}, ""},
		{"no node name", func(c *Config) { c.NodeName = " " }, "--node-name is empty"},
		{"zero heartbeat", func(c *Config) { c.HeartbeatInterval = 0 }, "--heartbeat-interval 0s: must be positive"},
		{"negative heartbeat", func(c *Config) { c.HeartbeatInterval = -time.Second }, "--heartbeat-interval -1s"},
		{"collect 0 is the heartbeat", func(c *Config) { c.CollectInterval = 0 }, ""},
		{"negative collect", func(c *Config) { c.CollectInterval = -time.Second }, "--collect-interval -1s: must not be negative"},
		{"fabric scan 1s", func(c *Config) { c.FabricScanInterval = time.Second }, ""},
		{"fabric scan below 1s", func(c *Config) { c.FabricScanInterval = 999 * time.Millisecond }, "--fabric-scan-interval 999ms: must be at least 1s"},
		{"never home", func(c *Config) { c.HomeProbeInterval = NoHomeProbe }, ""},
		{"home probe 1s", func(c *Config) { c.HomeProbeInterval = time.Second }, ""},
		{"home probe below 1s", func(c *Config) { c.HomeProbeInterval = 100 * time.Millisecond }, "--home-probe-interval 100ms: must be 0 (never return) or at least 1s"},
		{"negative home probe", func(c *Config) { c.HomeProbeInterval = -time.Second }, "--home-probe-interval -1s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.NodeName = "n1"
			tc.change(&cfg)
			before := cfg
			err := cfg.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Validate: %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Validate: %v, want an error containing %q", err, tc.wantErr)
			}
			if cfg.NodeName != before.NodeName || cfg.HeartbeatInterval != before.HeartbeatInterval ||
				cfg.CollectInterval != before.CollectInterval || cfg.FabricScanInterval != before.FabricScanInterval ||
				cfg.HomeProbeInterval != before.HomeProbeInterval {
				t.Errorf("Validate changed the config: %+v, was %+v", cfg, before)
			}
		})
	}
}
