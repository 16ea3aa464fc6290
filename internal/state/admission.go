package state

import (
	"errors"
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
)

// MaxAdmissions bounds the masters admitted and not yet registered (a
// cluster has a handful of masters; the bound keeps a stream of admissions
// from growing the state without limit).
const MaxAdmissions = 64

// ErrTooManyAdmissions: MaxAdmissions masters are admitted and not joined.
var ErrTooManyAdmissions = errors.New("too many masters admitted and not joined")

// AdmitServer records (or, with revoke, takes back) an admin's word that a
// master may join. The latest admission of a server id wins; RegisterServer
// of that id uses it up. Past MaxAdmissions a new id is refused.
func (s *Store) AdmitServer(index uint64, cmd *statev1.AdmitServer) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bump(index)
	id := cmd.GetServerId()
	prev, ok := s.admissions[id]
	if cmd.GetRevoke() {
		if !ok {
			return Result{Index: index}, nil
		}
		delete(s.admissions, id)
		return Result{Index: index, Changed: true}, nil
	}
	if ok && proto.Equal(prev, cmd) {
		return Result{Index: index}, nil
	}
	if !ok && len(s.admissions) >= MaxAdmissions {
		return Result{Index: index}, fmt.Errorf("%w: %d (at most %d): revoke one (ginctl members remove ID) or let them join first", ErrTooManyAdmissions, len(s.admissions), MaxAdmissions)
	}
	if s.admissions == nil {
		s.admissions = map[string]*statev1.AdmitServer{}
	}
	s.admissions[id] = proto.CloneOf(cmd)
	return Result{Index: index, Changed: true}, nil
}

// Admission returns the admission of server id, if any.
func (s *Store) Admission(id string) (*statev1.AdmitServer, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	a, ok := s.admissions[id]
	return a, ok
}

// Admissions returns every admission, by server id.
func (s *Store) Admissions() []*statev1.AdmitServer {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*statev1.AdmitServer, 0, len(s.admissions))
	for _, a := range s.admissions {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetServerId() < out[j].GetServerId() })
	return out
}
