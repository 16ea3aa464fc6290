package state

import (
	"fmt"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// DeleteNode removes a node's record (and so its binding) and takes it out
// of the graph; a no-op when absent. The name can then be registered again
// by any machine or certificate.
func (s *Store) DeleteNode(index uint64, cmd *statev1.DeleteNode) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bump(index)
	name := cmd.GetNodeName()
	if _, ok := s.nodes[name]; !ok {
		return Result{Index: index}, nil
	}
	delete(s.nodes, name)
	s.graph = s.graph.WithoutNode(name)
	s.watchers.publish(Event{Index: index, Kind: ginv1.WatchEventKind_WATCH_EVENT_KIND_NODE_DELETED, Node: name, At: eventTime(cmd.GetAt()), Reason: "deleted by request"})
	return Result{Index: index, Changed: true}, nil
}

// CheckBinding is the rule for a node's certificate binding, applied by the
// master when an agent attaches and by the FSM to every inventory: a node
// registered over TLS (held set) accepts only the same identity issued by
// the same CA key. A node registered without TLS, or a write without a
// certificate (a plaintext master, entries written before bindings), is
// not checked. A renewed certificate (new serial, same CA) passes.
func CheckBinding(node string, held, now *statev1.NodeBinding) error {
	if held.GetIdentity() == "" || now.GetIdentity() == "" {
		return nil
	}
	if held.GetIdentity() != now.GetIdentity() {
		return fmt.Errorf("%w: node %q is bound to %s, not %s; `ginctl node delete %s` frees the name", ErrIdentityConflict, node, held.GetIdentity(), now.GetIdentity(), node)
	}
	if held.GetCaKeySha256() != now.GetCaKeySha256() {
		return fmt.Errorf("%w: node %q was registered with a certificate of another CA (key sha256 %.16s…, this one %.16s…); `ginctl node delete %s` frees the name",
			ErrIdentityConflict, node, held.GetCaKeySha256(), now.GetCaKeySha256(), node)
	}
	return nil
}
