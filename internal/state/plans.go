package state

import (
	"sort"
	"time"

	"google.golang.org/protobuf/proto"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// PutPlan pins a job's plan: the first plan written for a job wins and is
// never replaced; a later PutPlan for the same job is a no-op whose Result
// says Changed=false. The stored plan carries the index that pinned it.
func (s *Store) PutPlan(index uint64, cmd *statev1.PutPlan) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bump(index)
	p := cmd.GetPlan()
	if _, ok := s.plans[p.GetJobId()]; ok {
		return Result{Index: index}, nil
	}
	stored := proto.CloneOf(p)
	stored.CreatedIndex = index
	s.plans[p.GetJobId()] = stored
	s.watchers.publish(Event{Index: index, Kind: ginv1.WatchEventKind_WATCH_EVENT_KIND_PLAN_PINNED, Job: p.GetJobId(), At: eventTime(p.GetCreatedAt())})
	return Result{Index: index, Changed: true}, nil
}

// DeletePlan removes a job's plan; a no-op when the job has none.
func (s *Store) DeletePlan(index uint64, cmd *statev1.DeletePlan) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bump(index)
	if _, ok := s.plans[cmd.GetJobId()]; !ok {
		return Result{Index: index}, nil
	}
	delete(s.plans, cmd.GetJobId())
	s.watchers.publish(Event{Index: index, Kind: ginv1.WatchEventKind_WATCH_EVENT_KIND_PLAN_DELETED, Job: cmd.GetJobId(), Reason: cmd.GetReason(), At: time.Now()})
	return Result{Index: index, Changed: true}, nil
}

// Plan returns a job's pinned plan; callers must not modify it.
func (s *Store) Plan(job string) (*ginv1.Plan, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.plans[job]
	return p, ok
}

// Plans returns every pinned plan, by job id.
func (s *Store) Plans() []*ginv1.Plan {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*ginv1.Plan, 0, len(s.plans))
	for _, p := range s.plans {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetJobId() < out[j].GetJobId() })
	return out
}
