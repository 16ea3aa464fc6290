package master

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/authz"
	ginraft "github.com/gin-topology/gin/internal/raft"
)

// Joining needs an admin's word. Invariant: the leader adds a server to
// the Raft configuration only when it is a member already (a restart or a
// follower registering its addresses: Join is idempotent for it) or an
// admission for its id is in the replicated state (ginctl members add
// NAME [--address A]: AdmitServer). The admission is used up when the
// server registers (the last step of its Join), and RemoveServer takes any
// back, so a removed master's name opens nothing until an admin admits it
// again. The cluster id, which any reader may read, is no credential.
// First boot needs no admission: --bootstrap-expect puts every listed
// master in the first configuration. Dead-server cleanup (autopilot.go)
// admits the server it removed, so a master that was only cut off comes
// back by itself as before.

// autopilotAdmitter is admitted_by of the admissions dead-server cleanup
// writes.
const autopilotAdmitter = "dead-server cleanup"

func (a *adminService) AdmitServer(ctx context.Context, req *ginv1.AdmitServerRequest) (*ginv1.AdmitServerResponse, error) {
	if err := ginraft.ValidateServerID(req.GetServerId()); err != nil {
		return nil, toStatus(invalidf("server_id", "%v", err))
	}
	if addr := req.GetRaftAddress(); addr != "" {
		if len(addr) > 256 {
			return nil, toStatus(invalidf("raft_address", "longer than 256 bytes"))
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, toStatus(invalidf("raft_address", "%v (want HOST:PORT)", err))
		}
	}
	if err := a.leading(); err != nil {
		return nil, toStatus(err)
	}
	if a.node.IsMember(req.GetServerId()) {
		return nil, toStatus(&precondition{msg: fmt.Sprintf("%s is a member already; a member needs no admission (to move it, remove it first: ginctl members remove %s)", req.GetServerId(), req.GetServerId())})
	}
	by := ""
	if id, ok := authz.Identity(ctx); ok {
		by = id.String()
	}
	res, err := a.apply(ctx, &statev1.Command{Command: &statev1.Command_AdmitServer{AdmitServer: &statev1.AdmitServer{
		ServerId: req.GetServerId(), RaftAddress: req.GetRaftAddress(), AdmittedBy: by,
	}}})
	if err != nil {
		return nil, toStatus(err)
	}
	a.log.Info("server admitted to join", slog.String("member", req.GetServerId()), slog.String("raft", req.GetRaftAddress()), slog.String("by", by))
	return &ginv1.AdmitServerResponse{Index: res.Index}, nil
}

// joinCheck is what Join's checks decide on: the request and the one Raft
// configuration they all read.
type joinCheck struct {
	req     *ginv1.JoinRequest
	members []ginraft.Member
}

func (j joinCheck) find(id string) (ginraft.Member, bool) {
	for _, m := range j.members {
		if m.ID == id {
			return m, true
		}
	}
	return ginraft.Member{}, false
}

// member: the joining server is in the configuration already.
func (j joinCheck) member() bool {
	_, ok := j.find(j.req.GetServerId())
	return ok
}

// checkJoinAdmitted refuses a Join from a server that is neither a member
// nor admitted, or admitted at another Raft address.
func (a *adminService) checkJoinAdmitted(j joinCheck) error {
	req := j.req
	id := req.GetServerId()
	if j.member() {
		return nil
	}
	adm, ok := a.store.Admission(id)
	if !ok {
		return &precondition{msg: fmt.Sprintf("server %s is not a member and no admin admitted it: joining needs an admin's word (ginctl members add %s [--address %s]); it joins on its next try", id, id, req.GetRaftAddress())}
	}
	if want := adm.GetRaftAddress(); want != "" && want != req.GetRaftAddress() {
		return &precondition{msg: fmt.Sprintf("server %s was admitted at Raft address %s, this join names %s", id, want, req.GetRaftAddress())}
	}
	return nil
}

// revokeAdmission takes back id's admission, if any (RemoveServer: a
// removed master's name opens nothing).
func (a *adminService) revokeAdmission(ctx context.Context, id string) error {
	if _, ok := a.store.Admission(id); !ok {
		return nil
	}
	_, err := a.apply(ctx, &statev1.Command{Command: &statev1.Command_AdmitServer{AdmitServer: &statev1.AdmitServer{ServerId: id, Revoke: true}}})
	return err
}

// readmitCleanedUp admits a server dead-server cleanup removed (at any
// address: it may come back on a new port), so that it rejoins by itself.
func (s *Server) readmitCleanedUp(ctx context.Context, id string) {
	if _, err := s.apply(ctx, &statev1.Command{Command: &statev1.Command_AdmitServer{AdmitServer: &statev1.AdmitServer{ServerId: id, AdmittedBy: autopilotAdmitter}}}); err != nil {
		s.log.Warn("a server removed by dead-server cleanup was not admitted again; it rejoins once an admin runs ginctl members add", "member", id, "err", err)
	}
}
