package master

import (
	"context"
	"errors"
	"fmt"
	"time"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/authz"
	"github.com/gin-topology/gin/internal/inventory"
	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/state"
)

// relayService is the leader's side of RelayService: what the other
// masters relay from the agent sessions they hold. With TLS on only master
// certificates reach it (internal/authz); the relaying master has checked
// that the agent's certificate names the node.
//
// It is a part of its own (parts.go): what it uses of the master is given
// by Server.New.
type relayService struct {
	ginv1.UnimplementedRelayServiceServer
	store *state.Store
	live  *liveness // node liveness, fed by the relayed writes and reports
	// maxNodes bounds each list of a session report (gin-master --max-nodes).
	maxNodes int
	// memberOnly refuses a caller that is not a registered master
	// (Server.memberOnly, membergate.go).
	memberOnly func(ctx context.Context, method string) error
	// outdated and leading refuse a relay on a master that does not lead
	// (Server.outdated, Server.leading), checked in that order.
	outdated, leading leadingFunc
	// commitInventory commits an agent's inventory or delta on the leader
	// (Server.commitInventoryHere).
	commitInventory func(ctx context.Context, name, machineID string, inv *ginv1.NodeInventory, delta *ginv1.InventoryDelta, binding *statev1.NodeBinding) (resultWithGen, error)
	// importFabricScan imports the named scanner's upload on the leader
	// (Server.importFabricScanHere).
	importFabricScan func(ctx context.Context, node string, scan *ginv1.FabricTopology) (uint64, error)
	// refreshScanner re-picks the fabric scanner after a report, scanner
	// names it (reports.go).
	refreshScanner func()
	scanner        func() string
}

func (r *relayService) PutInventory(ctx context.Context, req *ginv1.RelayServicePutInventoryRequest) (*ginv1.RelayServicePutInventoryResponse, error) {
	if err := r.memberOnly(ctx, "PutInventory"); err != nil {
		return nil, toStatus(err)
	}
	if err := inventory.ValidNodeName(req.GetNodeName()); err != nil {
		return nil, toStatus(invalidf("node_name", "%v", err))
	}
	if len(req.GetMachineId()) > inventory.MaxStringLen {
		return nil, toStatus(invalidf("machine_id", "longer than %d bytes", inventory.MaxStringLen))
	}
	via := req.GetServerId()
	if len(via) > inventory.MaxStringLen {
		return nil, toStatus(invalidf("server_id", "longer than %d bytes", inventory.MaxStringLen))
	}
	if peer, ok := authz.Identity(ctx); ok && via != "" && peer.Name != via {
		return nil, toStatus(&forbidden{msg: fmt.Sprintf("a write relayed for master %q with the certificate of %s: a master relays only its own sessions", via, peer)})
	}
	if _, ok := r.store.Server(via); !ok {
		via = "" // an older master, or one this leader does not know: attributed to none
	}
	if err := r.leaderOnly(); err != nil {
		return nil, toStatus(err)
	}
	binding, err := relayedBinding(req.GetNodeName(), req.GetAgentCertificate())
	if err != nil {
		return nil, toStatus(err)
	}
	res, err := r.commitInventory(ctx, req.GetNodeName(), req.GetMachineId(), req.GetInventory(), req.GetDelta(), binding)
	if err != nil {
		return nil, toStatus(err)
	}
	// The agent's write committed: it is alive now, whether or not the
	// relaying master's reports list its session yet (a node registered
	// through a follower would otherwise look silent until they do).
	r.live.committed(ctx, req.GetNodeName(), via)
	return &ginv1.RelayServicePutInventoryResponse{AcceptedGeneration: res.Generation, Index: res.Index, Changed: res.Changed}, nil
}

