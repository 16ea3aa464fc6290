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
	countPlanNodes(s.plansOnNode, stored, 1)
	s.watchers.publish(Event{Index: index, Kind: ginv1.WatchEventKind_WATCH_EVENT_KIND_PLAN_PINNED, Job: p.GetJobId(), At: eventTime(p.GetCreatedAt())})
	return Result{Index: index, Changed: true}, nil
}

// DeletePlan removes a job's plan; a no-op when the job has none.
func (s *Store) DeletePlan(index uint64, cmd *statev1.DeletePlan) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bump(index)
	old, ok := s.plans[cmd.GetJobId()]
	if !ok {
		return Result{Index: index}, nil
	}
	delete(s.plans, cmd.GetJobId())
	countPlanNodes(s.plansOnNode, old, -1)
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

// PlansOnNode is how many pinned plans name node among their nodes (the
// per-node quota of plans an agent may pin, internal/master).
func (s *Store) PlansOnNode(node string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.plansOnNode[node]
}

// countPlanNodes adds d to the count of each distinct node of p.
func countPlanNodes(m map[string]int, p *ginv1.Plan, d int) {
	seen := make(map[string]struct{}, len(p.GetNodes()))
	for _, n := range p.GetNodes() {
		if _, dup := seen[n]; dup {
			continue // a node named twice counts once
		}
		seen[n] = struct{}{}
		if m[n] += d; m[n] <= 0 {
			delete(m, n)
		}
	}
}
