package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/masteraddr"
	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/planread"
	"github.com/gin-topology/gin/internal/plansock"
	"github.com/gin-topology/gin/internal/redirect"
)

type loaded struct {
	plan   *ginv1.Plan
	source string // "node agent unix:<path>", "master <addr>", "plan file <path>", "process cache"
	server string // where the plan was fetched from, for the Connected line, if anywhere
}

// memo keeps the last plan per job in the process, so that every further
// communicator of the process skips the socket and the network.
var memo struct {
	sync.Mutex
	m map[string]memoEntry
}

type memoEntry struct {
	plan   *ginv1.Plan
	server string
	at     time.Time
}

// loadPlan finds the job's plan within ctx: NCCL_GIN_PLAN_FILE when set;
// else the process memo; else the node's agent; else, only when no agent
// listens on the socket, the masters. Errors say why no plan could be had.
func loadPlan(ctx context.Context, cfg config, l logger) (*loaded, error) {
	if cfg.planFile != "" {
		p, err := readPlanFile(cfg.planFile)
		if err != nil {
			return nil, fmt.Errorf("NCCL_GIN_PLAN_FILE %s: %w", cfg.planFile, err)
		}
		if cfg.jobID != "" && p.GetJobId() != cfg.jobID {
			return nil, fmt.Errorf("NCCL_GIN_PLAN_FILE %s: plan is for job %q, not job %q (%s)", cfg.planFile, p.GetJobId(), cfg.jobID, cfg.jobIDVar)
		}
		return &loaded{plan: p, source: "plan file " + cfg.planFile}, nil
	}
	if cfg.jobID == "" {
		return nil, errors.New("no job id (SLURM_JOB_ID and NCCL_GIN_JOB_ID are unset)")
	}
	if e, ok := memoGet(cfg); ok {
		return &loaded{plan: e.plan, source: "process cache", server: e.server}, nil
	}
	var res *loaded
	var err error
	if cfg.agentSocket != "" {
		res, err = fromAgent(ctx, cfg)
		if err != nil && !errors.Is(err, errNoAgent) {
			return nil, err
		}
		if err != nil {
			l.Infof("GIN: %v; asking the masters", err)
		}
	}
	if res == nil {
		if res, err = fromMasters(ctx, cfg); err != nil {
			return nil, err
		}
	}
	memoPut(cfg, res)
	return res, nil
}

// errNoAgent says that no agent listens on the socket (none installed, or
// it is down): the only case in which a rank asks the masters itself.
var errNoAgent = errors.New("no node agent")

// fromAgent asks the node's agent. An agent that answers decides: its
// "no plan" is final for this rank (the masters are not asked), so that
// one node's ranks all get what their agent says.
func fromAgent(ctx context.Context, cfg config) (*loaded, error) {
	sock := cfg.agentSocket
	resp, err := plansock.Fetch(ctx, sock, plansock.Request{JobID: cfg.jobID, Nodes: cfg.nodes, GPUsPerNode: cfg.gpusPerNode})
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%w at %s (%v)", errNoAgent, sock, err)
		}
		return nil, fmt.Errorf("node agent %s: %w", sock, err)
	}
	if resp.Status != plansock.StatusOK {
		return nil, fmt.Errorf("node agent %s has no plan for job %s: %s: %s", sock, cfg.jobID, resp.Status, resp.Body)
	}
	p, err := planread.Decode(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("node agent %s: plan fails verification: %w", sock, err)
	}
	if p.GetJobId() != cfg.jobID || p.GetContentHash() != resp.Hash {
		return nil, fmt.Errorf("node agent %s sent plan %.12s of job %q for job %q (announced %.12s)", sock, p.GetContentHash(), p.GetJobId(), cfg.jobID, resp.Hash)
	}
	return &loaded{plan: p, source: "node agent unix:" + sock, server: "unix:" + sock + " (node agent)"}, nil
}

// fromMasters asks the masters directly (no agent on the node).
func fromMasters(ctx context.Context, cfg config) (*loaded, error) {
	if strings.TrimSpace(cfg.masterList) == "" {
		return nil, errors.New("no node agent and no master list (NCCL_GIN_MASTER_HOST and GIN_MASTER_HOST are unset)")
	}
	addrs, err := masteraddr.Parse(cfg.masterList)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.masterVar, err)
	}
	// Spread a job start's fetchers over the masters (any replica serves a
	// pinned plan); which master answers does not change the plan.
	if cfg.failover {
		addrs = rotate(addrs, os.Getpid())
	}
	return fetch(ctx, cfg, addrs)
}

func memoGet(cfg config) (memoEntry, bool) {
	memo.Lock()
	defer memo.Unlock()
	e, ok := memo.m[cfg.jobID]
	if !ok || cfg.cacheTimeout <= 0 || time.Since(e.at) >= cfg.cacheTimeout {
		return memoEntry{}, false
	}
	return e, true
}

func memoPut(cfg config, r *loaded) {
	memo.Lock()
	defer memo.Unlock()
	if memo.m == nil {
		memo.m = map[string]memoEntry{}
	}
	memo.m[cfg.jobID] = memoEntry{plan: r.plan, server: r.server, at: time.Now()}
}

