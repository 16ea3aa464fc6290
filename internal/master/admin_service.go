package master

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/authz"
	"github.com/gin-topology/gin/internal/devid"
	"github.com/gin-topology/gin/internal/inventory"
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
	// leaderInfo asks the leader for its GetClusterInfo (a follower's
	// answer carries the leader's view of reachability; nil: none).
	leaderInfo func(ctx context.Context) (*ginv1.GetClusterInfoResponse, error)
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

func (a *adminService) GetClusterInfo(ctx context.Context, _ *ginv1.GetClusterInfoRequest) (*ginv1.GetClusterInfoResponse, error) {
	st := a.node.Stats()
	lid := st.LeaderID
	resp := &ginv1.GetClusterInfoResponse{
		ServerId: a.id, RaftState: st.State, Term: st.Term, CommitIndex: st.CommitIndex,
		AppliedIndex: st.AppliedIndex, LeaderId: lid, LeaderAddress: a.leaderHint(),
		ClusterId: a.store.ClusterID(), HasState: a.node.HasState(),
		RaftAddress: a.node.Addr(), ClientAddress: a.advertise,
	}
	for _, m := range st.Members {
		mem := &ginv1.Member{Id: m.ID, Address: m.Address, Voter: m.Voter, Leader: m.ID == lid}
		if r, ok := a.store.Server(m.ID); ok {
			mem.ClientAddress, mem.HttpAddress = r.GetClientAddress(), r.GetHttpAddress()
		}
		a.fillReach(mem)
		resp.Members = append(resp.Members, mem)
	}
	for _, ad := range a.store.Admissions() {
		resp.Pending = append(resp.Pending, &ginv1.PendingMember{Id: ad.GetServerId(), RaftAddress: ad.GetRaftAddress(), AdmittedBy: ad.GetAdmittedBy()})
	}
	a.leaderReach(ctx, resp)
	return resp, nil
}

// The certificate deny list (AdminService.DenyCertificate and friends).
// Entries are validated here and again in the FSM by
// state.CheckDeniedCertificate; every master enforces the replicated list
// (internal/authz at the gRPC listener, internal/raft at the Raft port).

