package promsd

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// Job names used in the target labels (and by deploy/prometheus/gin-rules.yml).
const (
	AgentJob  = "gin-agent"
	MasterJob = "gin-master"
)

// Default ports: gin-agent --metrics-bind and gin-master --http-bind.
const (
	DefaultAgentPort  = 9410
	DefaultMasterPort = 5002
)

// Group is one file_sd entry.
type Group struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// Master is one master as the cluster lists it.
type Master struct {
	ID string
	// ClientAddress is its gRPC host:port; the host is reused with the
	// metrics port.
	ClientAddress string
	// HTTPAddress is the host:port of its /metrics as it registered it;
	// when set it is the target ("" for a master that did not say: the
	// client address's host and the default port).
	HTTPAddress string
}

// Build returns the groups for nodes (their agents at node:agentPort, the
// node name being the agent's host name) and masters (at the host of their
// client address and masterPort), sorted by job and target.
func Build(nodes []string, masters []Master, agentPort, masterPort int) ([]Group, error) {
	for _, p := range []struct {
		name string
		v    int
	}{{"agent port", agentPort}, {"master port", masterPort}} {
		if p.v < 1 || p.v > 65535 {
			return nil, fmt.Errorf("promsd: %s %d: want 1..65535", p.name, p.v)
		}
	}
	out := make([]Group, 0, len(nodes)+len(masters))
	for _, m := range masters {
		if h, p, err := net.SplitHostPort(m.HTTPAddress); err == nil && h != "" && p != "" {
			out = append(out, Group{
				Targets: []string{m.HTTPAddress},
				Labels:  map[string]string{"job": MasterJob, "gin_server": m.ID},
			})
			continue
		}
		host, _, err := net.SplitHostPort(m.ClientAddress)
		if err != nil || host == "" {
			return nil, fmt.Errorf("promsd: master %s: client address %q has no host", m.ID, m.ClientAddress)
		}
		out = append(out, Group{
			Targets: []string{net.JoinHostPort(host, strconv.Itoa(masterPort))},
			Labels:  map[string]string{"job": MasterJob, "gin_server": m.ID},
		})
	}
	for _, n := range nodes {
		if n == "" {
			return nil, fmt.Errorf("promsd: empty node name")
		}
		out = append(out, Group{
			Targets: []string{net.JoinHostPort(n, strconv.Itoa(agentPort))},
			Labels:  map[string]string{"job": AgentJob, "gin_node": n},
		})
	}
	slices.SortFunc(out, func(a, b Group) int {
		if a.Labels["job"] != b.Labels["job"] {
			if a.Labels["job"] < b.Labels["job"] {
				return -1
			}
			return 1
		}
		switch {
		case a.Targets[0] < b.Targets[0]:
			return -1
		case a.Targets[0] > b.Targets[0]:
			return 1
		}
		return 0
	})
	return out, nil
}

// Marshal is the file's content: a JSON array, one group per line.
func Marshal(groups []Group) ([]byte, error) {
	if groups == nil {
		groups = []Group{}
	}
	b, err := json.MarshalIndent(groups, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("promsd: %w", err)
	}
	return append(b, '\n'), nil
}

// WriteFile writes content to path through a temporary file in the same
// directory and a rename, so Prometheus never reads half a file.
func WriteFile(path string, content []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".promsd-*")
	if err != nil {
		return fmt.Errorf("promsd: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(content); err != nil {
		f.Close()
		return fmt.Errorf("promsd: write %s: %w", f.Name(), err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("promsd: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("promsd: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("promsd: %w", err)
	}
	return nil
}
