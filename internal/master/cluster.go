package master

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"time"

	"google.golang.org/grpc"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/authz"
	"github.com/gin-topology/gin/internal/pki"
	ginraft "github.com/gin-topology/gin/internal/raft"
)

// formCluster makes this server a member of its cluster, retrying until it
// is one or ctx ends, so that one command line serves first boot, restart
// and scale-up:
//   - a server with Raft state (restart) only registers its addresses;
//   - a fresh server whose --join peers already have a leader asks it to
//     add this server (scale-up);
//   - with --bootstrap-expect N, once N fresh servers (this one included)
//     see each other, the one with the smallest id bootstraps them all.
//
// Once a member, it keeps checking every membershipCheck: a server removed
// from the configuration while it was running (dead-server cleanup during
// a partition) knows no leader afterwards while its peers do, and joins
// again without a restart.
func (s *Server) formCluster(ctx context.Context) {
	wait := 200 * time.Millisecond
	member := false
	for {
		done, err := s.formOnce(ctx)
		if err != nil {
			s.log.Info("forming the cluster", "err", err)
		}
		switch {
		case done:
			if !member {
				s.log.Info("member of the cluster")
			}
			member, wait = true, membershipCheck
		case member:
			wait = membershipCheck
		default:
			wait = min(2*wait, 5*time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// membershipCheck is how often a member re-checks that it still is one.
const membershipCheck = time.Second

func (s *Server) formOnce(ctx context.Context) (bool, error) {
	if s.node.HasState() {
		if id, _ := s.node.Leader(); id == "" {
			// No leader: an election is running, or this server was removed
			// from the configuration while it was away; then its peers have a
			// leader and it joins again.
			for _, addr := range s.cfg.Join {
				if info, err := s.peerInfo(ctx, addr); err == nil && info.GetLeaderAddress() != "" && info.GetLeaderId() != s.cfg.ID {
					return s.joinVia(ctx, info.GetLeaderAddress())
				}
			}
			return false, nil
		}
		return s.registerSelf(ctx)
	}
	if len(s.cfg.Join) == 0 {
		return false, fmt.Errorf("no Raft state and no --join peers: start with --bootstrap-expect 1 or --join")
	}
	type peer struct{ id, raft string }
	peers := map[string]peer{s.cfg.ID: {s.cfg.ID, s.node.Addr()}}
	var lastErr error
	var expect []ginraft.Member
	for _, addr := range s.cfg.Join {
		info, err := s.peerInfo(ctx, addr)
		if err != nil {
			lastErr = err
			continue
		}
		if id := info.GetServerId(); id != "" && id != s.cfg.ID && info.GetRaftAddress() != "" {
			expect = append(expect, ginraft.Member{ID: id, Address: info.GetRaftAddress(), Voter: true})
		}
		if info.GetLeaderAddress() != "" {
			return s.joinVia(ctx, info.GetLeaderAddress())
		}
		if info.GetHasState() {
			lastErr = fmt.Errorf("%s is in a cluster that has no leader now", addr)
			continue
		}
		if info.GetServerId() != "" && info.GetRaftAddress() != "" {
			peers[info.GetServerId()] = peer{info.GetServerId(), info.GetRaftAddress()}
		}
	}
	// The servers found at --join may bootstrap this one (the smallest
	// id of the fresh ones does, and then asks for votes as a candidate
	// with state): only they may send its first configuration.
	s.node.ExpectPeers(expect)
	if s.cfg.BootstrapExpect <= 1 || len(peers) < s.cfg.BootstrapExpect {
		if lastErr == nil {
			lastErr = fmt.Errorf("%d of %d expected servers seen", len(peers), s.cfg.BootstrapExpect)
		}
		return false, lastErr
	}
	ids := make([]string, 0, len(peers))
	for id := range peers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if ids[0] != s.cfg.ID {
		return false, fmt.Errorf("waiting for %s to bootstrap the cluster", ids[0])
	}
	var members []ginraft.Member
	for _, id := range ids[:s.cfg.BootstrapExpect] {
		members = append(members, ginraft.Member{ID: id, Address: peers[id].raft, Voter: true})
	}
	if err := s.node.BootstrapCluster(members); err != nil {
		return false, err
	}
	s.log.Info("bootstrapped the cluster", "voters", ids[:s.cfg.BootstrapExpect])
	return false, nil // register once a leader is elected
}

// peerInfo asks a master (by client address) for its cluster state.
func (s *Server) peerInfo(ctx context.Context, addr string) (*ginv1.GetClusterInfoResponse, error) {
	conn, err := grpc.NewClient(addr, s.dialCredentials())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return ginv1.NewAdminServiceClient(conn).GetClusterInfo(cctx, &ginv1.GetClusterInfoRequest{})
}

// dialPeer connects to another master (by client address) as this
// master: for cluster formation here, and for the leader's wait on its
// followers' progress (appliedwait.go).
func (s *Server) dialPeer(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, s.dialCredentials())
}

// joinVia asks the leader at addr to add this server.
func (s *Server) joinVia(ctx context.Context, addr string) (bool, error) {
	conn, err := grpc.NewClient(addr, s.dialCredentials())
	if err != nil {
		return false, err
	}
	defer conn.Close()
	cid := s.store.ClusterID()
	if cid == "" || !s.node.HasState() {
		// A fresh server (or a member whose state has not caught up) names
		// the cluster the leader it was pointed at reports, and takes its
		// first configuration from that leader only (its certificate's
		// name and Raft address): any other master certificate of the CA
		// could plant one of its own (rpcguard.go). A leader that changes
		// before it sends is refused; the next try joins via the new one.
		info, err := s.peerInfo(ctx, addr)
		if err != nil {
			return false, fmt.Errorf("cluster id from %s: %w", addr, err)
		}
		if cid == "" {
			cid = info.GetClusterId()
		}
		if !s.node.HasState() {
			s.node.ExpectPeers([]ginraft.Member{{ID: info.GetServerId(), Address: info.GetRaftAddress(), Voter: true}})
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	resp, err := ginv1.NewAdminServiceClient(conn).Join(cctx, &ginv1.JoinRequest{
		ServerId: s.cfg.ID, RaftAddress: s.node.Addr(), ClientAddress: s.cfg.Advertise, ClusterId: cid, HttpAddress: s.httpAdvertise(),
	})
	if err != nil {
		return false, fmt.Errorf("join via %s: %w", addr, err)
	}
	s.log.Info("joined the cluster", "via", addr, "cluster_id", resp.GetClusterId(), "index", resp.GetIndex())
	return true, nil
}

// registerSelf makes sure the replicated state knows this server's client
// address (the leader applies it; a follower asks the leader through Join,
// which is idempotent for an existing voter).
func (s *Server) registerSelf(ctx context.Context) (bool, error) {
	if r, ok := s.store.Server(s.cfg.ID); ok && r.GetClientAddress() == s.cfg.Advertise && r.GetRaftAddress() == s.node.Addr() && r.GetHttpAddress() == s.httpAdvertise() {
		return true, nil
	}
	if s.node.IsLeader() {
		// The leader is a member: its own registration uses up no admission.
		_, err := s.apply(ctx, &statev1.Command{Command: &statev1.Command_RegisterServer{RegisterServer: &statev1.RegisterServer{
			ServerId: s.cfg.ID, ClientAddress: s.cfg.Advertise, RaftAddress: s.node.Addr(), HttpAddress: s.httpAdvertise(),
			KeepAdmission: true,
		}}})
		return err == nil, err
	}
	hint := s.leaderHint()
	if hint == "" {
		return false, fmt.Errorf("the leader has not registered its client address yet")
	}
	return s.joinVia(ctx, hint)
}

// onLeadership runs once per term, as a leader-only task: it sets the
// cluster id when the cluster has none and registers this server.
func (s *Server) onLeadership(ctx context.Context) {
	if s.store.ClusterID() == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		if _, err := s.apply(ctx, &statev1.Command{Command: &statev1.Command_SetClusterId{SetClusterId: &statev1.SetClusterId{ClusterId: hex.EncodeToString(b)}}}); err != nil {
			s.log.Warn("cluster id not set", "err", err)
		}
	}
	if _, err := s.registerSelf(ctx); err != nil {
		s.log.Warn("leader registration not committed", "err", err)
	}
}

func (a *adminService) Join(ctx context.Context, req *ginv1.JoinRequest) (*ginv1.JoinResponse, error) {
	switch {
	case ginraft.ValidateServerID(req.GetServerId()) != nil:
		return nil, toStatus(invalidf("server_id", "must be 1..%d bytes", ginraft.MaxServerIDLen))
	case req.GetRaftAddress() == "" || len(req.GetRaftAddress()) > 256:
		return nil, toStatus(invalidf("raft_address", "must be 1..256 bytes"))
	case len(req.GetClientAddress()) > 256:
		return nil, toStatus(invalidf("client_address", "longer than 256 bytes"))
	case len(req.GetHttpAddress()) > 256:
		return nil, toStatus(invalidf("http_address", "longer than 256 bytes"))
	}
	if id, ok := authz.Identity(ctx); ok && id.Name != req.GetServerId() {
		// With TLS on only masters reach Join (the table); one joins as
		// the server its certificate names, never as another.
		return nil, toStatus(&forbidden{msg: fmt.Sprintf("join as server %q with the certificate of %s: a master joins only as the server its certificate names", req.GetServerId(), id)})
	}
	if err := a.leading(); err != nil {
		return nil, toStatus(err)
	}
	// The checks below read the leader's state, the one that decides, and
	// one configuration: the voter is added to that configuration only
	// (AddVoter's prevIndex), so a removal committed meanwhile makes this
	// Join fail and the next one decide again.
	members, confIndex, err := a.node.Membership()
	if err != nil {
		return nil, toStatus(err)
	}
	j := joinCheck{req: req, members: members}
	for _, check := range []func(joinCheck) error{a.checkJoinClusterID, a.checkJoinAddresses, a.checkJoinAdmitted /* joinadmission.go */} {
		if err := check(j); err != nil {
			a.log.Warn("join refused", "member", req.GetServerId(), "err", err)
			return nil, toStatus(err)
		}
	}
	if err := a.dialRaft(ctx, req.GetServerId(), req.GetRaftAddress()); err != nil {
		a.log.Warn("join refused: raft address unreachable", "member", req.GetServerId(), "raft", req.GetRaftAddress(), "err", err)
		return nil, toStatus(&precondition{msg: fmt.Sprintf("server %s: its raft address %s cannot be dialled (%v): a server that cannot be reached is not added", req.GetServerId(), req.GetRaftAddress(), err)})
	}
	if err := a.node.AddVoter(ctx, req.GetServerId(), req.GetRaftAddress(), confIndex); err != nil {
		return nil, toStatus(fmt.Errorf("join of server %s: %w", req.GetServerId(), err))
	}
	// A member's registration uses up no admission: one written after the
	// check above (dead-server cleanup removing and readmitting it while
	// this Join ran) is for the Join that brings it back.
	res, err := a.apply(ctx, &statev1.Command{Command: &statev1.Command_RegisterServer{RegisterServer: &statev1.RegisterServer{
		ServerId: req.GetServerId(), ClientAddress: req.GetClientAddress(), RaftAddress: req.GetRaftAddress(), HttpAddress: req.GetHttpAddress(),
		KeepAdmission: j.member(),
	}}})
	if err != nil {
		return nil, toStatus(err)
	}
	a.log.Info("server joined", slog.String("member", req.GetServerId()), slog.String("raft", req.GetRaftAddress()), slog.String("client", req.GetClientAddress()))
	return &ginv1.JoinResponse{ClusterId: a.store.ClusterID(), Index: res.Index}, nil
}

// checkJoinClusterID refuses a Join that names another cluster, or none
// once this cluster has an id. A fresh cluster has no id until its first
// leader sets one (onLeadership): then only a joiner naming no id is
// accepted, since one naming an id comes from another cluster.
func (a *adminService) checkJoinClusterID(j joinCheck) error {
	req := j.req
	cid, its := a.store.ClusterID(), req.GetClusterId()
	switch {
	case cid == "" && its == "":
		return nil
	case cid == "":
		return &precondition{msg: fmt.Sprintf("server %s names cluster %s, this cluster has no id yet: it belongs to another cluster", req.GetServerId(), its)}
	case its == "":
		return &precondition{msg: fmt.Sprintf("server %s names no cluster id, this is cluster %s: a joining master must name it (gin-master learns it from its --join peers)", req.GetServerId(), cid)}
	case its != cid:
		return &precondition{msg: fmt.Sprintf("server %s belongs to cluster %s, this is cluster %s", req.GetServerId(), its, cid)}
	}
	return nil
}

// checkJoinAddresses refuses a Join that would change the Raft or client
// address of an existing server (one in the Raft configuration): that would let any caller reach by Join
// redirect the cluster's Raft traffic or the leader hints clients follow.
// A master that really moved (new IP) is removed first, then joins again:
// ginctl members remove ID.
func (a *adminService) checkJoinAddresses(j joinCheck) error {
	req := j.req
	id := req.GetServerId()
	moved := func(what, have, want string) error {
		return &precondition{msg: fmt.Sprintf("server %s is a member with %s %s, this join names %s: a Join never changes an existing server's address; if the master really moved, remove it first (ginctl members remove %s) and start it again", id, what, have, want, id)}
	}
	m, member := j.find(id)
	if member && m.Address != req.GetRaftAddress() {
		return moved("raft address", m.Address, req.GetRaftAddress())
	}
	// A server no longer in the configuration (removed by an operator or by
	// dead-server cleanup) may come back with new addresses: its record is
	// stale, and this Join replaces it.
	if r, ok := a.store.Server(id); ok && member {
		if r.GetRaftAddress() != "" && r.GetRaftAddress() != req.GetRaftAddress() {
			return moved("raft address", r.GetRaftAddress(), req.GetRaftAddress())
		}
		if r.GetClientAddress() != "" && r.GetClientAddress() != req.GetClientAddress() {
			return moved("client address", r.GetClientAddress(), req.GetClientAddress())
		}
	}
	return nil
}

// joinDialTimeout bounds the leader's check that a joining server answers
// on its Raft address.
const joinDialTimeout = 2 * time.Second

// dialRaft connects to a joining server's Raft address, so that a server
// nobody can reach is never added as a voter (each one would raise the
// quorum with a vote that never comes). Plaintext: a TCP connection. With
// TLS on: the Raft TLS handshake, which must show a master certificate of
// the cluster CA naming the joining server.
func (a *adminService) dialRaft(ctx context.Context, id, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, joinDialTimeout)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if a.tls == nil {
		return nil
	}
	isJoiner := func(peer pki.Identity) error {
		if err := pki.RequireRole(pki.RoleMaster)(peer); err != nil {
			return err
		}
		if peer.Name != id {
			return fmt.Errorf("the server there is %s, not %s", peer, id)
		}
		return nil
	}
	tc := tls.Client(c, pki.ClientConfig(a.tls, isJoiner))
	if err := tc.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("TLS: %w", err)
	}
	return nil
}

func (a *adminService) RemoveServer(ctx context.Context, req *ginv1.RemoveServerRequest) (*ginv1.RemoveServerResponse, error) {
	if req.GetServerId() == "" {
		return nil, toStatus(invalidf("server_id", "is empty"))
	}
	found, voter, voters := false, false, 0
	for _, m := range a.node.Stats().Members {
		if m.Voter {
			voters++
		}
		if m.ID == req.GetServerId() {
			found, voter = true, m.Voter
		}
	}
	if !found {
		if _, admitted := a.store.Admission(req.GetServerId()); admitted {
			// Admitted, not joined yet: removing it takes the admission back.
			if err := a.leading(); err != nil {
				return nil, toStatus(err)
			}
			if err := a.revokeAdmission(ctx, req.GetServerId()); err != nil {
				return nil, toStatus(err)
			}
			a.log.Info("admission revoked", "member", req.GetServerId())
			return &ginv1.RemoveServerResponse{Index: a.node.Stats().CommitIndex}, nil
		}
		return nil, toStatus(&notFound{what: fmt.Sprintf("server %q", req.GetServerId())})
	}
	if voter && voters == 1 {
		return nil, toStatus(&precondition{msg: fmt.Sprintf("%s is the cluster's only voter: without it no master could be elected; add another master (gin-master --join) before removing it", req.GetServerId())})
	}
	if err := a.leading(); err != nil {
		return nil, toStatus(err)
	}
	if err := a.node.RemoveServer(ctx, req.GetServerId()); err != nil {
		return nil, toStatus(err)
	}
	if err := a.revokeAdmission(ctx, req.GetServerId()); err != nil {
		return nil, toStatus(fmt.Errorf("server %s removed, but its admission was not revoked (run ginctl members remove %s again): %w", req.GetServerId(), req.GetServerId(), err))
	}
	a.log.Info("server removed", "member", req.GetServerId())
	return &ginv1.RemoveServerResponse{Index: a.node.Stats().CommitIndex}, nil
}
