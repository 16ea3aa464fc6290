package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/gin-topology/gin/internal/masteraddr"
	"github.com/gin-topology/gin/internal/pki"
)

// DefaultTimeout is --timeout's default: the deadline of each request.
const DefaultTimeout = 10 * time.Second

// globals are ginctl's global flags, one configuration for every
// subcommand: defaultGlobals holds the defaults, bindGlobals binds each
// flag to its field once, validate checks the ranges before any
// subcommand runs. docs/OPERATIONS.md explains them.
type globals struct {
	// master is --master as given (else $GIN_MASTER_HOST, else the
	// default; resolved when a client is made).
	master string
	// output is -o: table, json or yaml (yaml is printed as the json
	// document; see app.yaml).
	output string
	// noHeaders is --no-headers.
	noHeaders bool
	// consistent is --consistent: read from the verified leader.
	consistent bool
	// timeout is --timeout, the deadline of each request.
	timeout time.Duration
	// logLevel is --log-level.
	logLevel string
	// tls are --tls-ca, --tls-cert, --tls-key (else GIN_TLS_*).
	tls pki.Files
}

// defaultGlobals are the global flags' defaults.
func defaultGlobals() globals {
	return globals{output: "table", timeout: DefaultTimeout, logLevel: "warn"}
}

// bindGlobals binds the global flags to g, whose values are their
// defaults. The help is one line.
func bindGlobals(pf *pflag.FlagSet, g *globals) {
	pf.StringVar(&g.master, "master", g.master, "master list host[:port],... (default $"+masteraddr.EnvVar+", else "+masteraddr.DefaultMaster+")")
	pf.StringVarP(&g.output, "output", "o", g.output, "output format: table, json or yaml (docs/JSON.md)")
	pf.BoolVar(&g.noHeaders, "no-headers", g.noHeaders, "tables: leave out the header row and summary lines")
	pf.BoolVar(&g.consistent, "consistent", g.consistent, "read from the leader after it verified its leadership")
	pf.DurationVar(&g.timeout, "timeout", g.timeout, "deadline of each request")
	pf.StringVar(&g.logLevel, "log-level", g.logLevel, "log level on stderr: debug (each request), info, warn or error")
	pf.StringVar(&g.tls.CA, "tls-ca", g.tls.CA, "mTLS: the cluster CA file (default $GIN_TLS_CA)")
	pf.StringVar(&g.tls.Cert, "tls-cert", g.tls.Cert, "mTLS: this client's certificate (default $GIN_TLS_CERT)")
	pf.StringVar(&g.tls.Key, "tls-key", g.tls.Key, "mTLS: this client's key (default $GIN_TLS_KEY)")
}

// validate checks every global flag's value; it changes nothing. Its
// errors name the flag (and are usage errors: exit 2). The master list
// and the TLS files are checked when a client is made, so that offline
// commands (tls ca create, version) need neither.
func (g globals) validate() error {
	if _, err := g.level(); err != nil {
		return err
	}
	switch g.output {
	case "table", "json", "yaml":
	default:
		return fmt.Errorf("-o %q: want table, json or yaml", g.output)
	}
	if g.timeout <= 0 {
		return fmt.Errorf("--timeout %s: must be positive", g.timeout)
	}
	return nil
}

// level is --log-level as a slog level.
func (g globals) level() (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(g.logLevel)); err != nil {
		return 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", g.logLevel)
	}
	return l, nil
}
