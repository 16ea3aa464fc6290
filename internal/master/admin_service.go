package master

import (
	"context"
	"fmt"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/devid"
	"github.com/gin-topology/gin/internal/state"
)

// Limits of a fabric import.
const (
	maxFabricSwitches = 200_000
	maxFabricLinks    = 4_000_000
)

type adminService struct {
	ginv1.UnimplementedAdminServiceServer
	s *Server
}

func (a *adminService) ImportFabric(ctx context.Context, req *ginv1.ImportFabricRequest) (*ginv1.ImportFabricResponse, error) {
	idx, err := a.s.importFabric(ctx, req.GetFabric())
	if err != nil {
		return nil, toStatus(err)
	}
	compute, matched := portCoverage(a.s.store.View(), req.GetFabric())
	if matched == 0 && compute > 0 {
		a.s.log.Warn("the imported fabric connects none of the cluster's compute ports", "compute_ports", compute, "source", req.GetFabric().GetSource())
	}
	return &ginv1.ImportFabricResponse{
		Index: idx, Switches: uint32(len(req.GetFabric().GetSwitches())), Links: uint32(len(req.GetFabric().GetLinks())),
		ComputePorts: compute, MatchedPorts: matched,
	}, nil
}

// portCoverage counts the compute HCA ports of the view's nodes and those
// among them that a link of the fabric reaches, by port GUID or, for a
// scan that names them, by node and HCA.
func portCoverage(v state.View, f *ginv1.FabricTopology) (compute, matched uint32) {
	guids := map[string]bool{}
	hcas := map[[2]string]bool{}
	for _, l := range f.GetLinks() {
		for _, e := range []*ginv1.FabricEndpoint{l.GetA(), l.GetB()} {
			if e.GetKind() != ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_HCA {
				continue
			}
			if g, ok := devid.GUID(e.GetGuid()); ok {
				guids[g] = true
			}
			if e.GetNodeName() != "" && e.GetHca() != "" {
				hcas[[2]string{e.GetNodeName(), e.GetHca()}] = true
			}
		}
	}
	for _, name := range v.NodeNames() {
		hs, _ := v.HCAs(name)
		for _, h := range hs {
			if h.GetRole() != ginv1.HcaRole_HCA_ROLE_COMPUTE {
				continue
			}
			for _, p := range h.GetPorts() {
				compute++
				g, ok := devid.GUID(p.GetPortGuid())
				if (ok && guids[g]) || hcas[[2]string{name, h.GetName()}] {
					matched++
				}
			}
		}
	}
	return compute, matched
}

func (s *Server) importFabric(ctx context.Context, f *ginv1.FabricTopology) (uint64, error) {
	switch {
	case f == nil:
		return 0, invalidf("fabric", "is missing")
	case len(f.GetSwitches()) > maxFabricSwitches:
		return 0, invalidf("fabric.switches", "%d switches, more than %d", len(f.GetSwitches()), maxFabricSwitches)
	case len(f.GetLinks()) > maxFabricLinks:
		return 0, invalidf("fabric.links", "%d links, more than %d", len(f.GetLinks()), maxFabricLinks)
	}
	g := s.store.Graph()
	if _, err := g.WithFabric(f); err != nil {
		return 0, invalidf("fabric", "%v", err)
	}
	if errs := g.CheckFabric(f); len(errs) > 0 {
		return 0, invalidf("fabric", "the scan contradicts the inventories (%d problem(s)); first: %v", len(errs), errs[0])
	}
	res, err := s.apply(ctx, &statev1.Command{Command: &statev1.Command_ImportFabric{ImportFabric: &statev1.ImportFabric{Fabric: f}}})
	if err != nil {
		return 0, fmt.Errorf("fabric import: %w", err)
	}
	s.log.Info("fabric imported", "source", f.GetSource(), "switches", len(f.GetSwitches()), "links", len(f.GetLinks()), "index", res.Index)
	return res.Index, nil
}

func (a *adminService) GetClusterInfo(_ context.Context, _ *ginv1.GetClusterInfoRequest) (*ginv1.GetClusterInfoResponse, error) {
	st := a.s.node.Stats()
	lid, _ := a.s.node.Leader()
	resp := &ginv1.GetClusterInfoResponse{
		ServerId: a.s.cfg.ID, RaftState: st.State, Term: st.Term, CommitIndex: st.CommitIndex,
		AppliedIndex: st.AppliedIndex, LeaderId: lid, LeaderAddress: a.s.leaderHint(),
		ClusterId: a.s.store.ClusterID(), HasState: a.s.node.HasState(),
		RaftAddress: a.s.node.Addr(), ClientAddress: a.s.cfg.Advertise,
	}
	for _, m := range st.Members {
		mem := &ginv1.Member{Id: m.ID, Address: m.Address, Voter: m.Voter, Leader: m.ID == lid}
		if r, ok := a.s.store.Server(m.ID); ok {
			mem.ClientAddress = r.GetClientAddress()
		}
		a.s.fillReach(mem)
		resp.Members = append(resp.Members, mem)
	}
	return resp, nil
}
