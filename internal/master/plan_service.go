package master

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	"google.golang.org/protobuf/types/known/timestamppb"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/authz"
	"github.com/gin-topology/gin/internal/calib"
	"github.com/gin-topology/gin/internal/hostlist"
	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/plan"
	"github.com/gin-topology/gin/internal/state"
)

// Plan limits.
const (
	DefaultPlanTTL = 7 * 24 * time.Hour
	MaxPlanTTL     = 90 * 24 * time.Hour
	maxJobIDLen    = 128
	// MaxPlanNodes bounds a job's node list.
	MaxPlanNodes = 16384
	// MaxAgentPlanTTL is the longest life of a plan an agent certificate
	// pins (the Slurm prolog's path, through the node's plan socket): the
	// default, so a prolog's plan outlives a week-long job, but no agent
	// pins for 90 days.
	MaxAgentPlanTTL = DefaultPlanTTL
	// MaxPlansPerAgentNode bounds the plans an agent certificate may pin
	// while that many pinned plans already name its node: a node runs a
	// few jobs at once and the epilog deletes each plan, so 256 is far
	// above real use (144 ten-minute jobs a day with a failing epilog)
	// and keeps one agent from filling --max-plans (643 plans/s did).
	MaxPlansPerAgentNode = 256
)

// agentPlanShare is the part of --max-plans agent certificates may fill:
// the rest is kept for the scheduler's and admins' plans.
const agentPlanShare = 0.9

var jobIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)

func validJobID(id string) error {
	switch {
	case id == "":
		return invalidf("job_id", "is empty")
	case len(id) > maxJobIDLen:
		return invalidf("job_id", "is %d bytes, more than %d", len(id), maxJobIDLen)
	case !jobIDRE.MatchString(id):
		return invalidf("job_id", "%q has characters outside [A-Za-z0-9._:-]", id)
	}
	return nil
}

// planService is PlanService: plans pinned through Raft on the leader and
// read on any master, estimates, node orders and exports; on the leader it
// also deletes the plans past their expiry (a leader-only loop).
type planService struct {
	ginv1.UnimplementedPlanServiceServer
	store    *state.Store
	apply    applyFunc
	read     readFunc
	leading  leadingFunc
	maxPlans int // Config.MaxPlans
	log      *slog.Logger
	// creating collapses concurrent first requests for one job and one
	// placement (every rank of a job asks at once) into one computation
	// and one Raft write.
	creating singleflight.Group
}

func newPlanService(store *state.Store, apply applyFunc, read readFunc, leading leadingFunc, maxPlans int, log *slog.Logger) *planService {
	return &planService{store: store, apply: apply, read: read, leading: leading, maxPlans: maxPlans, log: log}
}

func (p *planService) GetOrCreatePlan(ctx context.Context, req *ginv1.GetOrCreatePlanRequest) (*ginv1.GetOrCreatePlanResponse, error) {
	if err := validJobID(req.GetJobId()); err != nil {
		return nil, toStatus(err)
	}
	if err := agentNamesItself(ctx, req.GetNodes()); err != nil {
		return nil, toStatus(err)
	}
	if pl, ok := p.store.Plan(req.GetJobId()); ok {
		if err := samePlacement(pl, req); err != nil {
			return nil, toStatus(err)
		}
		_, ri, err := p.read(ctx, ginv1.ReadConsistency_READ_CONSISTENCY_ANY)
		if err != nil {
			return nil, toStatus(err)
		}
		return &ginv1.GetOrCreatePlanResponse{Plan: pl, Read: ri}, nil
	}
	if err := p.leading(); err != nil {
		return nil, toStatus(err)
	}
	// Callers share a computation only when they ask for the same thing:
	// a placement keyed by job alone would hand the second caller the
	// first one's nodes.
	key := fmt.Sprintf("%s\x00%s\x00%d", req.GetJobId(), req.GetNodes(), req.GetGpusPerNode())
	v, err, _ := p.creating.Do(key, func() (any, error) {
		return p.create(context.WithoutCancel(ctx), req)
	})
	if err != nil {
		return nil, toStatus(err)
	}
	res := v.(*createResult)
	// The plan that won (this computation's, or one committed for the
	// job while it ran) is checked against this caller's request, as a
	// plan already held is.
	if err := samePlacement(res.plan, req); err != nil {
		return nil, toStatus(err)
	}
	_, ri, err := p.read(ctx, ginv1.ReadConsistency_READ_CONSISTENCY_ANY)
	if err != nil {
		return nil, toStatus(err)
	}
	// Callers that shared one computation: exactly one of them is told it
	// created the plan.
	created := res.created && res.claimed.CompareAndSwap(false, true)
	return &ginv1.GetOrCreatePlanResponse{Plan: res.plan, Created: created, Read: ri}, nil
}

type createResult struct {
	plan    *ginv1.Plan
	created bool
	claimed atomic.Bool
}

