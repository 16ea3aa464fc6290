package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/gin-topology/gin/internal/health"
	"github.com/gin-topology/gin/internal/kubelabels"
	"github.com/gin-topology/gin/internal/master"
	"github.com/gin-topology/gin/internal/nodelabels"
	"github.com/gin-topology/gin/internal/state"
)

// kubeOptions are the --kube-* flags.
type kubeOptions struct {
	enabled    bool
	kubeconfig string
	topograph  bool
	taint      bool
	qps        float32
	burst      int
}

func (k *kubeOptions) flags(f *pflag.FlagSet) {
	f.BoolVar(&k.enabled, "kube-labels", false, "while this master leads, keep GIN's labels ("+nodelabels.Prefix+"leaf, spine, block, nvlink-domain, health) on every Kubernetes Node named like a GIN node (docs/kubernetes.md); credentials from --kubeconfig, else $KUBECONFIG, else the pod's service account")
	f.StringVar(&k.kubeconfig, "kubeconfig", "", "with --kube-labels: kubeconfig file of the API server and GIN's identity (default: $KUBECONFIG, its first file that exists, as kubectl; when unset, the pod's service account)")
	f.BoolVar(&k.topograph, "kube-topograph-labels", false, "with --kube-labels: also write topograph's keys ("+nodelabels.TopographTier0+", tier-1, tier-2, "+nodelabels.TopographDomain+")")
	f.BoolVar(&k.taint, "kube-taint-fail", false, "with --kube-labels: taint Nodes whose health verdict is fail ("+nodelabels.TaintKey+"="+nodelabels.TaintValue+":"+nodelabels.TaintEffect+") and untaint them when they pass")
	f.Float32Var(&k.qps, "kube-qps", kubelabels.DefaultQPS, "with --kube-labels: requests per second to the API server at most")
	f.IntVar(&k.burst, "kube-burst", kubelabels.DefaultBurst, "with --kube-labels: requests sent at once before --kube-qps applies")
}

// check refuses --kube-* flags without --kube-labels and bad values.
func (k *kubeOptions) check(f *pflag.FlagSet) error {
	if !k.enabled {
		for _, n := range []string{"kubeconfig", "kube-topograph-labels", "kube-taint-fail", "kube-qps", "kube-burst"} {
			if f.Changed(n) {
				return fmt.Errorf("--%s needs --kube-labels", n)
			}
		}
		return nil
	}
	if !(k.qps >= 0.1 && k.qps <= 10000) {
		return fmt.Errorf("--kube-qps %g: want 0.1..10000", k.qps)
	}
	if k.burst < 1 || k.burst > 10000 {
		return fmt.Errorf("--kube-burst %d: want 1..10000", k.burst)
	}
	return nil
}

// tasks returns the leader-only loop and its metrics for the master, none
// without --kube-labels. The client configuration is read here, at start,
// so that a missing kubeconfig or service account fails the start.
func (k *kubeOptions) tasks(log *slog.Logger) ([]master.LeaderTask, []prometheus.Collector, error) {
	if !k.enabled {
		return nil, nil, nil
	}
	src, err := k.source()
	if err != nil {
		return nil, nil, fmt.Errorf("--kube-labels: %w", err)
	}
	cfg, err := kubelabels.Config(src.file)
	if err != nil {
		return nil, nil, fmt.Errorf("--kube-labels: %w", src.wrap(err))
	}
	l, err := kubelabels.New(cfg, kubelabels.Options{Topograph: k.topograph, TaintFail: k.taint, QPS: k.qps, Burst: k.burst,
		Logger: log.With("component", "kube-labels")})
	if err != nil {
		return nil, nil, fmt.Errorf("--kube-labels: %w", err)
	}
	log.Info("kube-labels: the leader keeps GIN's Node labels", "api_server", cfg.Host, "credentials", src.from, "prefix", nodelabels.Prefix)
	run := func(ctx context.Context, st *state.Store, verdicts master.Verdicts) {
		l.Run(ctx, st, checkHealth(verdicts))
	}
	return []master.LeaderTask{{Name: "kube-labels", Run: run}}, l.Collectors(), nil
}

// kubeconfigEnv is the variable kubectl and client-go's tools read.
const kubeconfigEnv = "KUBECONFIG"

// kubeSource is where --kube-labels takes the API server and its identity
// from: a kubeconfig file, or the pod's service account (file "").
type kubeSource struct {
	file string
	from string // for the start-up log line: "--kubeconfig F", "$KUBECONFIG F", "in-cluster service account"
	env  string // $KUBECONFIG, when file comes from it
	list bool   // file is the first existing one of a longer $KUBECONFIG list
}

// source chooses as kubectl and client-go's tools choose (without
// kubectl's last resort, ~/.kube/config, which a service would pick up by
// accident):
//  1. --kubeconfig FILE;
//  2. else $KUBECONFIG: its first file that exists (a list, separated by
//     filepath.ListSeparator, ':'). kubectl merges the list, the first file
//     to set a value winning, so wherever that file holds a whole context
//     the result is the same; where it does not, the error says so. Unlike
//     kubectl, a $KUBECONFIG none of whose files exists is an error, not a
//     fall back to the pod's service account;
//  3. else the pod's service account (in-cluster configuration).
//
// The file is parsed by internal/kubelabels (the one package that imports
// client-go: internal/archtest).
func (k *kubeOptions) source() (kubeSource, error) {
	if k.kubeconfig != "" {
		return kubeSource{file: k.kubeconfig, from: "--kubeconfig " + k.kubeconfig}, nil
	}
	env := os.Getenv(kubeconfigEnv)
	if env == "" {
		return kubeSource{from: "in-cluster service account"}, nil
	}
	var paths, existing []string
	for _, p := range filepath.SplitList(env) {
		if p == "" {
			continue
		}
		paths = append(paths, p)
		if _, err := os.Stat(p); err == nil {
			existing = append(existing, p)
		}
	}
	if len(existing) == 0 {
		return kubeSource{}, fmt.Errorf("$%s=%s: no such file", kubeconfigEnv, env)
	}
	return kubeSource{file: existing[0], from: "$" + kubeconfigEnv + " " + existing[0], env: env, list: len(paths) > 1}, nil
}

// wrap says which source a client configuration error comes from.
func (s kubeSource) wrap(err error) error {
	switch {
	case s.file == "":
		return fmt.Errorf("no --kubeconfig, no $%s: %w", kubeconfigEnv, err)
	case s.list:
		return fmt.Errorf("$%s=%s: %w (gin-master reads the first file that exists and merges no others: give --kubeconfig a whole one, e.g. from kubectl config view --flatten)",
			kubeconfigEnv, s.env, err)
	case s.env != "":
		return fmt.Errorf("$%s: %w", kubeconfigEnv, err)
	}
	return err
}

// checkHealth is the master's node verdicts (internal/health, what ginctl
// check prints) as the labeller's Health.
type checkHealth master.Verdicts

func (c checkHealth) Verdicts(v state.View) map[string]nodelabels.Verdict {
	all := c(v)
	out := make(map[string]nodelabels.Verdict, len(all))
	for n, nv := range all {
		out[n] = nodelabels.Verdict(health.Label(nv.GetVerdict()))
	}
	return out
}
