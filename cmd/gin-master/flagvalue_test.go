package main

import (
	"io"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/gin-topology/gin/internal/master"
	ginraft "github.com/gin-topology/gin/internal/raft"
)

// parseFlags is o after gin-master's flags parsed args.
func parseFlags(t *testing.T, args ...string) options {
	t.Helper()
	var o options
	cmd := newCommand(&o, io.Discard, io.Discard)
	if err := cmd.Flags().Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return o
}

// TestFlagDefaultsAreDefaultConfig: with no flag, the master's knobs are
// master.DefaultConfig's (the flags' 0 of --handshake-rate and the Raft
// tuning leave the master's own default to New).
func TestFlagDefaultsAreDefaultConfig(t *testing.T) {
	o := parseFlags(t, "--node-id", "m1")
	cfg, err := masterConfig(o)
	if err != nil {
		t.Fatal(err)
	}
	d := master.DefaultConfig()
	if cfg.HeartbeatInterval != d.HeartbeatInterval || cfg.MissedHeartbeats != d.MissedHeartbeats ||
		cfg.HelloTimeout != d.HelloTimeout || cfg.MaxNodes != d.MaxNodes || cfg.MaxPlans != d.MaxPlans ||
		cfg.MaxHandshakes != d.MaxHandshakes || cfg.HandshakeQueue != d.HandshakeQueue ||
		cfg.AgentLogRate != d.AgentLogRate || cfg.AgentLogBurst != d.AgentLogBurst ||
		cfg.MaxStreamsPerConn != d.MaxStreamsPerConn || cfg.MinFreeBytes != d.MinFreeBytes {
		t.Fatalf("defaults %+v, want DefaultConfig's %+v", cfg, d)
	}
	if cfg.HandshakeRate != 0 || cfg.ID != "m1" || cfg.Bind != ":5000" || cfg.RaftBind != ":5001" || cfg.DataDir != "/var/lib/gin-master" {
		t.Fatalf("cfg %+v: want rate 0, id m1, :5000, :5001, /var/lib/gin-master", cfg)
	}
}

// TestFlagValuesTranslate: the flags whose unit or zero differ from their
// Config field's are translated by their values; Validate alone refuses
// what is out of range.
func TestFlagValuesTranslate(t *testing.T) {
	tests := []struct {
		flag, value string
		check       func(master.Config) bool
		wantErr     string // of masterConfig (Validate)
	}{
		{"--handshake-queue", "0", func(c master.Config) bool { return c.HandshakeQueue == master.NoHandshakeQueue }, ""},
		{"--handshake-queue", "7", func(c master.Config) bool { return c.HandshakeQueue == 7 }, ""},
		{"--handshake-queue", "-2", nil, "--handshake-queue -2: want 0..10000000"},
		{"--data-dir-min-free-mib", "128", func(c master.Config) bool { return c.MinFreeBytes == 128<<20 }, ""},
		{"--data-dir-min-free-mib", "16", nil, "--data-dir-min-free-mib 16: want 64..1048576"},
		{"--data-dir-min-free-mib", "2000000", nil, "--data-dir-min-free-mib 2000000: want 64..1048576"},
		{"--data-dir-min-free-mib", "18446744073709551615", nil, "--data-dir-min-free-mib"},
		{"--max-streams-per-conn", "100", func(c master.Config) bool { return c.MaxStreamsPerConn == 100 }, ""},
		{"--max-streams-per-conn", "5000000000", nil, "--max-streams-per-conn 4294967295: want 1..65536"},
	}
	for _, tc := range tests {
		t.Run(tc.flag+" "+tc.value, func(t *testing.T) {
			cfg, err := masterConfig(parseFlags(t, "--node-id", "m1", tc.flag, tc.value))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("masterConfig: %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !tc.check(cfg) {
				t.Fatalf("masterConfig: %v, %+v", err, cfg)
			}
		})
	}
	if ginraft.MaxMinFreeBytes>>20 != 1048576 || math.MaxUint32 != 4294967295 {
		t.Fatal("the table's ranges are stale")
	}
}

// TestFlagValuesShowTheirDefaults: --help shows each translated flag's
// default in the flag's unit.
func TestFlagValuesShowTheirDefaults(t *testing.T) {
	var o options
	f := newCommand(&o, io.Discard, io.Discard).Flags()
	d := master.DefaultConfig()
	for name, want := range map[string]uint64{
		"handshake-queue":       uint64(d.HandshakeQueue),
		"data-dir-min-free-mib": d.MinFreeBytes >> 20,
		"max-streams-per-conn":  uint64(d.MaxStreamsPerConn),
	} {
		if got := f.Lookup(name).DefValue; got != strconv.FormatUint(want, 10) {
			t.Errorf("--%s default %q, want %d", name, got, want)
		}
	}
}