// create computes the plan on the leader and pins it through Raft. The
// first plan committed for a job wins; whoever lost the race gets it.
func (p *planService) create(ctx context.Context, req *ginv1.GetOrCreatePlanRequest) (*createResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if pl, ok := p.store.Plan(req.GetJobId()); ok {
		if err := samePlacement(pl, req); err != nil {
			return nil, err
		}
		return &createResult{plan: pl}, nil
	}
	if req.GetNodes() == "" {
		return nil, &notFound{msg: fmt.Sprintf("job %q has no plan", req.GetJobId())}
	}
	if _, n := p.store.Counts(); n >= p.maxPlans {
		return nil, exhaustedf(apierr.ReasonPlanLimit, "plan for job %q not pinned: %d plans are, the most gin-master --max-plans allows (%d); raise it or delete plans (ginctl plan delete --job ID)",
			req.GetJobId(), n, p.maxPlans)
	}
	nodes, err := expandNodes(req.GetNodes(), MaxPlanNodes, "a plan's nodes")
	if err != nil {
		return nil, err
	}
	if len(nodes) > MaxPlanNodes {
		return nil, invalidf("nodes", "%d nodes, more than %d", len(nodes), MaxPlanNodes)
	}
	ttl := DefaultPlanTTL
	if t := req.GetTtlSeconds(); t > 0 {
		ttl = time.Duration(t) * time.Second
		if ttl > MaxPlanTTL {
			return nil, invalidf("ttl_seconds", "%d s is more than %s", t, MaxPlanTTL)
		}
	}
	if err := p.agentQuota(ctx, req.GetJobId(), ttl); err != nil {
		return nil, err
	}
	view := p.store.View()
	var missing, down []string
	for _, n := range nodes {
		h, ok := view.Head(n)
		switch {
		case !ok:
			missing = append(missing, n)
		case h.State() != ginv1.NodeState_NODE_STATE_UP:
			down = append(down, n)
		}
	}
	if len(missing) > 0 {
		return nil, &notFound{what: fmt.Sprintf("node(s) %s", hostlist.Compress(missing))}
	}
	if len(down) > 0 {
		return nil, fmt.Errorf("%w: node(s) %s are not up", errFailedPrecondition, hostlist.Compress(down))
	}
	var ev plan.Evidence
	if ms := p.store.Measurements(); len(ms) > 0 {
		ev = calib.NewIndex(view.Graph, gpuModel(view), ms)
	}
	pl, err := plan.BuildWith(view.Graph, req.GetJobId(), nodes, int(req.GetGpusPerNode()), ev)
	if err != nil {
		return nil, invalidf("nodes", "%v", err)
	}
	now := time.Now()
	pl.CreatedAt, pl.ExpiresAt = timestamppb.New(now), timestamppb.New(now.Add(ttl))
	res, err := p.apply(ctx, &statev1.Command{Command: &statev1.Command_PutPlan{PutPlan: &statev1.PutPlan{Plan: pl}}})
	if err != nil {
		return nil, fmt.Errorf("pin plan for job %q: %w", req.GetJobId(), err)
	}
	stored, ok := p.store.Plan(req.GetJobId())
	if !ok {
		return nil, fmt.Errorf("pin plan for job %q: committed at %d but not in the state", req.GetJobId(), res.Index)
	}
	p.log.Info("plan pinned", "job", req.GetJobId(), "nodes", len(nodes), "rules", len(stored.GetRules()),
		"hash", stored.GetContentHash(), "index", stored.GetCreatedIndex(), "created", res.Changed)
	// Pushed to the agents of its nodes by every master's planPush (planpush.go).
	return &createResult{plan: stored, created: res.Changed}, nil
}

func (p *planService) GetPlan(ctx context.Context, req *ginv1.GetPlanRequest) (*ginv1.GetPlanResponse, error) {
	if err := validJobID(req.GetJobId()); err != nil {
		return nil, toStatus(err)
	}
	_, ri, err := p.read(ctx, req.GetConsistency())
	if err != nil {
		return nil, toStatus(err)
	}
	pl, ok := p.store.Plan(req.GetJobId())
	if !ok {
		return nil, toStatus(&notFound{what: fmt.Sprintf("plan for job %q", req.GetJobId())})
	}
	return &ginv1.GetPlanResponse{Plan: pl, Read: ri}, nil
}

func (p *planService) DeletePlan(ctx context.Context, req *ginv1.DeletePlanRequest) (*ginv1.DeletePlanResponse, error) {
	if err := validJobID(req.GetJobId()); err != nil {
		return nil, toStatus(err)
	}
	if _, ok := p.store.Plan(req.GetJobId()); !ok {
		return &ginv1.DeletePlanResponse{}, nil
	}
	res, err := p.apply(ctx, &statev1.Command{Command: &statev1.Command_DeletePlan{DeletePlan: &statev1.DeletePlan{JobId: req.GetJobId(), Reason: "deleted by request"}}})
	if err != nil {
		return nil, toStatus(err)
	}
	return &ginv1.DeletePlanResponse{Deleted: res.Changed, Index: res.Index}, nil
}

