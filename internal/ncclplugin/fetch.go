package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/masteraddr"
	"github.com/gin-topology/gin/internal/planread"
	"github.com/gin-topology/gin/internal/redirect"
)

// maxPlanBytes bounds a plan read from a file, the cache or a master.
const maxPlanBytes = 64 << 20

// lockPoll is how often a rank retries the node lock while another rank
// fetches.
const lockPoll = 5 * time.Millisecond

type loaded struct {
	plan   *ginv1.Plan
	source string // "master <addr>", "node cache <path>", "plan file <path>", "process cache"
	master string // the master the plan came from (for the Connected line), if any
}

// memo keeps the last plan per job in the process, so that every further
// communicator of the process skips the disk and the network.
var memo struct {
	sync.Mutex
	m map[string]memoEntry
}

type memoEntry struct {
	plan   *ginv1.Plan
	master string
	at     time.Time
}

// loadPlan finds the job's plan: a pre-staged plan file, else the process
// memo, else the node cache, else the masters, all within cfg.initTimeout.
// Errors say why no plan could be had.
func loadPlan(cfg config, l logger) (*loaded, error) {
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
		return &loaded{plan: e.plan, source: "process cache", master: e.master}, nil
	}
	addrs, err := masteraddr.Parse(cfg.masterList)
	if strings.TrimSpace(cfg.masterList) == "" {
		err = errors.New("no master list (NCCL_GIN_MASTER_HOST and GIN_MASTER_HOST are unset)")
	} else if err != nil {
		err = fmt.Errorf("%s: %w", cfg.masterVar, err)
	}
	// A bad master list only matters when the node cache has no plan.
	ctx, cancel := context.WithTimeout(context.Background(), cfg.initTimeout)
	defer cancel()

	res, cerr := viaCache(ctx, cfg, l, func() (*loaded, error) {
		if err != nil {
			return nil, err
		}
		// Spread a job start's fetchers over the masters (any replica
		// serves a pinned plan); which master answers does not change
		// the plan, so this need not be rank-invariant.
		if cfg.failover {
			addrs = rotate(addrs, os.Getpid())
		}
		return fetch(ctx, cfg, addrs)
	})
	if cerr != nil {
		return nil, cerr
	}
	memoPut(cfg, res)
	return res, nil
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
	memo.m[cfg.jobID] = memoEntry{plan: r.plan, master: r.master, at: time.Now()}
}

// fileKey makes a job id safe as part of a file name.
func fileKey(job string) string {
	b := []byte(job)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	return string(b)
}

// viaCache serves the plan from the node cache, or runs fetch under the
// node lock (one rank fetches, the others wait and read what it wrote).
// When the cache cannot be used at all, it says so and fetches directly.
func viaCache(ctx context.Context, cfg config, l logger, fetch func() (*loaded, error)) (*loaded, error) {
	if cfg.cacheTimeout <= 0 {
		return fetch()
	}
	base := filepath.Join(cfg.cacheDir, "plan-"+fileKey(cfg.jobID))
	planPath, lockPath := base+".pb", base+".lock"
	if r := readCache(cfg, l, planPath); r != nil {
		return r, nil
	}
	if err := ensureDir(cfg.cacheDir); err != nil {
		l.Warnf("GIN: node cache %s unusable (%v); fetching without it", cfg.cacheDir, err)
		return fetch()
	}
	lf, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		l.Warnf("GIN: node cache lock %s unusable (%v); fetching without it", lockPath, err)
		return fetch()
	}
	defer lf.Close()
	if err := lockWithin(ctx, lf); err != nil {
		return nil, fmt.Errorf("timed out after %s waiting for another rank of this node to fetch the plan (lock %s)", cfg.initTimeout, lockPath)
	}
	defer func() { _ = syscall.Flock(int(lf.Fd()), syscall.LOCK_UN) }()
	// Another rank may have fetched while this one waited.
	if r := readCache(cfg, l, planPath); r != nil {
		return r, nil
	}
	r, err := fetch()
	if err != nil {
		return nil, err
	}
	if werr := writeCache(cfg.cacheDir, planPath, r); werr != nil {
		l.Warnf("GIN: cannot write the node cache %s: %v", planPath, werr)
	}
	return r, nil
}

func ensureDir(dir string) error {
	if err := os.Mkdir(dir, 0o755); err == nil {
		// Shared by every user's jobs on the node, like /tmp.
		_ = os.Chmod(dir, 0o1777)
		return nil
	} else if !errors.Is(err, os.ErrExist) {
		return os.MkdirAll(dir, 0o755)
	}
	return nil
}

// lockWithin takes an exclusive flock, polling so that ctx bounds the wait.
func lockWithin(ctx context.Context, f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(lockPoll):
		}
	}
}

