package master

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/calib"
	"github.com/gin-topology/gin/internal/hostlist"
	"github.com/gin-topology/gin/internal/state"
)

var measurementIDRE = regexp.MustCompile(`^[0-9a-f]{16}$`)

// calibrationService is CalibrationService: measurements imported by an
// admin (validated here and in the FSM), listed and read on any master.
type calibrationService struct {
	ginv1.UnimplementedCalibrationServiceServer
	store *state.Store
	apply applyFunc
	read  readFunc
	log   *slog.Logger
}

func newCalibrationService(store *state.Store, apply applyFunc, read readFunc, log *slog.Logger) *calibrationService {
	return &calibrationService{store: store, apply: apply, read: read, log: log}
}

// gpuModel answers a node's GPU model from the stored inventory.
func gpuModel(v state.View) calib.GPUModel {
	return func(node string) string {
		h, _ := v.Head(node)
		return h.GPUModel // the first model a GPU reports, "" for none
	}
}

func (c *calibrationService) ImportMeasurement(ctx context.Context, req *ginv1.ImportMeasurementRequest) (*ginv1.ImportMeasurementResponse, error) {
	m, err := measurementOf(c.store.View(), req)
	if err != nil {
		return nil, toStatus(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := c.apply(ctx, &statev1.Command{Command: &statev1.Command_PutMeasurement{PutMeasurement: &statev1.PutMeasurement{Measurement: m}}})
	if err != nil {
		return nil, toStatus(fmt.Errorf("store measurement: %w", err))
	}
	stored, ok := c.store.Measurement(m.GetId())
	if !ok {
		return nil, toStatus(fmt.Errorf("measurement %s committed at %d but not in the state", m.GetId(), res.Index))
	}
	c.log.Info("measurement stored", "id", m.GetId(), "collective", m.GetCollective(), "algorithm", m.GetAlgorithm(),
		"protocol", m.GetProtocol(), "nodes", len(m.GetNodes()), "points", len(m.GetPoints()), "changed", res.Changed, "index", res.Index)
	return &ginv1.ImportMeasurementResponse{Measurement: stored, Changed: res.Changed, Index: res.Index}, nil
}

// measurementOf validates an import at the edge and derives its key from
// the graph; the FSM applies the same CheckMeasurement.
func measurementOf(view state.View, req *ginv1.ImportMeasurementRequest) (*ginv1.Measurement, error) {
	nodes, err := expandNodes(req.GetNodes(), state.MaxMeasurementNodes, "a measurement's nodes")
	switch {
	case req.GetNodes() == "":
		return nil, invalidf("nodes", "is empty")
	case err != nil:
		return nil, err
	case len(nodes) > state.MaxMeasurementNodes:
		return nil, invalidf("nodes", "%d nodes, more than %d", len(nodes), state.MaxMeasurementNodes)
	case len(req.GetPoints()) == 0:
		return nil, invalidf("points", "is empty")
	}
	var missing []string
	for _, n := range nodes {
		if _, ok := view.Head(n); !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, &notFound{what: fmt.Sprintf("node(s) %s", hostlist.Compress(missing))}
	}
	key, err := calib.KeyOf(view.Graph, gpuModel(view), nodes, int(req.GetGpusPerNode()), req.GetNcclVersion())
	if err != nil {
		return nil, invalidf("nodes", "%v", err)
	}
	if g := req.GetGpusPerNode(); g != 0 && g != key.GetGpusPerNode() {
		return nil, invalidf("gpus_per_node", "%d, the nodes give %d", g, key.GetGpusPerNode())
	}
	forced := req.GetForcedBy()
	if forced == "" {
		forced = "default"
		if req.GetAlgorithm() != 0 || req.GetProtocol() != 0 {
			forced = "flag"
		}
	}
	m := &ginv1.Measurement{
		Shape: key, Collective: req.GetCollective(), Algorithm: req.GetAlgorithm(), Protocol: req.GetProtocol(),
		ForcedBy: forced, Nodes: nodes, Source: req.GetSource(),
		ImportedAt: timestamppb.Now(),
	}
	for _, p := range req.GetPoints() {
		m.Points = append(m.Points, proto.CloneOf(p))
	}
	m.Id = state.MeasurementID(m)
	if err := state.CheckMeasurement(m); err != nil {
		return nil, invalidf("measurement", "%v", err)
	}
	return m, nil
}

func (c *calibrationService) ListMeasurements(ctx context.Context, _ *ginv1.ListMeasurementsRequest) (*ginv1.ListMeasurementsResponse, error) {
	_, ri, err := c.read(ctx, ginv1.ReadConsistency_READ_CONSISTENCY_ANY)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &ginv1.ListMeasurementsResponse{Read: ri}
	for _, m := range c.store.Measurements() {
		short := proto.CloneOf(m)
		short.Points = nil
		resp.Measurements = append(resp.Measurements, short)
	}
	return resp, nil
}

func (c *calibrationService) GetMeasurement(ctx context.Context, req *ginv1.GetMeasurementRequest) (*ginv1.GetMeasurementResponse, error) {
	if !measurementIDRE.MatchString(req.GetId()) {
		return nil, toStatus(invalidf("id", "%q is not a measurement id (16 hex digits)", req.GetId()))
	}
	_, ri, err := c.read(ctx, ginv1.ReadConsistency_READ_CONSISTENCY_ANY)
	if err != nil {
		return nil, toStatus(err)
	}
	m, ok := c.store.Measurement(req.GetId())
	if !ok {
		return nil, toStatus(&notFound{what: fmt.Sprintf("measurement %s", req.GetId())})
	}
	return &ginv1.GetMeasurementResponse{Measurement: m, Read: ri}, nil
}

func (c *calibrationService) DeleteMeasurement(ctx context.Context, req *ginv1.DeleteMeasurementRequest) (*ginv1.DeleteMeasurementResponse, error) {
	if !measurementIDRE.MatchString(req.GetId()) {
		return nil, toStatus(invalidf("id", "%q is not a measurement id (16 hex digits)", req.GetId()))
	}
	if _, ok := c.store.Measurement(req.GetId()); !ok {
		return &ginv1.DeleteMeasurementResponse{}, nil
	}
	res, err := c.apply(ctx, &statev1.Command{Command: &statev1.Command_DeleteMeasurement{DeleteMeasurement: &statev1.DeleteMeasurement{Id: req.GetId()}}})
	if err != nil {
		return nil, toStatus(err)
	}
	return &ginv1.DeleteMeasurementResponse{Changed: res.Changed, Index: res.Index}, nil
}
