package calib

import (
	"fmt"
	"sort"
	"strings"
)

// RankPlace is where one rank of an imported log ran: where the log says
// so ("line 6", "gb-a-pid7.log object 3"), the rank, its host and its
// GPU's model ("" when the log does not name it).
type RankPlace struct {
	Where    string
	Rank     int
	Host     string
	GPUModel string
}

// maxDifferences bounds the differences CheckPlacement lists.
const maxDifferences = 8

// shortName is a host name without its domain.
func shortName(h string) string {
	if i := strings.IndexByte(h, '.'); i > 0 {
		return h[:i]
	}
	return h
}

// CheckPlacement compares where a log's ranks ran with the nodes it is
// imported onto and what the cluster's inventories say of them (gpus: each
// node's GPU models, one per GPU; a node missing from it is not known to
// the cluster). It returns the differences, each naming where the log says it,
// nil when they agree:
//   - hosts: the log's hosts must be the nodes (a host matches a node of
//     the same name, or of the same name without its domain); where they
//     are not, the i-th host of the log is compared with the i-th node for
//     what follows;
//   - GPU model: a rank's GPU must be of its node's model (case aside);
//   - GPU count: a host's ranks must be gpusPerNode (when known) and no
//     more than its node's GPUs.
//
// A log that names no ranks is not checked (nothing to compare).
func CheckPlacement(ranks []RankPlace, nodes []string, gpusPerNode int, gpus map[string][]string) []string {
	if len(ranks) == 0 {
		return nil
	}
	var diffs []string
	add := func(format string, args ...any) {
		diffs = append(diffs, fmt.Sprintf(format, args...))
	}
	byName := map[string]string{}
	for _, n := range nodes {
		byName[n], byName[shortName(n)] = n, n
	}
	// The log's hosts in order of first appearance, and their ranks.
	var hosts []string
	first := map[string]RankPlace{}
	count := map[string]int{}
	for _, r := range ranks {
		if _, seen := first[r.Host]; !seen {
			hosts = append(hosts, r.Host)
			first[r.Host] = r
		}
		count[r.Host]++
	}
	nodeOf := map[string]string{}
	for i, h := range hosts {
		n, ok := byName[h]
		if !ok {
			n, ok = byName[shortName(h)]
		}
		if ok {
			nodeOf[h] = n
			continue
		}
		r := first[h]
		if i < len(nodes) {
			add("%s: rank %d ran on host %s, not on %s (--nodes names %s)", r.Where, r.Rank, h, nodes[i], strings.Join(nodes, ","))
			nodeOf[h] = nodes[i]
		} else {
			add("%s: rank %d ran on host %s, one more host than the %d node(s) --nodes names", r.Where, r.Rank, h, len(nodes))
		}
	}
	if len(hosts) < len(nodes) {
		add("%s: the log's ranks ran on %d host(s), --nodes names %d", ranks[0].Where, len(hosts), len(nodes))
	}
	reported := map[string]bool{}
	for _, r := range ranks {
		n, ok := nodeOf[r.Host]
		if !ok || reported[r.Host] {
			continue
		}
		models, known := gpus[n]
		switch {
		case !known:
			add("%s: node %s is not known to the cluster", r.Where, n)
			reported[r.Host] = true
		case r.GPUModel != "" && len(models) > 0 && !strings.EqualFold(strings.TrimSpace(r.GPUModel), strings.TrimSpace(models[0])):
			add("%s: rank %d ran on an %s; %s has %s GPUs", r.Where, r.Rank, r.GPUModel, n, models[0])
			reported[r.Host] = true
		}
	}
	sort.Strings(hosts) // a stable order for the count differences
	for _, h := range hosts {
		n, ok := nodeOf[h]
		if !ok {
			continue
		}
		r, c := first[h], count[h]
		if models, known := gpus[n]; known && c > len(models) {
			add("%s: %d rank(s) ran on %s; %s has %d GPU(s)", r.Where, c, h, n, len(models))
		} else if gpusPerNode > 0 && c != gpusPerNode {
			add("%s: %d rank(s) ran on %s, not the %d GPUs per node the import says", r.Where, c, h, gpusPerNode)
		}
	}
	if len(diffs) > maxDifferences {
		diffs = append(diffs[:maxDifferences], fmt.Sprintf("and %d more", len(diffs)-maxDifferences))
	}
	return diffs
}
