package state

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/calib"
)

// Bounds on calibration measurements (CheckMeasurement).
const (
	MaxMeasurements     = 4096
	MaxMeasurementNodes = 4096
	maxNameLen          = 253
	maxSourceLen        = 256
)

// ErrTooManyMeasurements is returned when the store holds MaxMeasurements
// and a new key arrives.
var ErrTooManyMeasurements = errors.New("too many stored measurements")

var reNCCLVersion = regexp.MustCompile(`^\d{1,3}\.\d{1,3}\.\d{1,3}$`)

// MeasurementID derives a measurement's id from its key: the shape, the
// collective and the forced algorithm and protocol.
func MeasurementID(m *ginv1.Measurement) string {
	s := m.GetShape()
	key := strings.Join([]string{
		s.GetGpuModel(), strconv.FormatUint(uint64(s.GetNvlinkDomainSize()), 10),
		strconv.FormatUint(uint64(s.GetGpusPerNode()), 10), strconv.FormatUint(uint64(s.GetNicsPerNode()), 10),
		strconv.FormatFloat(s.GetNicGbps(), 'g', -1, 64), strconv.FormatUint(uint64(s.GetNodeCount()), 10),
		strconv.FormatUint(uint64(s.GetFabricTiers()), 10), s.GetNcclVersion(),
		m.GetCollective().String(), m.GetAlgorithm().String(), m.GetProtocol().String(),
	}, "\x00")
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// CheckMeasurement is the one rule for a storable measurement, applied at
// the edge and again by the FSM: bounded, finite, the id matches the key,
// sizes strictly ascending.
func CheckMeasurement(m *ginv1.Measurement) error {
	if m == nil {
		return errors.New("measurement is missing")
	}
	s := m.GetShape()
	switch {
	case s == nil:
		return errors.New("shape is missing")
	case s.GetGpusPerNode() < 1 || s.GetGpusPerNode() > 1024:
		return fmt.Errorf("shape.gpus_per_node %d is not in 1..1024", s.GetGpusPerNode())
	case s.GetNodeCount() < 1 || s.GetNodeCount() > MaxMeasurementNodes:
		return fmt.Errorf("shape.node_count %d is not in 1..%d", s.GetNodeCount(), MaxMeasurementNodes)
	case s.GetNvlinkDomainSize() > 1<<20:
		return fmt.Errorf("shape.nvlink_domain_size %d is too large", s.GetNvlinkDomainSize())
	case s.GetNicsPerNode() > 64:
		return fmt.Errorf("shape.nics_per_node %d is more than 64", s.GetNicsPerNode())
	case !finite(s.GetNicGbps()) || s.GetNicGbps() < 0 || s.GetNicGbps() > 100_000:
		return fmt.Errorf("shape.nic_gbps %v is not in 0..100000", s.GetNicGbps())
	case s.GetFabricTiers() > 16:
		return fmt.Errorf("shape.fabric_tiers %d is more than 16", s.GetFabricTiers())
	case len(s.GetGpuModel()) > 128:
		return fmt.Errorf("shape.gpu_model is longer than 128 bytes")
	case s.GetNcclVersion() != "" && !reNCCLVersion.MatchString(s.GetNcclVersion()):
		return fmt.Errorf("shape.nccl_version %q is not X.Y.Z", s.GetNcclVersion())
	}
	if c := m.GetCollective(); c < ginv1.Collective_COLLECTIVE_BROADCAST || c > ginv1.Collective_COLLECTIVE_ALL_REDUCE {
		return fmt.Errorf("collective %v is not one NCCL's tuner sees", c)
	}
	if _, ok := ginv1.Algorithm_name[int32(m.GetAlgorithm())]; !ok {
		return fmt.Errorf("algorithm %d is unknown", m.GetAlgorithm())
	}
	if _, ok := ginv1.Protocol_name[int32(m.GetProtocol())]; !ok {
		return fmt.Errorf("protocol %d is unknown", m.GetProtocol())
	}
	switch m.GetForcedBy() {
	case "flag", "log", "default":
	default:
		return fmt.Errorf("forced_by %q is not flag, log or default", m.GetForcedBy())
	}
	if m.GetForcedBy() == "default" && (m.GetAlgorithm() != 0 || m.GetProtocol() != 0) {
		return errors.New("forced_by default with a forced algorithm or protocol")
	}
	if len(m.GetSource()) > maxSourceLen {
		return fmt.Errorf("source is longer than %d bytes", maxSourceLen)
	}
	if n := len(m.GetNodes()); n != int(s.GetNodeCount()) {
		return fmt.Errorf("%d nodes named, shape.node_count is %d", n, s.GetNodeCount())
	}
	for i, n := range m.GetNodes() {
		if n == "" || len(n) > maxNameLen {
			return fmt.Errorf("nodes[%d] %q is not a node name", i, n)
		}
	}
	pts := m.GetPoints()
	if len(pts) == 0 || len(pts) > calib.MaxPoints {
		return fmt.Errorf("%d points, want 1..%d", len(pts), calib.MaxPoints)
	}
	for i, p := range pts {
		switch {
		case p.GetBytes() == 0:
			return fmt.Errorf("points[%d]: size 0", i)
		case i > 0 && p.GetBytes() <= pts[i-1].GetBytes():
			return fmt.Errorf("points[%d]: size %d after %d (sizes must ascend)", i, p.GetBytes(), pts[i-1].GetBytes())
		case !finite(p.GetTimeUs()) || p.GetTimeUs() <= 0:
			return fmt.Errorf("points[%d]: time %v µs is not positive", i, p.GetTimeUs())
		case !finite(p.GetBusBwGbps()) || p.GetBusBwGbps() < 0:
			return fmt.Errorf("points[%d]: bus bandwidth %v is negative or not finite", i, p.GetBusBwGbps())
		case !finite(p.GetSlowerTimeUs()) || p.GetSlowerTimeUs() != 0 && p.GetSlowerTimeUs() < p.GetTimeUs():
			return fmt.Errorf("points[%d]: slower cell %v µs is below the faster %v µs (want 0 or at least it)", i, p.GetSlowerTimeUs(), p.GetTimeUs())
		}
		if _, ok := ginv1.Algorithm_name[int32(p.GetNcclAlgorithm())]; !ok {
			return fmt.Errorf("points[%d]: algorithm %d is unknown", i, p.GetNcclAlgorithm())
		}
		if _, ok := ginv1.Protocol_name[int32(p.GetNcclProtocol())]; !ok {
			return fmt.Errorf("points[%d]: protocol %d is unknown", i, p.GetNcclProtocol())
		}
	}
	if id := MeasurementID(m); m.GetId() != id {
		return fmt.Errorf("id %q does not match its key (%s)", m.GetId(), id)
	}
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// PutMeasurement stores (or replaces) a measurement. The stored copy
// carries the index that wrote it; the same content again (whatever its
// import time) changes nothing.
func (s *Store) PutMeasurement(index uint64, cmd *statev1.PutMeasurement) (Result, error) {
	m := cmd.GetMeasurement()
	if err := CheckMeasurement(m); err != nil {
		s.mu.Lock()
		s.bump(index)
		s.mu.Unlock()
		return Result{Index: index}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bump(index)
	old, ok := s.measurements[m.GetId()]
	if ok {
		a, b := proto.CloneOf(old), proto.CloneOf(m)
		a.CreatedIndex, b.CreatedIndex, a.ImportedAt, b.ImportedAt = 0, 0, nil, nil
		if proto.Equal(a, b) {
			return Result{Index: index}, nil
		}
	} else if len(s.measurements) >= MaxMeasurements {
		return Result{Index: index}, fmt.Errorf("%w (%d)", ErrTooManyMeasurements, MaxMeasurements)
	}
	stored := proto.CloneOf(m)
	stored.CreatedIndex = index
	s.measurements[m.GetId()] = stored
	return Result{Index: index, Changed: true}, nil
}

// DeleteMeasurement removes a measurement; a no-op when absent.
func (s *Store) DeleteMeasurement(index uint64, cmd *statev1.DeleteMeasurement) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bump(index)
	if _, ok := s.measurements[cmd.GetId()]; !ok {
		return Result{Index: index}, nil
	}
	delete(s.measurements, cmd.GetId())
	return Result{Index: index, Changed: true}, nil
}

// Measurement returns a stored measurement; callers must not modify it.
func (s *Store) Measurement(id string) (*ginv1.Measurement, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, ok := s.measurements[id]
	return m, ok
}

// Measurements returns every stored measurement, by id; callers must not
// modify them.
func (s *Store) Measurements() []*ginv1.Measurement {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return sortedMeasurements(s.measurements)
}

func sortedMeasurements(ms map[string]*ginv1.Measurement) []*ginv1.Measurement {
	out := make([]*ginv1.Measurement, 0, len(ms))
	for _, m := range ms {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetId() < out[j].GetId() })
	return out
}