func (a *adminService) DenyCertificate(ctx context.Context, req *ginv1.DenyCertificateRequest) (*ginv1.DenyCertificateResponse, error) {
	e, err := a.denyEntry(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := a.apply(ctx, &statev1.Command{Command: &statev1.Command_DenyCertificate{DenyCertificate: &statev1.DenyCertificate{Entry: e}}})
	if err != nil {
		return nil, toStatus(fmt.Errorf("deny certificate %s: %w", e.GetSerial(), err))
	}
	if err := a.waitDenyApplied(ctx, res.Index, "serial "+e.GetSerial()+" denied"); err != nil {
		return nil, toStatus(err)
	}
	stored, ok := a.store.DeniedCertificate(e.GetSerial())
	if !ok {
		return nil, toStatus(fmt.Errorf("deny entry %s committed at %d but not in the state", e.GetSerial(), res.Index))
	}
	a.log.Warn("certificate denied", "serial", e.GetSerial(), "reason", e.GetReason(), "by", e.GetDeniedBy(), "changed", res.Changed, "index", res.Index)
	if a.tls == nil {
		a.log.Warn("this master runs without TLS: the deny list is kept and replicated, but there are no certificates to refuse")
	}
	return &ginv1.DenyCertificateResponse{Entry: stored, Changed: res.Changed, Index: res.Index}, nil
}

// denyEntry validates a deny request at the edge: the serial canonical,
// the entry as the FSM will check it, room on the list for a new serial.
func (a *adminService) denyEntry(ctx context.Context, req *ginv1.DenyCertificateRequest) (*ginv1.DeniedCertificate, error) {
	serial, err := pki.ParseSerial(req.GetSerial())
	if err != nil {
		return nil, invalidf("serial", "%v", err)
	}
	e := &ginv1.DeniedCertificate{Serial: serial, Reason: req.GetReason(), DeniedAt: timestamppb.Now(),
		Identity: req.GetIdentity(), NotAfter: req.GetNotAfter()}
	if id, ok := authz.Identity(ctx); ok {
		e.DeniedBy = id.String()
	}
	if err := state.CheckDeniedCertificate(e); err != nil {
		return nil, invalidf("entry", "%v", err)
	}
	if _, ok := a.store.DeniedCertificate(serial); !ok {
		if n := a.store.DeniedCount(); n >= state.MaxDeniedCertificates {
			return nil, exhaustedf(apierr.ReasonDenyListFull, "serial %s not denied: the deny list holds %d entries, the most it may; take entries of expired certificates off it (ginctl tls allow SERIAL)",
				serial, n)
		}
	}
	return e, nil
}

func (a *adminService) AllowCertificate(ctx context.Context, req *ginv1.AllowCertificateRequest) (*ginv1.AllowCertificateResponse, error) {
	serial, err := pki.ParseSerial(req.GetSerial())
	if err != nil {
		return nil, toStatus(invalidf("serial", "%v", err))
	}
	if _, ok := a.store.DeniedCertificate(serial); !ok {
		return nil, toStatus(&notFound{msg: fmt.Sprintf("serial %s is not on the deny list", serial)})
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := a.apply(ctx, &statev1.Command{Command: &statev1.Command_AllowCertificate{AllowCertificate: &statev1.AllowCertificate{Serial: serial}}})
	if err != nil {
		return nil, toStatus(fmt.Errorf("allow certificate %s: %w", serial, err))
	}
	if err := a.waitDenyApplied(ctx, res.Index, "serial "+serial+" taken off the deny list"); err != nil {
		return nil, toStatus(err)
	}
	a.log.Warn("certificate taken off the deny list", "serial", serial, "changed", res.Changed, "index", res.Index)
	return &ginv1.AllowCertificateResponse{Changed: res.Changed, Index: res.Index}, nil
}

func (a *adminService) ListDeniedCertificates(context.Context, *ginv1.ListDeniedCertificatesRequest) (*ginv1.ListDeniedCertificatesResponse, error) {
	if err := a.outdated(); err != nil {
		return nil, toStatus(err)
	}
	return &ginv1.ListDeniedCertificatesResponse{Entries: a.store.DeniedCertificates()}, nil
}

// DeleteNode removes a node's record and its binding (machine_id, or the
// certificate with TLS), so that the name can be registered again by a new
// machine or certificate. A node whose agent holds a session (on the
// leader, or on a follower that reports it) is refused rather than deleted under it:
// its agent would register it again at once. Stop the agent first, or deny
// its certificate (which ends the session) when it is not to come back.
func (a *adminService) DeleteNode(ctx context.Context, req *ginv1.DeleteNodeRequest) (*ginv1.DeleteNodeResponse, error) {
	name := req.GetNodeName()
	if err := inventory.ValidNodeName(name); err != nil {
		return nil, toStatus(invalidf("node_name", "%v", err))
	}
	if _, ok := a.store.Node(name); !ok {
		return nil, toStatus(&notFound{what: fmt.Sprintf("node %q", name)})
	}
	if err := a.leading(); err != nil {
		return nil, toStatus(err)
	}
	if a.held(name) {
		return nil, toStatus(&precondition{msg: fmt.Sprintf("node %q has a live agent session: stop its agent first (or deny its certificate, ginctl tls deny SERIAL, which ends the session), then delete it", name)})
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := a.apply(ctx, &statev1.Command{Command: &statev1.Command_DeleteNode{DeleteNode: &statev1.DeleteNode{NodeName: name, At: timestamppb.Now()}}})
	if err != nil {
		return nil, toStatus(fmt.Errorf("delete node %s: %w", name, err))
	}
	a.log.Warn("node deleted", "node", name, "changed", res.Changed, "index", res.Index)
	return &ginv1.DeleteNodeResponse{Index: res.Index}, nil
}
