package master

import (
	"context"
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/hostlist"
	"github.com/gin-topology/gin/internal/state"
)

// topologyService is TopologyService: nodes, graph, paths, matrices and
// the change stream, read from this replica's state.
type topologyService struct {
	ginv1.UnimplementedTopologyServiceServer
	store *state.Store
	read  readFunc
}

func newTopologyService(store *state.Store, read readFunc) *topologyService {
	return &topologyService{store: store, read: read}
}

// maxGPURef bounds a GPU reference ("node/GPU3" or a UUID).
const maxGPURef = 512

// selectNodes expands a hostlist against the view, sorted; empty selects
// all nodes. Unknown nodes are NOT_FOUND, a bad hostlist INVALID_ARGUMENT.
func selectNodes(v state.View, expr string) ([]string, error) {
	if expr == "" {
		return v.NodeNames(), nil
	}
	names, err := selectNodesInOrder(v, expr)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

// selectNodesInOrder is selectNodes keeping the order written.
func selectNodesInOrder(v state.View, expr string) ([]string, error) {
	names, err := expandNodes(expr, readNamesLimit(v), whyReadLimit(v))
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, n := range names {
		if _, ok := v.Head(n); !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, &notFound{what: fmt.Sprintf("node(s) %s", hostlist.Compress(missing))}
	}
	return names, nil
}

// summary answers a node's summary from its head (no inventory decoded).
func summary(g *graph.Graph, h state.NodeHead) *ginv1.NodeSummary {
	rec := h.Record
	s := &ginv1.NodeSummary{
		Name:           h.Name,
		State:          rec.GetState(),
		StateReason:    rec.GetStateReason(),
		Generation:     h.Generation,
		SystemModel:    h.SystemModel,
		GpuCount:       uint32(h.GPUs),
		GpuModel:       h.GPU0Model,
		StateChangedAt: rec.GetStateChangedAt(),
		UpdatedIndex:   rec.GetUpdatedIndex(),
	}
	if info, ok := g.NodeInfo(h.Name); ok {
		s.NvlinkDomain = info.NVLinkDomain
		s.LeafSwitch = info.LeafSwitch
		s.NvlinksUp, s.NvlinksTotal = uint32(info.NVLinksUp), uint32(info.NVLinksTotal)
		s.ComputePortsUp, s.ComputePortsTotal = uint32(info.ComputePortsUp), uint32(info.ComputePortsTotal)
	}
	return s
}

func (t *topologyService) ListNodes(ctx context.Context, req *ginv1.ListNodesRequest) (*ginv1.ListNodesResponse, error) {
	v, ri, err := t.read(ctx, req.GetConsistency())
	if err != nil {
		return nil, toStatus(err)
	}
	names, err := selectNodes(v, req.GetNodes())
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &ginv1.ListNodesResponse{Read: ri}
	for _, n := range names {
		h, _ := v.Head(n)
		resp.Nodes = append(resp.Nodes, summary(v.Graph, h))
	}
	return resp, nil
}

func (t *topologyService) GetNode(ctx context.Context, req *ginv1.GetNodeRequest) (*ginv1.GetNodeResponse, error) {
	v, ri, err := t.read(ctx, req.GetConsistency())
	if err != nil {
		return nil, toStatus(err)
	}
	rec, ok := v.Node(req.GetName())
	if !ok {
		return nil, toStatus(&notFound{what: fmt.Sprintf("node %q", req.GetName())})
	}
	h, _ := v.Head(req.GetName())
	return &ginv1.GetNodeResponse{Summary: summary(v.Graph, h), Inventory: forReaders(rec.GetInventory()), Read: ri}, nil
}

func (t *topologyService) GetGraph(ctx context.Context, req *ginv1.GetGraphRequest) (*ginv1.GetGraphResponse, error) {
	v, ri, err := t.read(ctx, req.GetConsistency())
	if err != nil {
		return nil, toStatus(err)
	}
	names, err := selectNodes(v, req.GetNodes())
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &ginv1.GetGraphResponse{Fabric: v.Fabric(), Read: ri}
	for _, n := range names {
		rec, _ := v.Node(n)
		h, _ := v.Head(n)
		resp.Inventories = append(resp.Inventories, forReaders(rec.GetInventory()))
		resp.Nodes = append(resp.Nodes, summary(v.Graph, h))
	}
	return resp, nil
}

func (t *topologyService) GetPath(ctx context.Context, req *ginv1.GetPathRequest) (*ginv1.GetPathResponse, error) {
	if len(req.GetFromGpu()) > maxGPURef || len(req.GetToGpu()) > maxGPURef {
		return nil, toStatus(invalidf("from_gpu", "GPU reference longer than %d bytes", maxGPURef))
	}
	v, ri, err := t.read(ctx, req.GetConsistency())
	if err != nil {
		return nil, toStatus(err)
	}
	a, err := v.Graph.ResolveGPU(req.GetFromGpu())
	if err != nil {
		return nil, toStatus(&notFound{msg: err.Error()})
	}
	b, err := v.Graph.ResolveGPU(req.GetToGpu())
	if err != nil {
		return nil, toStatus(&notFound{msg: err.Error()})
	}
	p, err := v.Graph.Path(a, b)
	if err != nil {
		return nil, toStatus(err)
	}
	return &ginv1.GetPathResponse{Path: graph.PathToProto(p), Read: ri}, nil
}

func (t *topologyService) GetMatrix(ctx context.Context, req *ginv1.GetMatrixRequest) (*ginv1.GetMatrixResponse, error) {
	v, ri, err := t.read(ctx, req.GetConsistency())
	if err != nil {
		return nil, toStatus(err)
	}
	names, err := selectNodes(v, req.GetNodes())
	if err != nil {
		return nil, toStatus(err)
	}
	m, err := v.Graph.Matrix(names, req.GetIncludeNics())
	if err != nil {
		return nil, toStatus(invalidf("nodes", "%v", err))
	}
	devs, cells := graph.MatrixToProto(m)
	return &ginv1.GetMatrixResponse{Devices: devs, Cells: cells, Read: ri}, nil
}

func (t *topologyService) Watch(req *ginv1.WatchRequest, stream ginv1.TopologyService_WatchServer) error {
	replay, ch, cancel, err := t.store.WatchSince(req.GetSinceIndex())
	if err != nil {
		return toStatus(fmt.Errorf("%w; re-read the state and watch from its index", err))
	}
	defer cancel()
	ctx := stream.Context()
	for _, e := range replay {
		if err := stream.Send(t.watchResponse(e)); err != nil {
			return err
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-ch:
			if !ok {
				return toStatus(exhaustedf(apierr.ReasonWatchBehind, "watcher fell behind; re-read the state and watch again"))
			}
			if err := stream.Send(t.watchResponse(e)); err != nil {
				return err
			}
		}
	}
}

// watchResponse is an event as the Watch stream sends it.
func (t *topologyService) watchResponse(e state.Event) *ginv1.WatchResponse {
	resp := &ginv1.WatchResponse{
		Index: e.Index, Kind: e.Kind, OldState: e.OldState, NewState: e.NewState,
		OldGeneration: e.OldGeneration, NewGeneration: e.NewGeneration, JobId: e.Job, Reason: e.Reason,
	}
	if !e.At.IsZero() {
		resp.At = timestamppb.New(e.At)
	}
	if e.Node != "" {
		if h, ok := t.store.Head(e.Node); ok {
			resp.Node = summary(t.store.Graph(), h)
		} else {
			resp.Node = &ginv1.NodeSummary{Name: e.Node} // deleted since
		}
	}
	return resp
}

// forReaders is an inventory as readers get it: without host.machine_id,
// the identity check of agent sessions (a reader who learnt it could
// register as the node). The copy is shallow (the other fields are shared
// with the stored record, which is never modified).
func forReaders(inv *ginv1.NodeInventory) *ginv1.NodeInventory {
	if inv.GetHost().GetMachineId() == "" {
		return inv
	}
	out := &ginv1.NodeInventory{}
	dst := out.ProtoReflect()
	inv.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		dst.Set(fd, v)
		return true
	})
	host := proto.CloneOf(inv.GetHost())
	host.MachineId = ""
	out.Host = host
	return out
}
