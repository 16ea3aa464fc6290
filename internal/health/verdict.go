package health

import (
	"sort"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// MaxReasonLen bounds NodeVerdict.reason: Slurm keeps a node's reason in a
// fixed-size field and `sinfo -R` prints it on one line.
const MaxReasonLen = 200

// Node is what the rules read of one node.
type Node struct {
	Name      string
	State     ginv1.NodeState
	Inventory *ginv1.NodeInventory
	// Leaf is the leaf switch the graph places the node's compute ports
	// under ("" unknown); a port's own fabric neighbour, when the agent
	// learned one, takes precedence.
	Leaf string
}

// Label is the one-word form of a verdict ("pass", "warn", "fail",
// "unknown"), for Kubernetes labels and colours.
func Label(v ginv1.Verdict) string {
	switch v {
	case ginv1.Verdict_VERDICT_PASS:
		return "pass"
	case ginv1.Verdict_VERDICT_WARN:
		return "warn"
	case ginv1.Verdict_VERDICT_FAIL:
		return "fail"
	}
	return "unknown"
}

// Assessment is one node's result of the node rules plus the few facts
// the cluster rules compare (versions, compute port rates and leaves):
// small enough for the master to keep one per node and recompute only the
// nodes that changed.
type Assessment struct {
	Name  string
	Local []*ginv1.Finding
	facts facts
}

// Assess applies the node rules to n.
func Assess(n Node, th Thresholds) Assessment {
	th = th.withDefaults()
	return Assessment{Name: n.Name, Local: nodeFindings(n, th), facts: factsOf(n)}
}

// Verdicts combines assessments (the whole cluster: the cluster rules
// compare each node with all of them) into one verdict per node, by name.
func Verdicts(as []Assessment, th Thresholds) map[string]*ginv1.NodeVerdict {
	th = th.withDefaults()
	found := map[string][]*ginv1.Finding{}
	for _, a := range as {
		found[a.Name] = append(found[a.Name], a.Local...)
	}
	for name, fs := range clusterFindings(as, th) {
		found[name] = append(found[name], fs...)
	}
	out := make(map[string]*ginv1.NodeVerdict, len(as))
	for _, a := range as {
		out[a.Name] = verdictOf(a.Name, found[a.Name])
	}
	return out
}

// Evaluate is Assess for every node, then Verdicts.
func Evaluate(nodes []Node, th Thresholds) map[string]*ginv1.NodeVerdict {
	as := make([]Assessment, len(nodes))
	for i, n := range nodes {
		as[i] = Assess(n, th)
	}
	return Verdicts(as, th)
}

// verdictOf sorts findings worst first and sums them up.
func verdictOf(name string, fs []*ginv1.Finding) *ginv1.NodeVerdict {
	kept := fs[:0:0]
	for _, f := range fs {
		if f.GetSeverity() > ginv1.Verdict_VERDICT_PASS {
			kept = append(kept, f)
		}
	}
	sort.SliceStable(kept, func(i, j int) bool {
		if kept[i].Severity != kept[j].Severity {
			return kept[i].Severity > kept[j].Severity
		}
		if kept[i].Check != kept[j].Check {
			return kept[i].Check < kept[j].Check
		}
		return kept[i].Subject < kept[j].Subject
	})
	v := &ginv1.NodeVerdict{Node: name, Verdict: ginv1.Verdict_VERDICT_PASS, Findings: kept}
	if len(kept) > 0 {
		v.Verdict = kept[0].Severity
		v.Reason = Reason(kept)
	}
	return v
}

// Reason is the one-line summary of findings for a scheduler's reason
// field: the worst severity's findings as "check subject" joined by "; ",
// cut to MaxReasonLen bytes with "..." when longer. Findings must be sorted
// worst first (as NodeVerdict.findings are).
func Reason(fs []*ginv1.Finding) string {
	if len(fs) == 0 {
		return ""
	}
	worst := fs[0].GetSeverity()
	var b strings.Builder
	for _, f := range fs {
		if f.GetSeverity() != worst {
			break
		}
		part := f.GetCheck()
		if f.GetSubject() != "" {
			part += " " + f.GetSubject()
		}
		if b.Len() > 0 {
			part = "; " + part
		}
		if b.Len()+len(part) > MaxReasonLen {
			if b.Len()+4 <= MaxReasonLen {
				b.WriteString(" ...")
			}
			break
		}
		b.WriteString(part)
	}
	return sanitize(b.String())
}

// sanitize keeps a reason to printable ASCII without quotes, so that it can
// be passed to scontrol and put in a Kubernetes annotation as it is.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\'' || c == '\\' || c == '`' {
			b[i] = '_'
		}
	}
	return string(b)
}
