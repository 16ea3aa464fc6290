package master

import (
	"context"
	"fmt"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/authz"
	"github.com/gin-topology/gin/internal/inventory"
	"github.com/gin-topology/gin/internal/pki"
)

// relayService is the leader's side of RelayService: what the other
// masters relay from the agent sessions they hold. With TLS on only master
// certificates reach it (internal/authz); the relaying master has checked
// that the agent's certificate names the node.
type relayService struct {
	ginv1.UnimplementedRelayServiceServer
	s *Server
}

func (r *relayService) PutInventory(ctx context.Context, req *ginv1.RelayServicePutInventoryRequest) (*ginv1.RelayServicePutInventoryResponse, error) {
	if err := inventory.ValidNodeName(req.GetNodeName()); err != nil {
		return nil, toStatus(invalidf("node_name", "%v", err))
	}
	if len(req.GetMachineId()) > inventory.MaxStringLen {
		return nil, toStatus(invalidf("machine_id", "longer than %d bytes", inventory.MaxStringLen))
	}
	if err := r.leading(); err != nil {
		return nil, toStatus(err)
	}
	binding, err := relayedBinding(req.GetNodeName(), req.GetAgentCertificate())
	if err != nil {
		return nil, toStatus(err)
	}
	res, err := r.s.commitInventoryHere(ctx, req.GetNodeName(), req.GetMachineId(), req.GetInventory(), req.GetDelta(), binding)
	if err != nil {
		return nil, toStatus(err)
	}
	return &ginv1.RelayServicePutInventoryResponse{AcceptedGeneration: res.Generation, Index: res.Index, Changed: res.Changed}, nil
}

func (r *relayService) ImportFabricScan(ctx context.Context, req *ginv1.RelayServiceImportFabricScanRequest) (*ginv1.RelayServiceImportFabricScanResponse, error) {
	if err := inventory.ValidNodeName(req.GetNodeName()); err != nil {
		return nil, toStatus(invalidf("node_name", "%v", err))
	}
	if err := r.leading(); err != nil {
		return nil, toStatus(err)
	}
	idx, err := r.s.importFabricScanHere(ctx, req.GetNodeName(), req.GetScan())
	if err != nil {
		return nil, toStatus(err)
	}
	return &ginv1.RelayServiceImportFabricScanResponse{Index: idx}, nil
}

func (r *relayService) ReportSessions(ctx context.Context, req *ginv1.ReportSessionsRequest) (*ginv1.ReportSessionsResponse, error) {
	id := req.GetServerId()
	if _, ok := r.s.store.Server(id); !ok {
		return nil, toStatus(invalidf("server_id", "%q is not a registered master", id))
	}
	if peer, ok := authz.Identity(ctx); ok && peer.Name != id {
		return nil, toStatus(&forbidden{msg: fmt.Sprintf("a report for master %q with the certificate of %s: a master reports only its own sessions", id, peer)})
	}
	if len(req.GetNodes()) != len(req.GetAgesMs()) {
		return nil, toStatus(invalidf("ages_ms", "%d ages for %d nodes", len(req.GetAgesMs()), len(req.GetNodes())))
	}
	if len(req.GetNodes()) > r.s.cfg.MaxNodes {
		return nil, toStatus(invalidf("nodes", "%d nodes, more than gin-master --max-nodes (%d)", len(req.GetNodes()), r.s.cfg.MaxNodes))
	}
	for i, n := range req.GetNodes() {
		if err := inventory.ValidNodeName(n); err != nil {
			return nil, toStatus(invalidf(fmt.Sprintf("nodes[%d]", i), "%v", err))
		}
	}
	if err := r.leading(); err != nil {
		return nil, toStatus(err)
	}
	r.s.live.report(ctx, id, req.GetNodes(), req.GetAgesMs())
	r.s.refreshScanner()
	return &ginv1.ReportSessionsResponse{FabricScanner: r.s.scanner()}, nil
}

// leading refuses a relay on a master that does not lead (the caller
// retries with the leader the hint names).
func (r *relayService) leading() error {
	if err := r.s.outdated(); err != nil {
		return err
	}
	if !r.s.node.IsLeader() {
		return r.s.notLeaderErr()
	}
	return nil
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
	return s.putInventoryBound(ctx, inv, binding)
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
	return s.importFabric(ctx, scan)
}
