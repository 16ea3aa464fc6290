package state

import (
	"sort"

	"google.golang.org/protobuf/proto"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
)

// RegisterServer records a master's addresses; the latest registration of
// a server id wins. It uses up the server's admission (admission.go): a
// master registers once it is a member. A registration with
// keep_admission (the server was a member when its Join was checked) uses
// up none: an admission written after that check, by dead-server cleanup
// that removed the server meanwhile, is the one its next Join needs.
func (s *Store) RegisterServer(index uint64, cmd *statev1.RegisterServer) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bump(index)
	rec := proto.CloneOf(cmd)
	rec.KeepAdmission = false
	_, admitted := s.admissions[rec.GetServerId()]
	if cmd.GetKeepAdmission() {
		admitted = false
	} else {
		delete(s.admissions, rec.GetServerId())
	}
	if prev, ok := s.servers[rec.GetServerId()]; ok && proto.Equal(prev, rec) && !admitted {
		return Result{Index: index}, nil
	}
	if s.servers == nil {
		s.servers = map[string]*statev1.RegisterServer{}
	}
	s.servers[rec.GetServerId()] = rec
	return Result{Index: index, Changed: true}, nil
}

// SetClusterID sets the cluster id once; a later one is a no-op.
func (s *Store) SetClusterID(index uint64, cmd *statev1.SetClusterId) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bump(index)
	if s.clusterID != "" || cmd.GetClusterId() == "" {
		return Result{Index: index}, nil
	}
	s.clusterID = cmd.GetClusterId()
	return Result{Index: index, Changed: true}, nil
}

// ClusterID is the cluster's id ("" before it is set).
func (s *Store) ClusterID() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.clusterID
}

// Server returns a server's registered addresses.
func (s *Store) Server(id string) (*statev1.RegisterServer, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.servers[id]
	return r, ok
}

// Servers returns every registered server, by id.
func (s *Store) Servers() []*statev1.RegisterServer {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*statev1.RegisterServer, 0, len(s.servers))
	for _, r := range s.servers {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetServerId() < out[j].GetServerId() })
	return out
}
