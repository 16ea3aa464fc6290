package nodelabels

import (
	"fmt"
	"regexp"
	"strings"
)

// HostnameKey is the label every Kubernetes Node carries with its name:
// the innermost level of a Kueue Topology.
const HostnameKey = "kubernetes.io/hostname"

// KueueAPIVersion is the Kueue API the Topology is written for (Kueue
// 0.14 and later serve it; its CRD's storage version).
const KueueAPIVersion = "kueue.x-k8s.io/v1beta2"

// maxKueueLevels is the most levels Kueue's Topology CRD accepts.
const maxKueueLevels = 16

var dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// KueueLevels is the Topology's levels for a fabric of the given depth
// above the nodes (1: leaves only, 2: leaves under spines, 3: and a core),
// outermost first, then the NVLink block when blocks nest inside leaves,
// then the host.
func KueueLevels(depth int, blocks bool) []string {
	var keys []string
	if depth >= 3 {
		keys = append(keys, KeyCore)
	}
	if depth >= 2 {
		keys = append(keys, KeySpine)
	}
	if depth >= 1 {
		keys = append(keys, KeyLeaf)
	}
	if blocks {
		keys = append(keys, KeyBlock)
	}
	return append(keys, HostnameKey)
}

// KueueTopology writes a Kueue Topology named name with the node label
// keys as its levels, outermost first (KueueLevels).
func KueueTopology(name string, levels []string, comment string) ([]byte, error) {
	if len(name) > 253 || !dnsSubdomain.MatchString(name) {
		return nil, fmt.Errorf("topology name %q: want a DNS subdomain (lowercase letters, digits, '-', '.'; at most 253)", name)
	}
	if len(levels) == 0 || len(levels) > maxKueueLevels {
		return nil, fmt.Errorf("%d topology levels: want 1..%d", len(levels), maxKueueLevels)
	}
	for i, l := range levels {
		if l == HostnameKey && i != len(levels)-1 {
			return nil, fmt.Errorf("level %s must be the last", HostnameKey)
		}
	}
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(comment), "\n") {
		if line != "" {
			fmt.Fprintf(&b, "# %s\n", line)
		}
	}
	fmt.Fprintf(&b, "apiVersion: %s\nkind: Topology\nmetadata:\n  name: %s\nspec:\n  levels:\n", KueueAPIVersion, name)
	for _, l := range levels {
		fmt.Fprintf(&b, "  - nodeLabel: %s\n", l)
	}
	return []byte(b.String()), nil
}
