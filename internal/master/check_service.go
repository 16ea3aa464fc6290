package master

import (
	"context"
	"sync"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/health"
	"github.com/gin-topology/gin/internal/state"
)

// checkService answers node verdicts (internal/health) over the stored
// state. The node rules of a node are rerun only when its record (the
// store's immutable entry: any update or state change replaces it) or its
// leaf changes; the cluster rules, cheap over the kept assessments, once
// per applied index.
type checkService struct {
	ginv1.UnimplementedCheckServiceServer
	store *state.Store
	read  readFunc
	th    health.Thresholds

	mu       sync.Mutex
	assessed map[string]assessed // by node name
	index    uint64              // of verdicts
	verdicts map[string]*ginv1.NodeVerdict
}

type assessed struct {
	rec  *statev1.NodeRecord
	leaf string
	a    health.Assessment
}

func newCheckService(store *state.Store, read readFunc, th health.Thresholds) *checkService {
	return &checkService{store: store, read: read, th: th, assessed: map[string]assessed{}}
}

// current is verdictsAt this replica's current state.
func (c *checkService) current() map[string]*ginv1.NodeVerdict { return c.verdictsAt(c.store.View()) }

func (c *checkService) Check(ctx context.Context, req *ginv1.CheckRequest) (*ginv1.CheckResponse, error) {
	v, ri, err := c.read(ctx, req.GetConsistency())
	if err != nil {
		return nil, toStatus(err)
	}
	names, err := selectNodes(v, req.GetNodes())
	if err != nil {
		return nil, toStatus(err)
	}
	all := c.verdictsAt(v)
	resp := &ginv1.CheckResponse{Read: ri}
	for _, n := range names {
		if nv, ok := all[n]; ok {
			resp.Nodes = append(resp.Nodes, nv)
		}
	}
	return resp, nil
}

// verdictsAt returns every node's verdict in view v. The returned map and
// its messages are shared by concurrent callers: read only.
func (c *checkService) verdictsAt(v state.View) map[string]*ginv1.NodeVerdict {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.verdicts != nil && c.index == v.Index {
		return c.verdicts
	}
	th := c.th
	names := v.NodeNames()
	keep := make(map[string]assessed, len(names))
	as := make([]health.Assessment, 0, len(names))
	for _, name := range names {
		h, ok := v.Head(name)
		if !ok {
			continue
		}
		leaf := ""
		if info, ok := v.Graph.NodeInfo(name); ok {
			leaf = info.LeafSwitch
		}
		prev, ok := c.assessed[name]
		if !ok || prev.rec != h.Record || prev.leaf != leaf {
			rec, _ := v.Node(name)
			prev = assessed{rec: h.Record, leaf: leaf, a: health.Assess(health.Node{
				Name: name, State: h.State(), Inventory: rec.GetInventory(), Leaf: leaf,
			}, th)}
		}
		keep[name] = prev
		as = append(as, prev.a)
	}
	c.assessed = keep
	c.verdicts, c.index = health.Verdicts(as, th), v.Index
	return c.verdicts
}
