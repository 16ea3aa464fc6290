package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// NodeOptions places one simulated node in its simulated cluster.
type NodeOptions struct {
	// NodeName is the node's name; identities (UUIDs, GUIDs, serials) derive from it.
	NodeName string
	// Index is the node's position in the cluster (0-based): it picks the
	// MNNVL rack (clique) of rack-scale profiles.
	Index int
	// Cluster seeds every derived identity, so two clusters never collide.
	Cluster string
	// Neighbors are the leaf-switch ports the node's HCA ports are cabled to
	// (from BuildFabric); nil when no fabric is simulated.
	Neighbors []*ginv1.FabricNeighbor
}

// Source is a simulated node. It is safe for concurrent use.
type Source struct {
	name string

	mu  sync.Mutex
	inv *ginv1.NodeInventory // the node as it is now; Collect returns copies
	// nativeRate is each HCA's full port rate (Gb/s), for rate texts after
	// SetPortState retrains a port at a lower rate.
	nativeRate map[string]uint32
	// Injected error counts (see counters.go).
	nvlinkErrs map[linkKey]uint64
	portErrs   map[portKey]map[string]uint64
}

// NewSource returns the simulated node for a profile.
func NewSource(profile string, opts NodeOptions) (*Source, error) {
	if opts.NodeName == "" {
		return nil, errors.New("sim: node name is empty")
	}
	build, ok := profileTable()[profile]
	if !ok {
		return nil, fmt.Errorf("sim: unknown profile %q: want one of %s", profile, strings.Join(Profiles(), ", "))
	}
	if opts.Index < 0 {
		return nil, fmt.Errorf("sim: node %s: index %d is negative", opts.NodeName, opts.Index)
	}
	b := newBuilder(opts.Cluster, opts.NodeName, opts.Index)
	build(b)
	for _, n := range opts.Neighbors {
		b.inv.FabricNeighbors = append(b.inv.FabricNeighbors, proto.Clone(n).(*ginv1.FabricNeighbor))
	}
	s := &Source{name: "sim:" + profile, inv: b.inv, nativeRate: map[string]uint32{}}
	for _, h := range b.inv.Hcas {
		for _, p := range h.Ports {
			s.nativeRate[h.Name] = p.RateGbps
		}
	}
	return s, nil
}

// Name implements discovery.Source: "sim:<profile>".
func (s *Source) Name() string { return s.name }

// Collect implements discovery.Source. Each call returns a fresh deep copy
// of the node as it is now (after any Set*State calls).
func (s *Source) Collect(ctx context.Context) (*ginv1.NodeInventory, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	inv := proto.Clone(s.inv).(*ginv1.NodeInventory)
	s.mu.Unlock()
	inv.Generation = 0
	inv.Source = s.name
	inv.CollectedAt = timestamppb.Now()
	return inv, nil
}

// AddXID records that GPU gpuIndex reported an XID (once per code, as
// gin-agent's NVML collector keeps them; no time of first sight).
func (s *Source) AddXID(gpuIndex int, xid uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if gpuIndex < 0 || gpuIndex >= len(s.inv.Gpus) {
		return fmt.Errorf("sim: %s has no GPU%d", s.name, gpuIndex)
	}
	g := s.inv.Gpus[gpuIndex]
	if g.Health == nil {
		g.Health = &ginv1.GpuHealth{}
	}
	for _, x := range g.Health.Xids {
		if x.Xid == xid {
			return nil
		}
	}
	g.Health.Xids = append(g.Health.Xids, &ginv1.XidEvent{Xid: xid})
	return nil
}

// SetNVLinkState sets NVLink link of GPU gpuIndex up or down. A direct
// GPU-to-GPU link goes down at both ends, as real hardware does.
func (s *Source) SetNVLinkState(gpuIndex, link int, up bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	state := ginv1.LinkState_LINK_STATE_DOWN
	if up {
		state = ginv1.LinkState_LINK_STATE_UP
	}
	l, err := s.nvlink(gpuIndex, link)
	if err != nil {
		return err
	}
	l.State = state
	if l.RemoteType == ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_GPU {
		for _, g := range s.inv.Gpus {
			if g.PciBusId != l.RemotePciBusId {
				continue
			}
			for _, rl := range g.Nvlinks {
				if rl.Index == l.RemoteLinkIndex {
					rl.State = state
				}
			}
		}
	}
	return nil
}

func (s *Source) nvlink(gpuIndex, link int) (*ginv1.NvLink, error) {
	for _, g := range s.inv.Gpus {
		if int(g.Index) != gpuIndex {
			continue
		}
		for _, l := range g.Nvlinks {
			if int(l.Index) == link {
				return l, nil
			}
		}
		return nil, fmt.Errorf("sim: %s GPU%d has no NVLink %d (it has %d links)", s.inv.NodeName, gpuIndex, link, len(g.Nvlinks))
	}
	return nil, fmt.Errorf("sim: %s has no GPU%d", s.inv.NodeName, gpuIndex)
}

// SetPortState brings an HCA port up (ACTIVE/LinkUp) or down (DOWN/Disabled).
// A non-zero rateGbps sets the port's rate, e.g. half the native rate for a
// port that retrained on two lanes; 0 keeps the current rate.
func (s *Source) SetPortState(hca string, port uint32, active bool, rateGbps uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.inv.Hcas {
		if h.Name != hca {
			continue
		}
		for _, p := range h.Ports {
			if p.Port != port {
				continue
			}
			if active {
				p.State = ginv1.PortState_PORT_STATE_ACTIVE
				p.PhysState = ginv1.PortPhysState_PORT_PHYS_STATE_LINK_UP
			} else {
				p.State = ginv1.PortState_PORT_STATE_DOWN
				p.PhysState = ginv1.PortPhysState_PORT_PHYS_STATE_DISABLED
			}
			if rateGbps != 0 {
				p.RateGbps = rateGbps
				p.RateText = rateText(rateGbps, s.nativeRate[hca])
			}
			return nil
		}
		return fmt.Errorf("sim: %s %s has no port %d", s.inv.NodeName, hca, port)
	}
	return fmt.Errorf("sim: %s has no HCA %q", s.inv.NodeName, hca)
}
