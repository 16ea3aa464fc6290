package draw

import (
	"fmt"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// Level is a health verdict's level, worst last.
type Level uint8

// Levels.
const (
	LevelUnknown Level = iota
	LevelPass
	LevelWarn
	LevelFail
)

// String is the word the pictures print and use as a class.
func (l Level) String() string {
	switch l {
	case LevelPass:
		return "pass"
	case LevelWarn:
		return "warn"
	case LevelFail:
		return "fail"
	}
	return "unknown"
}

// Finding is one thing a health verdict found on a node.
type Finding struct {
	Level Level
	// Subject names what it is about, as data-link names it where it is a
	// link ("GPU3/nvlink7", "mlx5_0/1"); "" for the node as a whole.
	Subject string
	Text    string
	// Fix is what to do about it, when the health check says.
	Fix string
}

// Verdict is a node's health verdict.
type Verdict struct {
	Level    Level
	Findings []Finding
}

// Verdicts says each node's health verdict: the health check's (the web
// view adapts CheckService's), or FromSummaries where there are none.
type Verdicts interface {
	Verdict(node string) (Verdict, bool)
}

// SummaryVerdicts derives verdicts from what the inventory already says:
// a DOWN node fails, a draining one warns, NVLinks or compute ports not up
// warn. It is the fallback where the health check's verdicts are not there.
type SummaryVerdicts map[string]Verdict

// FromSummaries derives the inventory verdicts of the listed nodes.
func FromSummaries(nodes []*ginv1.NodeSummary) SummaryVerdicts {
	out := make(SummaryVerdicts, len(nodes))
	for _, n := range nodes {
		out[n.GetName()] = SummaryVerdict(n)
	}
	return out
}

// Verdict implements Verdicts.
func (s SummaryVerdicts) Verdict(node string) (Verdict, bool) {
	v, ok := s[node]
	return v, ok
}

// SummaryVerdict is one node's inventory verdict.
func SummaryVerdict(n *ginv1.NodeSummary) Verdict {
	v := Verdict{Level: LevelPass}
	add := func(l Level, subject, text string) {
		v.Findings = append(v.Findings, Finding{Level: l, Subject: subject, Text: text})
		v.Level = max(v.Level, l)
	}
	switch n.GetState() {
	case ginv1.NodeState_NODE_STATE_DOWN:
		add(LevelFail, "", "node down: "+orWord(n.GetStateReason(), "no reason recorded"))
	case ginv1.NodeState_NODE_STATE_DRAINING:
		add(LevelWarn, "", "draining: "+orWord(n.GetStateReason(), "no reason recorded"))
	}
	if up, all := n.GetNvlinksUp(), n.GetNvlinksTotal(); up < all {
		add(LevelWarn, "", fmt.Sprintf("%d of %d NVLinks not up", all-up, all))
	}
	if up, all := n.GetComputePortsUp(), n.GetComputePortsTotal(); up < all {
		add(LevelWarn, "", fmt.Sprintf("%d of %d compute ports not active", all-up, all))
	}
	return v
}

// InventoryFindings lists what a node's inventory says is wrong, link by
// link: NVLinks down or unhealthy, HCA ports not active or unhealthy.
func InventoryFindings(inv *ginv1.NodeInventory) []Finding {
	var out []Finding
	for _, g := range inv.GetGpus() {
		for _, l := range g.GetNvlinks() {
			subj := fmt.Sprintf("GPU%d/nvlink%d", g.GetIndex(), l.GetIndex())
			switch {
			case l.GetState() == ginv1.LinkState_LINK_STATE_DOWN:
				out = append(out, Finding{Level: LevelWarn, Subject: subj, Text: "NVLink down"})
			case l.GetHealth() == ginv1.LinkHealth_LINK_HEALTH_FAILED:
				out = append(out, Finding{Level: LevelFail, Subject: subj, Text: "NVLink failed (error counters)"})
			case l.GetHealth() == ginv1.LinkHealth_LINK_HEALTH_DEGRADED:
				out = append(out, Finding{Level: LevelWarn, Subject: subj, Text: "NVLink degraded (error counters)"})
			}
		}
	}
	for _, h := range inv.GetHcas() {
		for _, p := range h.GetPorts() {
			subj := fmt.Sprintf("%s/%d", h.GetName(), p.GetPort())
			switch {
			case !portActive(p):
				out = append(out, Finding{Level: LevelWarn, Subject: subj, Text: fmt.Sprintf("%s port %s", roleWord(h.GetRole()), portStateWord(p.GetState()))})
			case p.GetHealth() == ginv1.LinkHealth_LINK_HEALTH_FAILED:
				out = append(out, Finding{Level: LevelFail, Subject: subj, Text: "port failed (error counters)"})
			case p.GetHealth() == ginv1.LinkHealth_LINK_HEALTH_DEGRADED:
				out = append(out, Finding{Level: LevelWarn, Subject: subj, Text: "port degraded (error counters)"})
			}
		}
	}
	return out
}

func portActive(p *ginv1.HcaPort) bool {
	return p.GetState() == ginv1.PortState_PORT_STATE_ACTIVE || p.GetState() == ginv1.PortState_PORT_STATE_ACTIVE_DEFER
}

func roleWord(r ginv1.HcaRole) string {
	switch r {
	case ginv1.HcaRole_HCA_ROLE_COMPUTE:
		return "compute"
	case ginv1.HcaRole_HCA_ROLE_STORAGE:
		return "storage"
	}
	return "unknown-role"
}

func portStateWord(s ginv1.PortState) string {
	switch s {
	case ginv1.PortState_PORT_STATE_DOWN:
		return "down"
	case ginv1.PortState_PORT_STATE_INIT:
		return "init"
	case ginv1.PortState_PORT_STATE_ARMED:
		return "armed"
	case ginv1.PortState_PORT_STATE_ACTIVE:
		return "active"
	case ginv1.PortState_PORT_STATE_ACTIVE_DEFER:
		return "active-defer"
	}
	return "unknown"
}

func orWord(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