func (r *relayService) ImportFabricScan(ctx context.Context, req *ginv1.RelayServiceImportFabricScanRequest) (*ginv1.RelayServiceImportFabricScanResponse, error) {
	if err := r.memberOnly(ctx, "ImportFabricScan"); err != nil {
		return nil, toStatus(err)
	}
	if err := inventory.ValidNodeName(req.GetNodeName()); err != nil {
		return nil, toStatus(invalidf("node_name", "%v", err))
	}
	if err := r.leaderOnly(); err != nil {
		return nil, toStatus(err)
	}
	idx, err := r.importFabricScan(ctx, req.GetNodeName(), req.GetScan())
	if err != nil {
		return nil, toStatus(err)
	}
	return &ginv1.RelayServiceImportFabricScanResponse{Index: idx}, nil
}

// errNotRegistered: a report from a master whose Join has not committed
// yet. Every follower of a first boot sends one before the leader applied
// its registration; it is retried with the next report, so it is
// UNAVAILABLE (not a rejected request, logged at WARN).
var errNotRegistered = errors.New("not a registered master yet (its join has not committed on the leader; the report is retried)")

func (r *relayService) ReportSessions(ctx context.Context, req *ginv1.ReportSessionsRequest) (*ginv1.ReportSessionsResponse, error) {
	if err := r.memberOnly(ctx, "ReportSessions"); err != nil {
		return nil, toStatus(err)
	}
	id := req.GetServerId()
	if _, ok := r.store.Server(id); !ok {
		return nil, toStatus(fmt.Errorf("master %q: %w", id, errNotRegistered))
	}
	if peer, ok := authz.Identity(ctx); ok && peer.Name != id {
		return nil, toStatus(&forbidden{msg: fmt.Sprintf("a report for master %q with the certificate of %s: a master reports only its own sessions", id, peer)})
	}
	rep, err := r.sessionReport(req)
	if err != nil {
		return nil, toStatus(err)
	}
	if err := r.leaderOnly(); err != nil {
		return nil, toStatus(err)
	}
	if !r.live.report(ctx, id, rep) {
		return &ginv1.ReportSessionsResponse{SendFull: true, Deltas: true}, nil
	}
	r.refreshScanner()
	return &ginv1.ReportSessionsResponse{FabricScanner: r.scanner(), Deltas: true}, nil
}

// sessionReport checks a ReportSessions request at the edge: names, the
// counts (each list at most --max-nodes), the positions that must match,
// and what only a delta carries.
func (r *relayService) sessionReport(req *ginv1.ReportSessionsRequest) (sessionReport, error) {
	rep := sessionReport{
		full: req.GetFull() || req.GetSequence() == 0, seq: req.GetSequence(), base: req.GetBaseSequence(),
		freshWithin: time.Duration(req.GetFreshWithinMs()) * time.Millisecond,
		nodes:       req.GetNodes(), agesMs: req.GetAgesMs(), gone: req.GetGone(), goneAgesMs: req.GetGoneAgesMs(), left: req.GetLeft(), leftAgesMs: req.GetLeftAgesMs(),
	}
	if rep.seq == 0 {
		rep.freshWithin = 0 // an older master: every age is exact
	}
	if len(rep.nodes) != len(rep.agesMs) {
		return rep, invalidf("ages_ms", "%d ages for %d nodes", len(rep.agesMs), len(rep.nodes))
	}
	if len(rep.gone) != len(rep.goneAgesMs) {
		return rep, invalidf("gone_ages_ms", "%d ages for %d nodes", len(rep.goneAgesMs), len(rep.gone))
	}
	if len(rep.left) != len(rep.leftAgesMs) {
		return rep, invalidf("left_ages_ms", "%d ages for %d nodes", len(rep.leftAgesMs), len(rep.left))
	}
	if rep.seq != 0 && (rep.freshWithin <= 0 || rep.freshWithin > maxFreshWithin) {
		return rep, invalidf("fresh_within_ms", "%d, want 1 to %d", req.GetFreshWithinMs(), maxFreshWithin.Milliseconds())
	}
	if rep.full && (len(rep.gone) > 0 || len(rep.left) > 0 || rep.base != 0) {
		return rep, invalidf("full", "a full report carries no gone, left or base_sequence")
	}
	if !rep.full && rep.base >= rep.seq {
		return rep, invalidf("base_sequence", "%d is not before sequence %d", rep.base, rep.seq)
	}
	for _, l := range []struct {
		field string
		names []string
	}{{"nodes", rep.nodes}, {"gone", rep.gone}, {"left", rep.left}} {
		if len(l.names) > r.maxNodes {
			return rep, invalidf(l.field, "%d nodes, more than gin-master --max-nodes (%d)", len(l.names), r.maxNodes)
		}
		for i, n := range l.names {
			if err := inventory.ValidNodeName(n); err != nil {
				return rep, invalidf(fmt.Sprintf("%s[%d]", l.field, i), "%v", err)
			}
		}
	}
	return rep, nil
}

