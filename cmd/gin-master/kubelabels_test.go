package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gin-topology/gin/internal/kubelabels"
	"github.com/gin-topology/gin/internal/testkit"
)

// writeKubeconfig writes a kubeconfig file whose one cluster is at server
// (and, with token, whose one user has that bearer token); server "" leaves
// the cluster out and token "" the user (for merged lists).
func writeKubeconfig(t *testing.T, name, server, token string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Config\ncurrent-context: gin\n")
	b.WriteString("contexts:\n- name: gin\n  context: {cluster: gin, user: gin}\n")
	if server != "" {
		fmt.Fprintf(&b, "clusters:\n- name: gin\n  cluster: {server: %q}\n", server)
	}
	if token != "" {
		fmt.Fprintf(&b, "users:\n- name: gin\n  user: {token: %q}\n", token)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestKubeconfigResolution: --kubeconfig, else $KUBECONFIG (its first file
// that exists), else the in-cluster configuration; an error names the file
// or the sources it tried. No API server is needed: the chosen file is the
// one whose server the configuration points at.
func TestKubeconfigResolution(t *testing.T) {
	flagFile := writeKubeconfig(t, "flag", "https://flag.example:6443", "flag-token")
	envFile := writeKubeconfig(t, "env", "https://env.example:6443", "env-token")
	userOnly := writeKubeconfig(t, "user", "", "user-token")
	missing := filepath.Join(t.TempDir(), "missing")
	list := func(p ...string) string { return strings.Join(p, string(filepath.ListSeparator)) }
	// In a pod (but without the service account's token file).
	inPod := map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}

	tests := []struct {
		name       string
		flag       string
		env        map[string]string
		wantHost   string
		wantToken  string
		wantFrom   string
		wantErr    []string // substrings of the error
		wantNotErr string
	}{
		{name: "--kubeconfig wins over $KUBECONFIG", flag: flagFile, env: map[string]string{"KUBECONFIG": envFile},
			wantHost: "https://flag.example:6443", wantToken: "flag-token", wantFrom: "--kubeconfig " + flagFile},
		{name: "$KUBECONFIG outside a pod", env: map[string]string{"KUBECONFIG": envFile},
			wantHost: "https://env.example:6443", wantToken: "env-token", wantFrom: "$KUBECONFIG " + envFile},
		{name: "$KUBECONFIG wins over the in-cluster configuration", env: merge(inPod, map[string]string{"KUBECONFIG": envFile}),
			wantHost: "https://env.example:6443", wantToken: "env-token", wantFrom: "$KUBECONFIG " + envFile},
		{name: "$KUBECONFIG list: the first file wins, as in kubectl's merge", env: map[string]string{"KUBECONFIG": list(envFile, flagFile)},
			wantHost: "https://env.example:6443", wantToken: "env-token", wantFrom: "$KUBECONFIG " + envFile},
		{name: "$KUBECONFIG list: a missing file is skipped", env: map[string]string{"KUBECONFIG": list(missing, "", envFile)},
			wantHost: "https://env.example:6443", wantToken: "env-token", wantFrom: "$KUBECONFIG " + envFile},
		{name: "--kubeconfig missing", flag: missing, env: map[string]string{"KUBECONFIG": envFile},
			wantErr: []string{"kubeconfig " + missing}, wantNotErr: "KUBECONFIG"},
		{name: "$KUBECONFIG missing: no fall back to the pod's service account", env: merge(inPod, map[string]string{"KUBECONFIG": missing}),
			wantErr: []string{"$KUBECONFIG=" + missing + ": no such file"}},
		{name: "$KUBECONFIG without a server", env: map[string]string{"KUBECONFIG": userOnly},
			wantErr: []string{"$KUBECONFIG: kubeconfig " + userOnly}, wantNotErr: "merges no others"},
		{name: "$KUBECONFIG list whose first file is not whole", env: map[string]string{"KUBECONFIG": list(userOnly, envFile)},
			wantErr: []string{"$KUBECONFIG=" + list(userOnly, envFile), "kubeconfig " + userOnly, "merges no others", "--kubeconfig"}},
		{name: "nothing outside a pod", env: map[string]string{},
			wantErr: []string{"no --kubeconfig, no $KUBECONFIG", "in-cluster", "KUBERNETES_SERVICE_HOST"}, wantNotErr: "KUBECONFIG="},
		{name: "an empty $KUBECONFIG is unset", env: map[string]string{"KUBECONFIG": ""},
			wantErr: []string{"no --kubeconfig, no $KUBECONFIG", "in-cluster"}},
		{name: "in a pod, the service account (its token file is missing here)", env: inPod,
			wantErr: []string{"no --kubeconfig, no $KUBECONFIG", "serviceaccount"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env["KUBERNETES_SERVICE_HOST"] != "" {
				if _, err := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount/token"); err == nil {
					t.Skip("this test runs in a pod: its service account would answer")
				}
			}
			for _, n := range []string{"KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"} {
				t.Setenv(n, tc.env[n])
			}
			k := kubeOptions{enabled: true, kubeconfig: tc.flag}
			// What tasks does, up to kubelabels.New.
			var host, token, from string
			src, err := k.source()
			if err == nil {
				from = src.from
				cfg, cerr := kubelabels.Config(src.file)
				if cerr != nil {
					err = src.wrap(cerr)
				} else {
					host, token = cfg.Host, cfg.BearerToken
				}
			}
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("no error; config for %s from %s", host, from)
				}
				t.Logf("error: %v", err)
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				if tc.wantNotErr != "" && strings.Contains(err.Error(), tc.wantNotErr) {
					t.Errorf("error %q says %q", err, tc.wantNotErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if host != tc.wantHost || token != tc.wantToken {
				t.Errorf("config for %s with token %q, want %s with %q", host, token, tc.wantHost, tc.wantToken)
			}
			if from != tc.wantFrom {
				t.Errorf("from %q, want %q", from, tc.wantFrom)
			}
		})
	}
}

// TestKubeconfigEnvFailsTheStart: the process with --kube-labels and a
// $KUBECONFIG that names no file exits 78 (not restarted by the unit),
// naming the variable and the file, as --kubeconfig does.
func TestKubeconfigEnvFailsTheStart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	missing := filepath.Join(t.TempDir(), "none")
	code, stderr := testkit.RunSelf(t, testkit.ModeMain, []string{"KUBECONFIG=" + missing},
		"--insecure", "--kube-labels", "--data-dir", dir)
	if want := "--kube-labels: $KUBECONFIG=" + missing + ": no such file"; code != 78 || !strings.Contains(stderr, want) {
		t.Fatalf("exit %d, stderr %q; want exit 78 and %q", code, stderr, want)
	}
}

func merge(a, b map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}
