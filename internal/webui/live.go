package webui

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// Bounds of the job page's live section: suspects tabled (the rest are
// counted), evidence lines shown per suspect, suspects named in one node's
// label on the fabric.
const (
	MaxSuspectRows   = 50
	maxEvidenceLines = 20
	maxMarkSuspects  = 3
)

// liveSection is the job page's "While it runs": what the leader's live
// detector holds of the job (docs/LIVE.md).
type liveSection struct {
	// Err is "live state unavailable: ..." when the backend could not
	// say; nothing else is set then.
	Err string
	// Line is "N ranks reporting (M missing), last report HH:MM:SSZ".
	Line     string
	Suspects []suspectRow
	// More counts the suspects past MaxSuspectRows.
	More int
}

// suspectRow is one suspect as the table shows it.
type suspectRow struct {
	Kind, Node, Component, Switch, Slowdown, Since string
	Confirmed                                      bool
	// Evidence is the first evidence line; Rest the others (at most
	// maxEvidenceLines in all), RestMore how many more there are.
	Evidence string
	Rest     []string
	RestMore int
}

// clock is a timestamp as the page prints it ("14:03:07Z", UTC).
func clock(t *timestamppb.Timestamp) string {
	if t == nil {
		return "—"
	}
	return t.AsTime().UTC().Format("15:04:05Z")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// liveUnavailable is the live section of a backend error.
func liveUnavailable(err error) *liveSection {
	return &liveSection{Err: "live state unavailable: " + status.Convert(err).Message()}
}

// liveOf is the live section of a GetJobLive answer, the fabric's marks
// (node → "slow-link mlx5_3", its suspects' kinds and components) and the
// nodes its ranks run on (sorted).
func liveOf(resp *ginv1.GetJobLiveResponse) (*liveSection, map[string]string, []string) {
	sec := &liveSection{Line: fmt.Sprintf("%s reporting (%d missing), last report %s",
		plural(len(resp.GetRanks()), "rank", "ranks"), resp.GetMissingRanks(), clock(resp.GetLastReport()))}
	var nodes []string
	for _, r := range resp.GetRanks() {
		if r.GetNode() != "" {
			nodes = append(nodes, r.GetNode())
		}
	}
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)

	// Confirmed suspects first (what to act on), then in the detector's
	// order (kind, communicator, rank).
	sus := slices.Clone(resp.GetSuspects())
	slices.SortStableFunc(sus, func(a, b *ginv1.Suspect) int {
		switch {
		case a.GetConfirmed() == b.GetConfirmed():
			return 0
		case a.GetConfirmed():
			return -1
		}
		return 1
	})
	byNode := map[string][]string{}
	for _, s := range sus {
		if s.GetNode() == "" {
			continue
		}
		w := strings.TrimSpace(s.GetKind() + " " + s.GetComponent())
		if !slices.Contains(byNode[s.GetNode()], w) {
			byNode[s.GetNode()] = append(byNode[s.GetNode()], w)
		}
	}
	marked := make(map[string]string, len(byNode))
	for n, ws := range byNode {
		label := strings.Join(ws[:min(len(ws), maxMarkSuspects)], ", ")
		if len(ws) > maxMarkSuspects {
			label += fmt.Sprintf(" and %d more", len(ws)-maxMarkSuspects)
		}
		marked[n] = label
	}

	if len(sus) > MaxSuspectRows {
		sec.More = len(sus) - MaxSuspectRows
		sus = sus[:MaxSuspectRows]
	}
	for _, s := range sus {
		row := suspectRow{Kind: s.GetKind(), Node: s.GetNode(), Component: orDash(s.GetComponent()), Switch: s.GetSwitchPort(),
			Slowdown: fmt.Sprintf("%.2f×", s.GetSlowdown()), Since: clock(s.GetSince()), Confirmed: s.GetConfirmed()}
		if s.GetComponent() != "" && s.GetNic() != "" && s.GetNic() != s.GetComponent() {
			row.Component += " (NIC " + s.GetNic() + ")"
		}
		ev := s.GetEvidence()
		if len(ev) > 0 {
			row.Evidence = ev[0]
			rest := ev[1:]
			if len(rest) > maxEvidenceLines-1 {
				row.RestMore = len(rest) - (maxEvidenceLines - 1)
				rest = rest[:maxEvidenceLines-1]
			}
			row.Rest = rest
		}
		sec.Suspects = append(sec.Suspects, row)
	}
	return sec, marked, nodes
}