// leaderOnly refuses a relay on a master that does not lead (the caller
// retries with the leader the hint names).
func (r *relayService) leaderOnly() error {
	if err := r.outdated(); err != nil {
		return err
	}
	return r.leading()
}

// commitInventoryHere commits, on the leader, a node's full inventory or
// its delta against the inventory held (exactly one is set) for a session
// of node name opened with machineID.
func (s *Server) commitInventoryHere(ctx context.Context, name, machineID string, inv *ginv1.NodeInventory, delta *ginv1.InventoryDelta, binding *statev1.NodeBinding) (resultWithGen, error) {
	if delta != nil {
		rec, ok := s.store.Node(name)
		if !ok {
			return resultWithGen{}, invalidf("delta", "the master holds no inventory for %q to apply a delta to; send a full inventory", name)
		}
		var err error
		if inv, err = inventory.ApplyDelta(rec.GetInventory(), delta); err != nil {
			return resultWithGen{}, fmt.Errorf("%w: delta: %v", errFailedPrecondition, err)
		}
	}
	if inv == nil {
		return resultWithGen{}, invalidf("inventory", "is missing")
	}
	if inv.GetNodeName() != name {
		return resultWithGen{}, invalidf("inventory.node_name", "%q does not match the session's node %q", inv.GetNodeName(), name)
	}
	if m := inv.GetHost().GetMachineId(); m != "" && machineID != "" && m != machineID {
		return resultWithGen{}, invalidf("inventory.host.machine_id", "%q does not match the session's machine %q", m, machineID)
	}
	return s.putInventoryBound(ctx, inv, binding, true)
}

// relayedBinding is the node binding of a relayed write: the agent
// certificate the relaying master verified, which must name the node (nil
// when the relay carries none, as without TLS).
func relayedBinding(node string, c *ginv1.AgentCertificate) (*statev1.NodeBinding, error) {
	if c == nil {
		return nil, nil
	}
	if want := (pki.Identity{Role: pki.RoleAgent, Name: node}).String(); c.GetIdentity() != want {
		return nil, invalidf("agent_certificate.identity", "%q, want %q for node %q", c.GetIdentity(), want, node)
	}
	if len(c.GetCaKeySha256()) > 128 || len(c.GetSerial()) > 128 {
		return nil, invalidf("agent_certificate", "a field is longer than 128 bytes")
	}
	return &statev1.NodeBinding{Identity: c.GetIdentity(), CaKeySha256: c.GetCaKeySha256(), Serial: c.GetSerial()}, nil
}

// importFabricScanHere imports, on the leader, the scan uploaded by node's
// agent, which must be the scanner this leader named.
func (s *Server) importFabricScanHere(ctx context.Context, node string, scan *ginv1.FabricTopology) (uint64, error) {
	if sc := s.scanner(); sc != node {
		return 0, fmt.Errorf("%w: node %q is not the fabric scanner; %q is", errFailedPrecondition, node, sc)
	}
	return s.admin.importFabric(ctx, scan)
}
