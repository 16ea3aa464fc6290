package master

import (
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gin-topology/gin/internal/authz"
	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/ratelog"
)

// memberRefusals counts and logs the master-to-master gRPC calls refused
// because their master certificate names no server of the Raft
// configuration (memberOnly).
type memberRefusals struct {
	counter *prometheus.CounterVec
	// log bounds the lines: any master certificate the CA ever issued can
	// cause one per call.
	log *ratelog.Bucket
}

func newMemberRefusals() memberRefusals {
	return memberRefusals{
		counter: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gin_master_member_calls_refused_total",
			Help: "RelayService calls refused because their master certificate names no server of the current Raft configuration (a master that never joined, or was removed), by method.",
		}, []string{"method"}),
		log: ratelog.New(1, 10, nil),
	}
}

// memberOnly refuses a call made with a master certificate whose name is
// not a server of this master's current Raft configuration. Invariant:
// what other masters relay (agents' inventories, fabric scans, session
// reports) is taken only from the members themselves: a master certificate
// proves only that the CA issued it once, not that its holder belongs to
// the cluster now. Without TLS (no identity) nothing is bound.
func (s *Server) memberOnly(ctx context.Context, method string) error {
	id, ok := authz.Identity(ctx)
	if !ok || id.Role != pki.RoleMaster {
		return nil
	}
	if s.node.IsMember(id.Name) {
		return nil
	}
	refusals := s.metrics.members
	refusals.counter.WithLabelValues(method).Inc()
	members := s.node.MemberIDs()
	if ok, skipped := refusals.log.Allow(); ok {
		s.log.Warn("refused a relayed call: its master certificate is not a server of the Raft configuration",
			"method", method, "certificate", id.String(), "members", strings.Join(members, ","), "suppressed", skipped)
	}
	return &forbidden{msg: fmt.Sprintf("%s with the certificate of %s: %s is not a server of this cluster's Raft configuration (%s); only members relay, a new master joins first (an admin runs ginctl members add %s)",
		method, id, id.Name, strings.Join(members, ", "), id.Name)}
}
