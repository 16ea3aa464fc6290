package agent

import (
	"log/slog"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// PlanSink keeps the plans the master pushes (internal/nodeplans.Store).
type PlanSink interface {
	Put(p *ginv1.Plan) error
}

// onPlan hands a pushed plan to the node's plan store. A plan the store
// refuses (fails verification, differs from the one it holds for the job)
// is logged and dropped: it never ends the session.
func (s *session) onPlan(p *ginv1.Plan) {
	if s.a.cfg.Plans == nil {
		return
	}
	if err := s.a.cfg.Plans.Put(p); err != nil {
		s.log.Warn("pushed plan not kept", slog.String("job", p.GetJobId()), slog.Any("err", err))
		return
	}
	s.log.Info("pushed plan kept", slog.String("job", p.GetJobId()), slog.String("hash", p.GetContentHash()))
}