// readCache returns the cached plan when it is fresh, whole, verified and
// the job's; a bad one is reported and ignored (the caller refetches).
func readCache(cfg config, l logger, path string) *loaded {
	st, err := os.Stat(path)
	if err != nil || time.Since(st.ModTime()) >= cfg.cacheTimeout {
		return nil
	}
	// The cache directory may be shared by every user of the node: trust
	// only files written by root (the Slurm prolog) or by this user.
	if owner, ok := fileOwner(st); ok && owner != 0 && owner != uint32(os.Getuid()) {
		l.Warnf("GIN: ignoring node cache %s: owned by uid %d, neither root nor this user; fetching again", path, owner)
		return nil
	}
	p, err := readPlanFile(path)
	if err == nil && p.GetJobId() != cfg.jobID {
		err = fmt.Errorf("plan is for job %q, not job %q", p.GetJobId(), cfg.jobID)
	}
	if err != nil {
		l.Warnf("GIN: ignoring node cache %s: %v; fetching again", path, err)
		return nil
	}
	master := ""
	if b, err := os.ReadFile(strings.TrimSuffix(path, ".pb") + ".master"); err == nil {
		master = strings.TrimSpace(string(b))
	}
	return &loaded{plan: p, source: "node cache " + path, master: master}
}

// writeCache writes the plan (and the master it came from) atomically.
func writeCache(dir, planPath string, r *loaded) error {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r.plan)
	if err != nil {
		return err
	}
	if err := writeAtomic(dir, strings.TrimSuffix(planPath, ".pb")+".master", []byte(r.master+"\n")); err != nil {
		return err
	}
	return writeAtomic(dir, planPath, b)
}

func writeAtomic(dir, path string, b []byte) error {
	f, err := os.CreateTemp(dir, ".gin-tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// readPlanFile reads, decodes and verifies a serialized Plan.
func readPlanFile(path string) (*ginv1.Plan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPlanBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPlanBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxPlanBytes)
	}
	return decodePlan(b)
}

func decodePlan(b []byte) (*ginv1.Plan, error) {
	p := &ginv1.Plan{}
	if err := proto.Unmarshal(b, p); err != nil {
		return nil, fmt.Errorf("cannot decode the plan (%d bytes, garbage or truncated): %v", len(b), err)
	}
	if err := planread.Verify(p); err != nil {
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
// one redirect follower (internal/redirect): each in turn, following leader
// hints when failover is on, each attempt given a share of what is left of
// ctx's deadline.
func fetch(ctx context.Context, cfg config, addrs []string) (*loaded, error) {
	opts := redirect.Options{FollowHints: true, ShareDeadline: true}
	if !cfg.failover {
		opts.MaxAttempts = 1
	}
	req := &ginv1.GetOrCreatePlanRequest{JobId: cfg.jobID, Nodes: cfg.nodes, GpusPerNode: cfg.gpusPerNode}
	var plan *ginv1.Plan
	addr, err := redirect.Do(ctx, addrs, opts, func(actx context.Context, addr string) (string, error) {
		p, hint, err := fetchOne(actx, addr, req)
		plan = p
		return hint, err
	})
	if err != nil {
		return nil, fmt.Errorf("no plan from the masters within %s: %w", cfg.initTimeout, err)
	}
	if plan.GetJobId() != cfg.jobID {
		return nil, fmt.Errorf("master %s sent a plan for job %q, not job %q", addr, plan.GetJobId(), cfg.jobID)
	}
	return &loaded{plan: plan, source: "master " + addr, master: addr}, nil
}

// fetchOne asks one master, within ctx (this attempt's share).
func fetchOne(ctx context.Context, addr string, req *ginv1.GetOrCreatePlanRequest) (*ginv1.Plan, string, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxPlanBytes)))
	if err != nil {
		return nil, "", status.Error(codes.InvalidArgument, err.Error())
	}
	defer conn.Close()
	var hdr, trl metadata.MD
	start := time.Now()
	resp, err := ginv1.NewPlanServiceClient(conn).GetOrCreatePlan(ctx, req, grpc.Header(&hdr), grpc.Trailer(&trl))
	hint := apierr.LeaderHint(hdr, trl)
	if err != nil {
		if status.Code(err) == codes.DeadlineExceeded {
			return nil, hint, status.Errorf(codes.DeadlineExceeded, "no answer within %s", time.Since(start).Round(time.Millisecond))
		}
		return nil, hint, err // as the master sent it: the details say whether it is a redirect
	}
	b, err := proto.Marshal(resp.GetPlan())
	if err != nil {
		return nil, "", status.Error(codes.Internal, err.Error())
	}
	p, err := decodePlan(b)
	if err != nil {
		return nil, "", status.Error(codes.DataLoss, err.Error())
	}
	return p, "", nil
}

// fileOwner returns the uid that owns a file, when the platform says.
func fileOwner(st os.FileInfo) (uint32, bool) {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return sys.Uid, true
	}
	return 0, false
}
