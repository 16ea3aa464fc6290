package master

import (
	"context"
	"fmt"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/calib"
	"github.com/gin-topology/gin/internal/costmodel"
	"github.com/gin-topology/gin/internal/estimate"
	"github.com/gin-topology/gin/internal/export"
	"github.com/gin-topology/gin/internal/state"
)

// maxEstimateGPUs bounds EstimateRequest.gpus.
const maxEstimateGPUs = 1 << 20

func (p *planService) Estimate(ctx context.Context, req *ginv1.EstimateRequest) (*ginv1.EstimateResponse, error) {
	v, ri, err := p.read(ctx, ginv1.ReadConsistency_READ_CONSISTENCY_ANY)
	if err != nil {
		return nil, toStatus(err)
	}
	switch {
	case req.GetNodes() != "" && req.GetGpus() != 0:
		return nil, toStatus(invalidf("gpus", "give nodes or gpus, not both"))
	case req.GetNodes() != "":
		if req.GetCollective() == ginv1.Collective_COLLECTIVE_UNSPECIFIED {
			return nil, toStatus(invalidf("collective", "is required with nodes"))
		}
		if req.GetSizeBytes() == 0 {
			return nil, toStatus(invalidf("size_bytes", "is required with nodes"))
		}
		names, err := selectNodes(v, req.GetNodes())
		if err != nil {
			return nil, toStatus(err)
		}
		pred, err := estimate.ForPlacement(v.Graph, names, int(req.GetGpusPerNode()), req.GetCollective(), req.GetSizeBytes())
		if err != nil {
			return nil, toStatus(invalidf("nodes", "%v", err))
		}
		gpn := int(req.GetGpusPerNode())
		if gpn == 0 && len(names) > 0 {
			gpn = int(pred.GetNRanks()) / len(names)
		}
		calib.Apply(pred, calib.NewIndex(v.Graph, gpuModel(v), p.store.Measurements()).Measured(names, gpn, req.GetCollective(), req.GetSizeBytes()))
		if pred.GetBasis() == calib.BasisModelled {
			if sh, err := costmodel.ShapeOf(v.Graph, names, gpn); err == nil {
				pred.Evidence = calib.ModelInputs(sh)
			}
		}
		return &ginv1.EstimateResponse{Prediction: pred, Read: ri}, nil
	case req.GetGpus() > 0:
		if req.GetGpus() > maxEstimateGPUs {
			return nil, toStatus(invalidf("gpus", "%d is more than %d", req.GetGpus(), maxEstimateGPUs))
		}
		w := req.GetWorkload()
		if w == nil {
			w = &ginv1.Workload{Preset: ginv1.WorkloadPreset_WORKLOAD_PRESET_DATA_PARALLEL_TRAINING}
		}
		// The link layer comes from the node heads: no inventory is
		// decoded (the store keeps them compressed).
		ethernet := func(node string) bool {
			h, _ := v.Head(node)
			return h.ComputeEthernet
		}
		pes, err := estimate.ForGPUCountWith(v.Graph, int(req.GetGpus()), busyNodes(v, p.store), w,
			estimate.Options{Ethernet: ethernet})
		if err != nil {
			return nil, toStatus(invalidf("gpus", "%v", err))
		}
		for _, pe := range pes {
			if pe.GetPrediction() != nil {
				pe.Prediction.Basis = calib.BasisModelled
			}
		}
		return &ginv1.EstimateResponse{Placements: pes, Read: ri}, nil
	default:
		return nil, toStatus(invalidf("gpus", "give nodes or a GPU count"))
	}
}

// busyNodes are the nodes a new placement cannot use: not up, or in a
// pinned plan.
func busyNodes(v state.View, st *state.Store) map[string]bool {
	busy := map[string]bool{}
	for _, n := range v.NodeNames() {
		if h, _ := v.Head(n); h.State() != ginv1.NodeState_NODE_STATE_UP {
			busy[n] = true
		}
	}
	for _, pl := range st.Plans() {
		for _, n := range pl.GetNodes() {
			busy[n] = true
		}
	}
	return busy
}

func (p *planService) OrderNodes(ctx context.Context, req *ginv1.OrderNodesRequest) (*ginv1.OrderNodesResponse, error) {
	v, ri, err := p.read(ctx, ginv1.ReadConsistency_READ_CONSISTENCY_ANY)
	if err != nil {
		return nil, toStatus(err)
	}
	if req.GetNodes() == "" {
		return nil, toStatus(invalidf("nodes", "is empty"))
	}
	names, err := selectNodesInOrder(v, req.GetNodes())
	if err != nil {
		return nil, toStatus(err)
	}
	ordered, crossings, given, err := estimate.Order(v.Graph, names)
	if err != nil {
		return nil, toStatus(invalidf("nodes", "%v", err))
	}
	return &ginv1.OrderNodesResponse{Nodes: ordered, SpineCrossings: uint32(crossings), GivenSpineCrossings: uint32(given), Read: ri}, nil
}

func (p *planService) Export(ctx context.Context, req *ginv1.ExportRequest) (*ginv1.ExportResponse, error) {
	v, ri, err := p.read(ctx, ginv1.ReadConsistency_READ_CONSISTENCY_ANY)
	if err != nil {
		return nil, toStatus(err)
	}
	var (
		b     []byte
		ctype = "text/plain"
	)
	switch req.GetFormat() {
	case ginv1.ExportFormat_EXPORT_FORMAT_SLURM_TREE:
		b, err = export.SlurmTree(v.Graph)
	case ginv1.ExportFormat_EXPORT_FORMAT_SLURM_BLOCK:
		b, err = export.SlurmBlock(v.Graph)
	case ginv1.ExportFormat_EXPORT_FORMAT_JSON:
		b, err = export.JSON(v.Graph)
		ctype = "application/json"
	case ginv1.ExportFormat_EXPORT_FORMAT_DOT:
		b, err = export.DOT(v.Graph)
		ctype = "text/vnd.graphviz"
	case ginv1.ExportFormat_EXPORT_FORMAT_NCCL_TOPO:
		rec, ok := v.Node(req.GetNode())
		if !ok {
			return nil, toStatus(&notFound{what: fmt.Sprintf("node %q", req.GetNode())})
		}
		b, err = export.NCCLTopo(v.Graph, rec.GetInventory())
		ctype = "application/xml"
	default:
		return nil, toStatus(invalidf("format", "unknown export format %d", req.GetFormat()))
	}
	if err != nil {
		return nil, toStatus(&precondition{msg: err.Error()})
	}
	return &ginv1.ExportResponse{Content: b, ContentType: ctype, Read: ri}, nil
}
