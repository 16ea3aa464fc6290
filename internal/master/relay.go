package master

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
)

// Agents attach to any master. What must be replicated (inventories,
// deltas, fabric scans) the master holding the session commits itself when
// it leads and otherwise relays to the leader (RelayService, master
// certificates only); the agent's ack is sent once the leader has answered,
// that is once the entry is committed. Heartbeats never leave the master
// that holds the session (sessions.go, reports.go).

// errNoLeader: this master knows no leader to relay to (an election).
var errNoLeader = errors.New("no leader known to relay to")

// errRelayTimedOut: the leader did not answer a relay in time (UNAVAILABLE:
// the agent moves on and says hello elsewhere).
var errRelayTimedOut = errors.New("relay to the leader timed out")

// relayRetryWait is the pause between relay attempts while the leader is
// unknown, unreachable or moving.
const relayRetryWait = 50 * time.Millisecond

// onLeader runs local while this master leads and remote on the leader
// otherwise, retrying while the leader is unknown, unreachable or has just
// moved (every relayed write is idempotent), until ctx ends. Any other
// answer of the leader is returned as it is (a gRPC status: the agent sees
// the leader's refusal, field and all).
func (s *Server) onLeader(ctx context.Context, local func() error, remote func(context.Context, ginv1.RelayServiceClient) error) error {
	var last error
	for {
		if s.node.IsLeader() {
			return local()
		}
		c, err := s.link.relay()
		if err == nil {
			err = remote(ctx, c)
			if err == nil || !relayRetryable(err) {
				return err
			}
		}
		last = err
		t := time.NewTimer(relayRetryWait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (%v; last attempt: %v)", errRelayTimedOut, ctx.Err(), last)
		case <-t.C:
		}
	}
}

// relayRetryable: the leader is unknown, unreachable or elsewhere now.
func relayRetryable(err error) bool {
	if errors.Is(err, errNoLeader) || apierr.IsNotLeader(err) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// relayTimeout bounds one relayed write: less than the agent's silence
// timeout (max(4 heartbeats, 10 s)), so the session ends with UNAVAILABLE
// and the agent moves on before it gives up on the master itself.
func (s *Server) relayTimeout() time.Duration {
	return reattachGrace(s.cfg.HeartbeatInterval) / 2
}

// commitInventory commits a node's full inventory or delta (exactly one is
// set) sent on a session of this master, here or through the leader.
func (s *Server) commitInventory(ctx context.Context, name, machineID string, inv *ginv1.NodeInventory, delta *ginv1.InventoryDelta) (resultWithGen, error) {
	binding := sessionBinding(ctx) // the agent's certificate, verified here
	ctx, cancel := context.WithTimeout(ctx, s.relayTimeout())
	defer cancel()
	var res resultWithGen
	err := s.onLeader(ctx, func() error {
		var err error
		res, err = s.commitInventoryHere(ctx, name, machineID, inv, delta, binding)
		return err
	}, func(ctx context.Context, c ginv1.RelayServiceClient) error {
		req := &ginv1.RelayServicePutInventoryRequest{NodeName: name, MachineId: machineID, ServerId: s.cfg.ID}
		if binding != nil {
			req.AgentCertificate = &ginv1.AgentCertificate{Identity: binding.GetIdentity(), CaKeySha256: binding.GetCaKeySha256(), Serial: binding.GetSerial()}
		}
		if delta != nil {
			req.Update = &ginv1.RelayServicePutInventoryRequest_Delta{Delta: delta}
		} else {
			req.Update = &ginv1.RelayServicePutInventoryRequest_Inventory{Inventory: inv}
		}
		r, err := c.PutInventory(ctx, req)
		if err != nil {
			return err
		}
		res = resultWithGen{Index: r.GetIndex(), Generation: r.GetAcceptedGeneration(), Changed: r.GetChanged()}
		return nil
	})
	return res, err
}

// commitFabricScan imports the scan of node's agent, here or through the
// leader (which checks that node is the scanner it named).
func (s *Server) commitFabricScan(ctx context.Context, node string, scan *ginv1.FabricTopology) error {
	ctx, cancel := context.WithTimeout(ctx, s.relayTimeout())
	defer cancel()
	return s.onLeader(ctx, func() error {
		_, err := s.importFabricScanHere(ctx, node, scan)
		return err
	}, func(ctx context.Context, c ginv1.RelayServiceClient) error {
		_, err := c.ImportFabricScan(ctx, &ginv1.RelayServiceImportFabricScanRequest{NodeName: node, Scan: scan})
		return err
	})
}