// readPlanFile reads, decodes and verifies a serialized Plan. It opens the
// file without following a link and without blocking (a FIFO cannot hang
// the rank), then checks on the open descriptor that it is a regular file
// of at most planread.MaxBytes, owned by root or this user and not
// writable by everyone.
func readPlanFile(path string) (*ginv1.Plan, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, errors.New("is a symbolic link; not followed")
		}
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", st.Mode().Type())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid != 0 && int(sys.Uid) != os.Getuid() {
		return nil, fmt.Errorf("owned by uid %d, neither root nor this user", sys.Uid)
	}
	if st.Mode().Perm()&0o002 != 0 {
		return nil, fmt.Errorf("writable by every user (mode %v)", st.Mode().Perm())
	}
	if st.Size() > planread.MaxBytes {
		return nil, fmt.Errorf("%d bytes, more than the %d-byte limit", st.Size(), planread.MaxBytes)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, err
	}
	return decodePlan(b)
}

func decodePlan(b []byte) (*ginv1.Plan, error) {
	p, err := planread.Decode(b)
	if err != nil {
		if strings.Contains(err.Error(), "cannot decode") {
			return nil, err
		}
		return nil, fmt.Errorf("plan fails verification (corrupt or truncated, %d bytes): %v", len(b), err)
	}
	return p, nil
}

// rotate returns addrs starting at index k (mod their number).
func rotate(addrs []string, k int) []string {
	if len(addrs) < 2 {
		return addrs
	}
	k %= len(addrs)
	return append(append([]string(nil), addrs[k:]...), addrs[:k]...)
}

// fetch asks the masters for the job's plan (GetOrCreatePlan) through the
// one failover walk (internal/redirect): each in turn when failover is on
// (a follower forwards to the leader), each attempt given a share of what is left of
// ctx's deadline.
func fetch(ctx context.Context, cfg config, addrs []string) (*loaded, error) {
	opts := redirect.Options{ShareDeadline: true}
	if !cfg.failover {
		opts.MaxAttempts = 1
	}
	creds, err := masterCredentials(cfg)
	if err != nil {
		return nil, err
	}
	req := &ginv1.GetOrCreatePlanRequest{JobId: cfg.jobID, Nodes: cfg.nodes, GpusPerNode: cfg.gpusPerNode}
	var plan *ginv1.Plan
	addr, err := redirect.Do(ctx, addrs, opts, func(actx context.Context, addr string) error {
		p, err := fetchOne(actx, addr, creds, req)
		plan = p
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("no plan from the masters within %s: %w", cfg.initTimeout, err)
	}
	if plan.GetJobId() != cfg.jobID {
		return nil, fmt.Errorf("master %s sent a plan for job %q, not job %q", addr, plan.GetJobId(), cfg.jobID)
	}
	source := "master " + addr
	if creds.identity != "" {
		source += " over mTLS as " + creds.identity
	}
	return &loaded{plan: plan, source: source, server: addr}, nil
}

// dialCreds are how a rank dials the masters: plaintext without
// certificates; with them mutual TLS, and a pinned plan is only read
// (GetPlan) unless the certificate's role may create plans.
type dialCreds struct {
	transport credentials.TransportCredentials
	identity  string // spiffe://gin/..., empty for plaintext
	create    bool   // GetOrCreatePlan, else GetPlan
}

// masterCredentials loads cfg's certificate files, if any. A reader (the
// role meant for jobs) may read a pinned plan but not create one: the
// prolog's agents (or PrologSlurmctld) pin it before tasks start.
func masterCredentials(cfg config) (dialCreds, error) {
	if !cfg.tls.Given() {
		return dialCreds{transport: insecure.NewCredentials(), create: true}, nil
	}
	if err := cfg.tls.Validate(); err != nil {
		return dialCreds{}, fmt.Errorf("%s: %w", cfg.tlsVar, err)
	}
	src, err := pki.NewSource(cfg.tls, slog.New(slog.DiscardHandler))
	if err != nil {
		return dialCreds{}, fmt.Errorf("%s: %w", cfg.tlsVar, err)
	}
	id := src.Identity()
	create := id.Role == pki.RoleScheduler || id.Role == pki.RoleAdmin || id.Role == pki.RoleAgent
	return dialCreds{transport: pki.ClientCredentialsFrom(src), identity: id.String(), create: create}, nil
}

// fetchOne asks one master, within ctx (this attempt's share).
func fetchOne(ctx context.Context, addr string, creds dialCreds, req *ginv1.GetOrCreatePlanRequest) (*ginv1.Plan, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds.transport),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(planread.MaxBytes+4096)))
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	defer conn.Close()
	start := time.Now()
	client := ginv1.NewPlanServiceClient(conn)
	var resp interface{ GetPlan() *ginv1.Plan }
	if creds.create {
		resp, err = client.GetOrCreatePlan(ctx, req)
	} else {
		// From the leader (a follower forwards it): a follower that has not
		// applied the pin yet would answer NOT_FOUND, a final refusal,
		// and this rank would stand aside while the others apply the plan.
		resp, err = client.GetPlan(ctx, &ginv1.GetPlanRequest{JobId: req.GetJobId(), Consistency: ginv1.ReadConsistency_READ_CONSISTENCY_CONSISTENT})
	}
	if err != nil {
		if status.Code(err) == codes.DeadlineExceeded {
			return nil, status.Errorf(codes.DeadlineExceeded, "no answer within %s", time.Since(start).Round(time.Millisecond))
		}
		return nil, err // as the master sent it: the details say whether another may answer
	}
	b, err := proto.Marshal(resp.GetPlan())
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	p, err := decodePlan(b)
	if err != nil {
		return nil, status.Error(codes.DataLoss, err.Error())
	}
	return p, nil
}