// expire deletes, on the leader, the plans past their expiry.
func (p *planService) expire(ctx context.Context, now time.Time) {
	for _, pl := range p.store.Plans() {
		if exp := pl.GetExpiresAt(); exp == nil || exp.AsTime().After(now) {
			continue
		}
		_, err := p.apply(ctx, &statev1.Command{Command: &statev1.Command_DeletePlan{DeletePlan: &statev1.DeletePlan{JobId: pl.GetJobId(), Reason: "expired"}}})
		if err != nil {
			p.log.Warn("plan expiry not committed", "job", pl.GetJobId(), "err", err)
			continue
		}
		p.log.Info("plan expired", "job", pl.GetJobId())
	}
}

// expiryLoop runs expire every interval (a leader-only loop).
func (p *planService) expiryLoop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			p.expire(ctx, now)
		}
	}
}

// samePlacement refuses a request for a job that already has a plan when
// the request names other nodes (as a set: the order may differ) or another
// GPU count per node: the first caller must not be able to squat a job's
// plan for a placement that is not the job's. A request naming no nodes,
// or 0 GPUs per node, asks for the plan as it is.
func samePlacement(pl *ginv1.Plan, req *ginv1.GetOrCreatePlanRequest) error {
	if req.GetNodes() != "" {
		nodes, err := expandNodes(req.GetNodes(), MaxPlanNodes, "a plan's nodes")
		if err != nil {
			return err
		}
		want := slices.Clone(pl.GetNodes())
		slices.Sort(want)
		slices.Sort(nodes)
		nodes = slices.Compact(nodes)
		if !slices.Equal(nodes, want) {
			return &precondition{msg: fmt.Sprintf("job %q already has a plan for nodes %s; this request names %s (delete the plan first if the job really moved)",
				req.GetJobId(), hostlist.Compress(pl.GetNodes()), hostlist.Compress(nodes))}
		}
	}
	if g := req.GetGpusPerNode(); g != 0 && pl.GetGpusPerNode() != 0 && g != pl.GetGpusPerNode() {
		return &precondition{msg: fmt.Sprintf("job %q already has a plan for %d GPUs per node; this request asks for %d", req.GetJobId(), pl.GetGpusPerNode(), g)}
	}
	return nil
}

// agentNamesItself: with TLS on, an agent (pinning a plan for a job on its
// node, through its plan socket) may only name placements that include the
// node its certificate names.
func agentNamesItself(ctx context.Context, expr string) error {
	id, ok := authz.Identity(ctx)
	if !ok || id.Role != pki.RoleAgent || expr == "" {
		return nil
	}
	nodes, err := expandNodes(expr, MaxPlanNodes, "a plan's nodes")
	if err != nil {
		return err
	}
	if !slices.Contains(nodes, id.Name) {
		return &forbidden{msg: fmt.Sprintf("%s may only ask for plans of jobs on its own node; %s does not include %s", id, expr, id.Name)}
	}
	return nil
}

// agentQuota refuses a new plan an agent certificate asks for past the
// agent's quotas, each refusal naming its bound: a TTL over
// MaxAgentPlanTTL, MaxPlansPerAgentNode plans already naming its node, or
// the store past agentPlanShare of --max-plans (the rest is kept for the
// scheduler and admins). Other callers (scheduler, admin, no TLS) are
// bound by --max-plans alone.
func (p *planService) agentQuota(ctx context.Context, job string, ttl time.Duration) error {
	id, ok := authz.Identity(ctx)
	if !ok || id.Role != pki.RoleAgent {
		return nil
	}
	if ttl > MaxAgentPlanTTL {
		return invalidf("ttl_seconds", "%s is more than an agent's plans may live (%s); a scheduler or admin certificate may pin longer", ttl, MaxAgentPlanTTL)
	}
	if n := p.store.PlansOnNode(id.Name); n >= MaxPlansPerAgentNode {
		return exhaustedf(apierr.ReasonAgentPlanLimit, "plan for job %q not pinned: %d pinned plans name node %s, the most its agent may add to (%d); the epilog deletes a job's plan (ginctl plan delete --job ID), or a scheduler or admin certificate may pin it",
			job, n, id.Name, MaxPlansPerAgentNode)
	}
	if _, n := p.store.Counts(); n >= int(float64(p.maxPlans)*agentPlanShare) {
		return exhaustedf(apierr.ReasonAgentPlanLimit, "plan for job %q not pinned: %d plans are, and agents may fill %.0f%% of gin-master --max-plans (%d); the rest is kept for the scheduler and admins",
			job, n, agentPlanShare*100, p.maxPlans)
	}
	return nil
}
