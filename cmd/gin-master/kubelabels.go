package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

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
	f.StringVar(&k.kubeconfig, "kubeconfig", "", "with --kube-labels: kubeconfig file of the API server and GIN's identity (default: $KUBECONFIG as kubectl reads it, a list of files merged; when unset, the pod's service account)")
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
	cfg, from, err := k.restConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("--kube-labels: %w", err)
	}
	l, err := kubelabels.New(cfg, kubelabels.Options{Topograph: k.topograph, TaintFail: k.taint, QPS: k.qps, Burst: k.burst,
		Logger: log.With("component", "kube-labels")})
	if err != nil {
		return nil, nil, fmt.Errorf("--kube-labels: %w", err)
	}
	log.Info("kube-labels: the leader keeps GIN's Node labels", "api_server", cfg.Host, "credentials", from, "prefix", nodelabels.Prefix)
	run := func(ctx context.Context, st *state.Store, verdicts master.Verdicts) {
		l.Run(ctx, st, checkHealth(verdicts))
	}
	return []master.LeaderTask{{Name: "kube-labels", Run: run}}, l.Collectors(), nil
}

// restConfig is the API server and identity --kube-labels uses, chosen as
// kubectl and client-go's tools choose (without kubectl's last resort,
// ~/.kube/config, which a service would pick up by accident):
//  1. --kubeconfig FILE;
//  2. else $KUBECONFIG, a list of files (filepath.ListSeparator, ':'),
//     merged as kubectl merges them (the first file to set a value wins;
//     missing files are skipped, but not all of them);
//  3. else the pod's service account (in-cluster configuration).
//
// from says which one, for the start-up log line.
func (k *kubeOptions) restConfig() (cfg *rest.Config, from string, err error) {
	if k.kubeconfig != "" {
		cfg, err := kubelabels.Config(k.kubeconfig)
		return cfg, "--kubeconfig " + k.kubeconfig, err
	}
	if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		cfg, err := kubeconfigEnv(env)
		if err != nil {
			return nil, "", fmt.Errorf("$%s=%s: %w", clientcmd.RecommendedConfigPathEnvVar, env, err)
		}
		return cfg, "$" + clientcmd.RecommendedConfigPathEnvVar + " " + env, nil
	}
	cfg, err = rest.InClusterConfig()
	if err != nil {
		return nil, "", fmt.Errorf("no --kubeconfig, no $%s, and no in-cluster configuration (outside a pod give --kubeconfig or set $%[1]s): %w",
			clientcmd.RecommendedConfigPathEnvVar, err)
	}
	return cfg, "in-cluster service account", nil
}

// kubeconfigEnv loads the kubeconfig files of a $KUBECONFIG value and merges
// them (clientcmd's precedence rules, as kubectl). Unlike kubectl it fails
// when none of the files exists, rather than fall back to another source.
func kubeconfigEnv(env string) (*rest.Config, error) {
	var paths, missing []string
	for _, p := range filepath.SplitList(env) {
		if p == "" {
			continue
		}
		paths = append(paths, p)
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			missing = append(missing, p)
		}
	}
	if len(paths) == 0 {
		return nil, errors.New("names no file")
	}
	if len(missing) == len(paths) {
		return nil, fmt.Errorf("no such file: %s", strings.Join(missing, ", "))
	}
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: paths}
	raw, err := rules.Load()
	if err != nil {
		return nil, err
	}
	return clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
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
