package main

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestGlobalsValidate: a bad global flag value is refused with an error
// naming the flag, and validate changes nothing.
func TestGlobalsValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*globals)
		wantErr string // "" accepts
	}{
		{"defaults", func(*globals) {}, ""},
		{"json", func(g *globals) { g.output = "json" }, ""},
		{"yaml", func(g *globals) { g.output = "yaml" }, ""},
		{"bad output", func(g *globals) { g.output = "xml" }, `-o "xml": want table, json or yaml`},
		{"debug", func(g *globals) { g.logLevel = "debug" }, ""},
		{"bad log level", func(g *globals) { g.logLevel = "loud" }, `--log-level "loud": want debug, info, warn or error`},
		{"zero timeout", func(g *globals) { g.timeout = 0 }, "--timeout 0s: must be positive"},
		{"negative timeout", func(g *globals) { g.timeout = -time.Second }, "--timeout -1s: must be positive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := defaultGlobals()
			tc.change(&g)
			before := g
			err := g.validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("validate: %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("validate: %v, want an error containing %q", err, tc.wantErr)
			}
			if !reflect.DeepEqual(g, before) {
				t.Errorf("validate changed the globals: %+v, was %+v", g, before)
			}
		})
	}
}

// TestGlobalsBind: each global flag sets its field and no other.
func TestGlobalsBind(t *testing.T) {
	tests := []struct {
		args []string
		want func(*globals)
	}{
		{nil, func(*globals) {}},
		{[]string{"--master", "m1,m2"}, func(g *globals) { g.master = "m1,m2" }},
		{[]string{"-o", "json"}, func(g *globals) { g.output = "json" }},
		{[]string{"--no-headers", "--consistent"}, func(g *globals) { g.noHeaders, g.consistent = true, true }},
		{[]string{"--timeout", "3s"}, func(g *globals) { g.timeout = 3 * time.Second }},
		{[]string{"--log-level", "debug"}, func(g *globals) { g.logLevel = "debug" }},
		{[]string{"--tls-ca", "a", "--tls-cert", "b", "--tls-key", "c"}, func(g *globals) { g.tls.CA, g.tls.Cert, g.tls.Key = "a", "b", "c" }},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			got := defaultGlobals()
			f := pflag.NewFlagSet("ginctl", pflag.ContinueOnError)
			bindGlobals(f, &got)
			if err := f.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			want := defaultGlobals()
			tc.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("globals = %+v, want %+v", got, want)
			}
		})
	}
}

// TestBadGlobalsExitUsage: a bad global flag value exits 2 (a usage
// error) before any master is asked, for every subcommand.
func TestBadGlobalsExitUsage(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--timeout", "0s", "nodes"}, "ginctl: --timeout 0s: must be positive\n"},
		{[]string{"--timeout", "-5s", "members"}, "ginctl: --timeout -5s: must be positive\n"},
		{[]string{"-o", "xml", "cluster"}, `ginctl: -o "xml": want table, json or yaml` + "\n"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			// 127.0.0.1:1 refuses: a call made would fail with exit 1.
			getenv := func(k string) string {
				if k == "GIN_MASTER_HOST" {
					return "127.0.0.1:1"
				}
				return ""
			}
			code := run(context.Background(), tc.args, strings.NewReader(""), &out, &errb, getenv)
			if code != exitUsage || errb.String() != tc.wantErr || out.Len() != 0 {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, out.String(), errb.String(), exitUsage, tc.wantErr)
			}
		})
	}
}
