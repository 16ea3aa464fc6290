package master

import (
	"errors"
	"fmt"

	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/hostlist"
	"github.com/gin-topology/gin/internal/state"
)

// MinRequestNames is the fewest host names a read's hostlist may expand to
// (counting duplicates): a read may name at most the cluster's nodes or
// this many, whichever is more, so a small cluster still answers "these
// nodes are unknown" for a modest list while an expression like
// a×240[000000-131071] is refused before one name is made (issue #21: 8 of
// those at once took a master from 31 MB to 763 MB).
const MinRequestNames = 4096

// readNamesLimit is how many names one read of view v may expand to.
func readNamesLimit(v state.View) int { return max(v.Len(), MinRequestNames) }

// expandNodes expands a client's hostlist naming at most limit hosts: a
// malformed one is INVALID_ARGUMENT, one naming more RESOURCE_EXHAUSTED
// (NAMES_LIMIT, counted in gin_master_rejected_messages_total) naming the
// limit and why.
func expandNodes(expr string, limit int, why string) ([]string, error) {
	names, err := hostlist.ExpandAtMost(expr, limit)
	switch {
	case errors.Is(err, hostlist.ErrTooMany):
		return nil, exhaustedf(apierr.ReasonNamesLimit, "nodes: %v: the most one request may name is %d (%s)", err, limit, why)
	case err != nil:
		return nil, invalidf("nodes", "%v", err)
	}
	return names, nil
}

// whyReadLimit says where readNamesLimit comes from.
func whyReadLimit(v state.View) string {
	return fmt.Sprintf("the cluster's %d nodes, at least %d", v.Len(), MinRequestNames)
}
