package master

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/devid"
	"github.com/gin-topology/gin/internal/pki"
	ginraft "github.com/gin-topology/gin/internal/raft"
	"github.com/gin-topology/gin/internal/state"
)

// Limits of a fabric import.
const (
	maxFabricSwitches = 200_000
	maxFabricLinks    = 4_000_000
)

// adminService is AdminService: fabric imports, cluster membership (join,
// admission, removal), the certificate deny list and node deletion. Its
// writes are the leader's (forward.go brings a follower's caller there);
// its reads answer from this master.
type adminService struct {
	ginv1.UnimplementedAdminServiceServer
	id, advertise string      // this master's server id and client address
	tls           *pki.Source // nil without TLS
	store         *state.Store
	node          *ginraft.Node // membership: Stats, AddVoter, RemoveServer
	apply         applyFunc
	leading       leadingFunc
	outdated      func() error // Server.outdated
	leaderHint    func() string
	// reach is the leader's view of another master (liveness.reach).
	reach func(id string) (reachable bool, since time.Duration, known bool)
	// held: node has a live agent session here, or one a follower reports.
	held func(node string) bool
	// waitDenyApplied (Server.waitDenyApplied): a deny-list change at an
	// index holds on every master the leader reaches.
	waitDenyApplied func(ctx context.Context, index uint64, what string) error
	log             *slog.Logger
}

func (a *adminService) ImportFabric(ctx context.Context, req *ginv1.ImportFabricRequest) (*ginv1.ImportFabricResponse, error) {
	idx, err := a.importFabric(ctx, req.GetFabric())
	if err != nil {
		return nil, toStatus(err)
	}
	compute, matched := portCoverage(a.store.View(), req.GetFabric())
	if matched == 0 && compute > 0 {
		a.log.Warn("the imported fabric connects none of the cluster's compute ports", "compute_ports", compute, "source", req.GetFabric().GetSource())
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

func (a *adminService) importFabric(ctx context.Context, f *ginv1.FabricTopology) (uint64, error) {
	switch {
	case f == nil:
		return 0, invalidf("fabric", "is missing")
	case len(f.GetSwitches()) > maxFabricSwitches:
		return 0, invalidf("fabric.switches", "%d switches, more than %d", len(f.GetSwitches()), maxFabricSwitches)
	case len(f.GetLinks()) > maxFabricLinks:
		return 0, invalidf("fabric.links", "%d links, more than %d", len(f.GetLinks()), maxFabricLinks)
	}
	g := a.store.Graph()
	if _, err := g.WithFabric(f); err != nil {
		return 0, invalidf("fabric", "%v", err)
	}
	if errs := g.CheckFabric(f); len(errs) > 0 {
		return 0, invalidf("fabric", "the scan contradicts the inventories (%d problem(s)); first: %v", len(errs), errs[0])
	}
	res, err := a.apply(ctx, &statev1.Command{Command: &statev1.Command_ImportFabric{ImportFabric: &statev1.ImportFabric{Fabric: f}}})
	if err != nil {
		return 0, fmt.Errorf("fabric import: %w", err)
	}
	a.log.Info("fabric imported", "source", f.GetSource(), "switches", len(f.GetSwitches()), "links", len(f.GetLinks()), "index", res.Index)
	return res.Index, nil
}

func (a *adminService) GetClusterInfo(_ context.Context, _ *ginv1.GetClusterInfoRequest) (*ginv1.GetClusterInfoResponse, error) {
	st := a.node.Stats()
	lid, _ := a.node.Leader()
	resp := &ginv1.GetClusterInfoResponse{
		ServerId: a.id, RaftState: st.State, Term: st.Term, CommitIndex: st.CommitIndex,
		AppliedIndex: st.AppliedIndex, LeaderId: lid, LeaderAddress: a.leaderHint(),
		ClusterId: a.store.ClusterID(), HasState: a.node.HasState(),
		RaftAddress: a.node.Addr(), ClientAddress: a.advertise,
	}
	for _, m := range st.Members {
		mem := &ginv1.Member{Id: m.ID, Address: m.Address, Voter: m.Voter, Leader: m.ID == lid}
		if r, ok := a.store.Server(m.ID); ok {
			mem.ClientAddress = r.GetClientAddress()
		}
		a.fillReach(mem)
		resp.Members = append(resp.Members, mem)
	}
	return resp, nil
}
