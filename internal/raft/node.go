package raft

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"google.golang.org/protobuf/proto"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	"github.com/gin-topology/gin/internal/hostaddr"
	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/state"
)

// Config opens a Node.
type Config struct {
	// ID is this server's Raft id (stable across restarts).
	ID string
	// Bind is the Raft TCP address ("127.0.0.1:7000"; port 0 picks one).
	Bind string
	// Advertise is the address peers dial; defaults to the bound address.
	Advertise string
	// DataDir holds the log (wal/), the stable store and snapshots.
	DataDir string
	// Bootstrap makes a fresh data directory a single-voter cluster.
	Bootstrap bool
	// Fast uses short timeouts (dev cluster, tests on loopback); Tuning
	// fields that are set win over it.
	Fast bool
	// Tuning overrides hashicorp/raft's timeouts and snapshot policy.
	Tuning Tuning
	// TLS, when set, runs the Raft transport over TLS 1.3 accepting and
	// dialling only master certificates of the cluster CA; nil: plain TCP.
	TLS *pki.Source
	// Recover rewrites the Raft configuration stored in DataDir before
	// starting (hashicorp/raft's RecoverCluster, like Consul's peers.json):
	// the new configuration is this server alone (at its advertised
	// address) plus RecoverPeers. It brings back a cluster that lost its
	// quorum; every entry in the local log is committed, acknowledged or
	// not. A DataDir without Raft state is refused and left untouched.
	Recover bool
	// RecoverPeers are further voters of the recovered configuration
	// (other survivors recovered with the same list); empty: this server
	// alone.
	RecoverPeers []Member
	// MinFreeBytes is the free space kept under DataDir: below it the
	// leader refuses writes (DataDirFullError) and a follower refuses to
	// append (see diskguard.go). 0: DefaultMinFreeBytes.
	MinFreeBytes uint64
	Logger       *slog.Logger
	// RaftLogOutput takes hashicorp/raft's own lines (hclog text, at WARN,
	// or ERROR when Fast); nil: os.Stderr.
	RaftLogOutput io.Writer

	// walSegmentSize overrides raft-wal's segment size (tests; 0: 64 MiB).
	walSegmentSize int
	// statfs overrides how the free space is read (tests; nil: statfs(2)).
	statfs func(dir string) (uint64, error)
}

// Tuning holds the Raft timing and snapshot knobs an operator may set; a
// zero field keeps the default (hashicorp/raft's, or Fast's).
type Tuning struct {
	// HeartbeatTimeout: a follower without contact from the leader this
	// long starts an election (hashicorp/raft default 1s).
	HeartbeatTimeout time.Duration
	// ElectionTimeout: a candidate without a quorum this long retries
	// (default 1s).
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout: a leader without a quorum's contact this long
	// steps down (default 500ms; at most HeartbeatTimeout).
	LeaderLeaseTimeout time.Duration
	// SnapshotThreshold: log entries since the last snapshot that trigger a
	// new one (default 8192).
	SnapshotThreshold uint64
	// SnapshotInterval: how often the threshold is checked (default 120s).
	SnapshotInterval time.Duration
	// TrailingLogs: entries kept after a snapshot so a slightly lagging
	// follower catches up without a snapshot install (default 10240).
	TrailingLogs uint64
	// SnapshotBytes: log bytes appended since the last compaction that
	// trigger a snapshot (default DefaultSnapshotBytes, snapbytes.go).
	SnapshotBytes uint64
}

// Bounds of the Tuning values, checked by Validate.
const (
	minTimeout = 20 * time.Millisecond
	maxTimeout = time.Minute
)

// Validate reports a Tuning that hashicorp/raft would refuse or that
// cannot work, naming the knob.
func (t Tuning) Validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"heartbeat timeout", t.HeartbeatTimeout}, {"election timeout", t.ElectionTimeout}, {"leader lease timeout", t.LeaderLeaseTimeout}} {
		if d.v != 0 && (d.v < minTimeout || d.v > maxTimeout) {
			return fmt.Errorf("raft %s %s: want %s..%s", d.name, d.v, minTimeout, maxTimeout)
		}
	}
	if t.SnapshotInterval != 0 && (t.SnapshotInterval < 100*time.Millisecond || t.SnapshotInterval > 24*time.Hour) {
		return fmt.Errorf("raft snapshot interval %s: want 100ms..24h", t.SnapshotInterval)
	}
	if t.SnapshotThreshold > 1<<30 || t.TrailingLogs > 1<<30 {
		return errors.New("raft snapshot threshold and trailing logs: want at most 2^30 entries")
	}
	if t.SnapshotBytes != 0 && (t.SnapshotBytes < 1<<16 || t.SnapshotBytes > maxSnapshotBytes) {
		return fmt.Errorf("raft snapshot bytes %d: want 64 KiB..1 TiB", t.SnapshotBytes)
	}
	return nil
}

// apply sets the non-zero fields on rc.
func (t Tuning) apply(rc *hraft.Config) {
	if t.HeartbeatTimeout > 0 {
		rc.HeartbeatTimeout = t.HeartbeatTimeout
	}
	if t.ElectionTimeout > 0 {
		rc.ElectionTimeout = t.ElectionTimeout
	}
	if t.LeaderLeaseTimeout > 0 {
		rc.LeaderLeaseTimeout = t.LeaderLeaseTimeout
	}
	if t.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = t.SnapshotThreshold
	}
	if t.SnapshotInterval > 0 {
		rc.SnapshotInterval = t.SnapshotInterval
	}
	if t.TrailingLogs > 0 {
		rc.TrailingLogs = t.TrailingLogs
	}
}

// Errors of Apply.
var (
	// ErrNotLeader: this server is not the leader; NotLeaderError carries a hint.
	ErrNotLeader = errors.New("not the leader")
	// ErrShutdown: the node is shutting down.
	ErrShutdown = errors.New("raft is shutting down")
	// ErrOutcomeUnknown: leadership was lost while the entry was in flight;
	// it may or may not commit. Commands are idempotent: retry.
	ErrOutcomeUnknown = errors.New("write outcome unknown (leadership lost); retry")
)

// NotLeaderError says who the leader is, when known.
type NotLeaderError struct {
	LeaderID, LeaderAddr string
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == "" {
		return "not the leader; no leader known"
	}
	return fmt.Sprintf("not the leader; leader is %s at %s", e.LeaderID, e.LeaderAddr)
}

func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

// Node is one Raft server with its FSM and stores.
type Node struct {
	cfg       Config
	hadState  atomic.Bool
	raft      *hraft.Raft
	transport *hraft.NetworkTransport
	logs      *wal.WAL
	counted   *countingLogStore // logs as Raft uses it, counting errors
	guard     *diskGuard
	rpcGuard  *rpcGuard // nil without TLS
	preAuth   *preAuth  // nil without TLS
	failed    *failure  // the log store's first write error
	// fullHandoff is when this leader last handed leadership over because
	// its data dir was full (unix ns; 0: never).
	fullHandoff atomic.Int64
	store       *state.Store
	log         *slog.Logger
	fsm         *FSM
	opened      time.Time   // when Open started Raft (staleness.go)
	caughtUp    atomic.Bool // set once CaughtUp saw it caught up, or a Barrier returned on the leader (staleness.go)
	// catchUpTo is the first commit index CaughtUp learned (0: none yet):
	// applying up to it is catching up, whatever was committed since.
	catchUpTo atomic.Uint64
}

// CloseTransport releases the Raft address after Shutdown (which leaves it
// bound: a process that exits releases it anyway), so that a master
// restarted in the same process (tests) binds it again.
func (n *Node) CloseTransport() error { return n.transport.Close() }

// Indexes are this server's Raft commit index (on a follower, as far as
// the leader has told it) and the index its state machine has applied.
func (n *Node) Indexes() (commit, applied uint64) {
	return n.raft.CommitIndex(), n.raft.AppliedIndex()
}

// SkippedEntries is how many committed entries this node could not apply
// (see FSM.Skipped): non-zero means its state is incomplete and it must not
// serve until it runs a version that knows them.
func (n *Node) SkippedEntries() uint64 { return n.fsm.Skipped() }

// MaxServerIDLen bounds a Raft server id (a master's --node-id, a Join's
// server_id).
const MaxServerIDLen = 128

// ValidateServerID says why id cannot name a Raft server (nil when it can).
func ValidateServerID(id string) error {
	switch {
	case id == "":
		return errors.New("server id is empty")
	case len(id) > MaxServerIDLen:
		return fmt.Errorf("server id is %d bytes, more than %d", len(id), MaxServerIDLen)
	}
	return nil
}

// Open opens (or creates) the data directory and starts Raft. Its parts
// run in this order, each undoing nothing it did not do: the
// configuration is checked before anything touches the data dir or the
// network (a bad flag changes nothing); the log store is opened (which
// locks the data dir), then the snapshot store and the transport; the
// stored state is checked and recovered or bootstrapped; Raft starts on
// the counting log store. On an error every store and the transport
// opened so far are closed.
func Open(cfg Config, store *state.Store) (_ *Node, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	level := hclog.Warn
	if cfg.Fast {
		level = hclog.Error // elections on loopback are routine, not news
	}
	out := cfg.RaftLogOutput
	if out == nil {
		out = os.Stderr
	}
	hlog := raftLogger(level, out)
	rc, err := raftConfig(cfg, hlog)
	if err != nil {
		return nil, err
	}
	if err := checkAdvertised(cfg); err != nil {
		return nil, err
	}
	logs, err := openLogStore(cfg, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = logs.Close()
		}
	}()
	snaps, err := hraft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 3, hlog)
	if err != nil {
		return nil, fmt.Errorf("raft: snapshot store: %w", err)
	}
	adv, err := advertiseAddr(cfg)
	if err != nil {
		return nil, err
	}
	trans, rguard, padmit, err := newTransport(cfg, adv, store, hlog, log)
	if err != nil {
		return nil, fmt.Errorf("raft: listen on %s: %w", cfg.Bind, err)
	}
	defer func() {
		if err != nil {
			_ = trans.Close()
		}
	}()
	fsm := NewFSM(store, log)
	has, err := prepareState(cfg, rc, logs, snaps, trans, log)
	if err != nil {
		return nil, err
	}
	fsm.seedConfiguration(snaps)
	guard := &diskGuard{dir: cfg.DataDir, minFree: cfg.MinFreeBytes, statfs: cfg.statfs, log: log}
	failed := newFailure()
	counted, running := newCountedLogStore(cfg, logs, guard, failed, log)
	r, err := startRaft(cfg, rc, fsm, counted, logs, snaps, trans, has, log)
	if err != nil {
		return nil, err
	}
	running.Store(r)
	counted.bySize.raft.Store(r)
	if rguard != nil {
		rguard.setMembership(func() (hraft.Configuration, bool) {
			f := r.GetConfiguration()
			if f.Error() != nil {
				return hraft.Configuration{}, false
			}
			return f.Configuration(), true
		})
	}
	n := &Node{opened: time.Now(), cfg: cfg, raft: r, transport: trans, logs: logs, counted: counted, guard: guard, rpcGuard: rguard, preAuth: padmit, failed: failed, store: store, log: log, fsm: fsm}
	n.hadState.Store(has || cfg.Bootstrap)
	return n, nil
}

// withDefaults is cfg checked and with every zero knob set to its
// default (MinFreeBytes, Logger, statfs). It touches nothing: Open calls
// it first, so a bad configuration changes nothing.
func (cfg Config) withDefaults() (Config, error) {
	if err := ValidateServerID(cfg.ID); err != nil {
		return cfg, fmt.Errorf("raft: %w", err)
	}
	if cfg.DataDir == "" {
		return cfg, errors.New("raft: data dir is empty")
	}
	if cfg.MinFreeBytes == 0 {
		cfg.MinFreeBytes = DefaultMinFreeBytes
	}
	segment := uint64(cmp.Or(cfg.walSegmentSize, wal.DefaultSegmentSize))
	if cfg.MinFreeBytes < segment || cfg.MinFreeBytes > MaxMinFreeBytes {
		return cfg, fmt.Errorf("raft: minimum free space %d bytes: want %d..%d (at least one Raft log segment, which a rotation preallocates)",
			cfg.MinFreeBytes, segment, uint64(MaxMinFreeBytes))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.statfs == nil {
		cfg.statfs = freeBytes
	}
	return cfg, nil
}

// checkAdvertised refuses a Bind on every interface without an Advertise
// address, which peers could not dial. It touches nothing.
func checkAdvertised(cfg Config) error {
	if cfg.Advertise == "" {
		if unspec, err := hostaddr.Unspecified(cfg.Bind); err == nil && unspec {
			return fmt.Errorf("raft: %s listens on every interface and no advertise address was given (peers cannot dial it)", cfg.Bind)
		}
	}
	return nil
}

// openLogStore opens the Raft log in <data-dir>/wal, creating the
// directory, and removes temporary snapshots left by a crash. A --recover
// of a data dir without state is refused before the directory is
// created. On an error nothing is left open.
func openLogStore(cfg Config, log *slog.Logger) (*wal.WAL, error) {
	walDir := filepath.Join(cfg.DataDir, "wal")
	if cfg.Recover {
		if err := CheckRecoverable(cfg.DataDir); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(walDir, 0o750); err != nil {
		return nil, fmt.Errorf("raft: data dir: %w", err)
	}
	segmentSize := wal.DefaultSegmentSize
	if cfg.walSegmentSize > 0 {
		segmentSize = cfg.walSegmentSize
	}
	logs, err := wal.Open(walDir, wal.WithSegmentSize(segmentSize))
	if err != nil {
		if diskFull(err) {
			return nil, fmt.Errorf("raft: data dir %s is full: open log store %s: %w", cfg.DataDir, walDir, err)
		}
		return nil, fmt.Errorf("raft: open log store %s: %w", walDir, err)
	}
	// After wal.Open, which locks the data dir against a second master.
	if _, err := removeTempSnapshots(cfg.DataDir, log); err != nil {
		_ = logs.Close()
		return nil, err
	}
	return logs, nil
}

// advertiseAddr is cfg.Advertise resolved (nil when not given: the
// transport advertises its bound address).
func advertiseAddr(cfg Config) (net.Addr, error) {
	if cfg.Advertise == "" {
		return nil, nil
	}
	adv, err := net.ResolveTCPAddr("tcp", cfg.Advertise)
	if err != nil {
		return nil, fmt.Errorf("raft: advertise address %q: %w", cfg.Advertise, err)
	}
	return adv, nil
}

// prepareState inspects the data dir and readies its state for Raft: a
// compacted log must be covered by a readable snapshot; --recover
// rewrites the stored configuration (a data dir without state is
// refused); Bootstrap makes a fresh one a single-voter cluster. It
// reports whether the data dir held Raft state.
func prepareState(cfg Config, rc *hraft.Config, logs *wal.WAL, snaps hraft.SnapshotStore, trans hraft.Transport, log *slog.Logger) (bool, error) {
	has, err := hraft.HasExistingState(logs, logs, snaps)
	if err != nil {
		return false, fmt.Errorf("raft: inspect data dir: %w", err)
	}
	if has {
		if err := checkSnapshotCoverage(logs, snaps); err != nil {
			return false, fmt.Errorf("raft: data dir %s: %w", cfg.DataDir, err)
		}
	}
	switch {
	case cfg.Recover:
		if !has {
			return false, fmt.Errorf("raft: recover: %w: %s holds no Raft log or snapshot", ErrNoState, cfg.DataDir)
		}
		if err := recoverCluster(cfg, rc, logs, snaps, trans, log); err != nil {
			return false, err
		}
	case cfg.Bootstrap && !has:
		conf := hraft.Configuration{Servers: []hraft.Server{{ID: rc.LocalID, Address: trans.LocalAddr()}}}
		if err := hraft.BootstrapCluster(rc, logs, logs, snaps, trans, conf); err != nil {
			return false, fmt.Errorf("raft: bootstrap: %w", err)
		}
		log.Info("bootstrapped a new single-voter cluster", "id", cfg.ID, "raft_addr", trans.LocalAddr())
	}
	return has, nil
}

// newCountedLogStore wraps logs as Raft uses it: errors counted, a
// follower's appends refused while the data dir is below its free-space
// minimum (the leader's own entries were checked in Apply), snapshots
// triggered by bytes appended, and the first write error recorded in
// failed and Raft shut down. running is where Open stores Raft once it
// started; until then no append is refused and no shutdown is needed.
func newCountedLogStore(cfg Config, logs *wal.WAL, guard *diskGuard, failed *failure, log *slog.Logger) (*countingLogStore, *atomic.Pointer[hraft.Raft]) {
	counted := newCountingLogStore(logs)
	counted.bySize = &snapshotByBytes{threshold: cmp.Or(cfg.Tuning.SnapshotBytes, DefaultSnapshotBytes), log: log}
	running := new(atomic.Pointer[hraft.Raft])
	counted.refuse = func() error {
		// A follower keeps the space free; the leader's own entries (its
		// proposals were checked in Apply) go through.
		if r := running.Load(); r == nil || r.State() == hraft.Leader {
			return nil
		}
		return guard.check()
	}
	counted.onWriteError = func(err error) {
		ferr := logStoreFailure(cfg.DataDir, err)
		if !failed.set(ferr) {
			return
		}
		log.Error("the Raft log store failed a write; stopping Raft, this master must be restarted", slog.String("data_dir", cfg.DataDir), slog.Any("err", ferr))
		if r := running.Load(); r != nil {
			// Not from here: this is Raft's own goroutine.
			go r.Shutdown()
		}
	}
	return counted, running
}

// startRaft starts hashicorp/raft on the stores. When every snapshot of a
// data dir with state fails to restore and the whole log is present, the
// snapshots are set aside and Raft starts from the log
// (snapshotfallback.go); otherwise the error is returned.
func startRaft(cfg Config, rc *hraft.Config, fsm *FSM, counted *countingLogStore, logs *wal.WAL, snaps hraft.SnapshotStore, trans hraft.Transport, has bool, log *slog.Logger) (*hraft.Raft, error) {
	r, err := hraft.NewRaft(rc, fsm, counted, logs, snaps, trans)
	if err != nil && has && errors.Is(errSnapshotsUnreadable(err), errNoSnapshotLoaded) {
		if moved, qerr := setAsideUnreadableSnapshots(cfg.DataDir, logs, snaps, log); qerr != nil {
			err = fmt.Errorf("%w: %w; and the log cannot stand in for them: %w", ErrIncompleteState, err, qerr)
		} else if moved > 0 {
			r, err = hraft.NewRaft(rc, fsm, counted, logs, snaps, trans)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("raft: start: %w", err)
	}
	return r, nil
}

// Failed is closed when the log store failed a write (Err says how): the
// log cannot take writes again in this process, and the master must be
// restarted (gin-master exits with status 75).
func (n *Node) Failed() <-chan struct{} { return n.failed.ch }

// Err is the log store's first write error (wrapping ErrLogStoreFailed),
// nil until Failed is closed.
func (n *Node) Err() error {
	select {
	case <-n.failed.ch:
		return n.failed.err
	default:
		return nil
	}
}

// DataDirSpace returns the free bytes under the data dir and the minimum
// the node keeps free.
func (n *Node) DataDirSpace() (free, minFree uint64, err error) {
	free, err = n.guard.free()
	return free, n.guard.minFree, err
}

// checkSnapshotCoverage refuses a data dir whose log was compacted but
// whose snapshots cannot stand in for the compacted entries: missing,
// unreadable, or failing their checksum. hashicorp/raft would otherwise skip
// such snapshots and start from an incomplete state (or panic later, when it
// needs an entry that is gone).
func checkSnapshotCoverage(logs hraft.LogStore, snaps hraft.SnapshotStore) error {
	first, err := logs.FirstIndex()
	if err != nil {
		return fmt.Errorf("read the log's first index: %w", err)
	}
	if first <= 1 {
		return nil // nothing was compacted
	}
	metas, err := snaps.List()
	if err != nil {
		return fmt.Errorf("list snapshots: %w", err)
	}
	var tried []string
	for _, m := range metas { // newest first
		if m.Index+1 < first {
			tried = append(tried, fmt.Sprintf("%s ends at index %d, before the log", m.ID, m.Index))
			continue
		}
		_, rc, err := snaps.Open(m.ID)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", m.ID, err))
			continue
		}
		_, err = ReadSnapshot(rc, nil)
		_ = rc.Close()
		if err == nil {
			return nil
		}
		tried = append(tried, fmt.Sprintf("%s: %v", m.ID, err))
	}
	if len(tried) == 0 {
		tried = append(tried, "no snapshot found")
	}
	return fmt.Errorf("%w: the log starts at index %d but no readable snapshot holds the entries before it (%s); "+
		"refusing to start from an incomplete state: restore the snapshots directory from a backup, "+
		"or move this data dir away and let the master rejoin its cluster empty", ErrIncompleteState, first, strings.Join(tried, "; "))
}

// raftConfig is hashicorp/raft's configuration for cfg, validated.
func raftConfig(cfg Config, hlog hclog.Logger) (*hraft.Config, error) {
	rc := hraft.DefaultConfig()
	rc.LocalID = hraft.ServerID(cfg.ID)
	rc.Logger = hlog
	rc.SnapshotThreshold = 8192
	if cfg.Fast {
		rc.HeartbeatTimeout = 200 * time.Millisecond
		rc.ElectionTimeout = 200 * time.Millisecond
		rc.LeaderLeaseTimeout = 100 * time.Millisecond
		rc.CommitTimeout = 5 * time.Millisecond
	}
	if err := cfg.Tuning.Validate(); err != nil {
		return nil, err
	}
	cfg.Tuning.apply(rc)
	if err := hraft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("raft: configuration: %w", err)
	}
	return rc, nil
}

// Apply proposes cmd and waits until it is applied, or ctx ends.
func (n *Node) Apply(ctx context.Context, cmd *statev1.Command) (state.Result, error) {
	b, err := proto.Marshal(cmd)
	if err != nil {
		return state.Result{}, fmt.Errorf("raft: marshal command: %w", err)
	}
	if n.raft.State() == hraft.Leader {
		// Refused before anything is written (a follower's proposal is
		// refused by Raft as not the leader).
		if err := n.guard.check(); err != nil {
			n.handOffFull()
			return state.Result{}, err
		}
	}
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
		if timeout <= 0 {
			return state.Result{}, context.DeadlineExceeded
		}
	}
	f := n.raft.Apply(b, timeout)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case <-ctx.Done():
		return state.Result{}, fmt.Errorf("raft apply: %w (outcome unknown)", ctx.Err())
	case err := <-done:
		switch {
		case err == nil:
		case errors.Is(err, hraft.ErrNotLeader):
			return state.Result{}, n.notLeader()
		case errors.Is(err, hraft.ErrLeadershipLost), errors.Is(err, hraft.ErrLeadershipTransferInProgress):
			return state.Result{}, ErrOutcomeUnknown
		case errors.Is(err, hraft.ErrRaftShutdown):
			return state.Result{}, ErrShutdown
		case errors.Is(err, hraft.ErrEnqueueTimeout):
			return state.Result{}, fmt.Errorf("raft apply: %w", context.DeadlineExceeded)
		default:
			return state.Result{}, fmt.Errorf("raft apply: %w", err)
		}
	}
	resp, ok := f.Response().(*ApplyResponse)
	if !ok {
		return state.Result{}, fmt.Errorf("raft apply: unexpected FSM response %T", f.Response())
	}
	return resp.Result, resp.Err
}

func (n *Node) notLeader() error {
	addr, id := n.raft.LeaderWithID()
	return &NotLeaderError{LeaderID: string(id), LeaderAddr: string(addr)}
}

// IsLeader reports whether this server is the leader now.
func (n *Node) IsLeader() bool { return n.raft.State() == hraft.Leader }

// LeaderCh delivers leadership changes (true: became leader).
func (n *Node) LeaderCh() <-chan bool { return n.raft.LeaderCh() }

// Leader returns the leader's id and Raft address ("" when unknown).
func (n *Node) Leader() (id, addr string) {
	a, i := n.raft.LeaderWithID()
	return string(i), string(a)
}

// VerifyLeader confirms leadership with a quorum and waits for every
// committed entry to be applied (a consistent read may follow).
func (n *Node) VerifyLeader(ctx context.Context) error {
	if err := waitFuture(ctx, n.raft.VerifyLeader()); err != nil {
		if errors.Is(err, hraft.ErrNotLeader) || errors.Is(err, hraft.ErrLeadershipLost) {
			return n.notLeader()
		}
		return fmt.Errorf("raft: verify leader: %w", err)
	}
	if err := waitFuture(ctx, n.raft.Barrier(5*time.Second)); err != nil {
		return fmt.Errorf("raft: barrier: %w", err)
	}
	return nil
}

// WaitLeader blocks until some server is the leader or ctx ends.
func (n *Node) WaitLeader(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if id, _ := n.Leader(); id != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("raft: waiting for a leader: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// Barrier waits until every entry committed before it is applied on the
// leader (a new leader calls it before serving consistent reads).
// On the leader that also latches CaughtUp: everything committed before
// its term is applied.
func (n *Node) Barrier(ctx context.Context) error {
	if err := waitFuture(ctx, n.raft.Barrier(30*time.Second)); err != nil {
		return err
	}
	if n.IsLeader() {
		n.caughtUp.Store(true)
	}
	return nil
}

func waitFuture(ctx context.Context, f hraft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-done:
		return err
	}
}

// RaftConnsRefused counts the connections the Raft TLS port closed before
// their handshake (preauth.go); zero without TLS.
func (n *Node) RaftConnsRefused() PreAuthRefused {
	if n.rpcGuard == nil || n.preAuth == nil {
		return PreAuthRefused{}
	}
	return n.preAuth.refused()
}

// ExpectPeers names the peers this server, while its Raft configuration
// is empty, takes Raft RPCs from: the leader it asks to add it (its
// server id and Raft address), or the --bootstrap-expect servers it found.
// Each call replaces the last; a server with a configuration ignores the
// list. Without TLS there is no guard and it does nothing. See rpcguard.go.
func (n *Node) ExpectPeers(peers []Member) {
	if n.rpcGuard == nil {
		return
	}
	ps := slices.Clone(peers)
	n.rpcGuard.expected.Store(&ps)
}

// RefusedRPCs returns how many inbound Raft RPCs the TLS layer refused
// because their certificate is not the member they claim to be
// (rpcguard.go), by rpc type and reason; nil without TLS.
func (n *Node) RefusedRPCs() []RefusedRPCCount {
	if n.rpcGuard == nil {
		return nil
	}
	return n.rpcGuard.counts()
}

// LogStoreErrors returns the log store errors Raft met since the node
// opened, for every operation (zeros included).
func (n *Node) LogStoreErrors() []LogStoreErrors { return n.counted.errorCounts() }

// LastContact is when this server last heard from a leader (an append or
// a snapshot it accepted) or granted a candidate its vote; the zero time
// when never. On the leader it is when it last stepped down.
func (n *Node) LastContact() time.Time { return n.raft.LastContact() }

// Stats is a snapshot of Raft's counters.
type Stats struct {
	State                           string
	Term, CommitIndex, AppliedIndex uint64
	// LeaderID and LeaderAddr are the leader this server knows of for
	// Term ("" when none), read together with State and Term (see Stats).
	LeaderID, LeaderAddr string
	LastContact          time.Duration // 0 on the leader or when never contacted
	Members              []Member
}

// Member is one server of the configuration.
type Member struct {
	ID, Address string
	Voter       bool
}

// Stats returns Raft's state and configuration. hashicorp/raft keeps
// state, term and leader in separate atomics, so reading them one after
// the other can pair one term's leader with the next term; Stats reads
// them until two rounds agree (a few tries; an election in progress may
// leave the last round standing). Even a stable round can show, for the
// microseconds between the library's setCurrentTerm and setLeader on an
// AppendEntries of a new term, the new term with the old term's leader.
func (n *Node) Stats() Stats {
	s := Stats{AppliedIndex: n.raft.AppliedIndex(), CommitIndex: n.raft.CommitIndex()}
	type view struct {
		state    hraft.RaftState
		term     uint64
		addr, id string
	}
	read := func() view {
		a, i := n.raft.LeaderWithID()
		return view{state: n.raft.State(), term: termOf(n.raft), addr: string(a), id: string(i)}
	}
	v := read()
	for range 4 {
		w := read()
		if w == v {
			break
		}
		v = w
	}
	s.State, s.Term, s.LeaderID, s.LeaderAddr = v.state.String(), v.term, v.id, v.addr
	if n.raft.State() != hraft.Leader {
		if lc := n.raft.LastContact(); !lc.IsZero() {
			s.LastContact = time.Since(lc)
		}
	}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, srv := range f.Configuration().Servers {
			s.Members = append(s.Members, Member{ID: string(srv.ID), Address: string(srv.Address), Voter: srv.Suffrage == hraft.Voter})
		}
	}
	return s
}

func termOf(r *hraft.Raft) uint64 {
	var t uint64
	_, _ = fmt.Sscan(r.Stats()["term"], &t)
	return t
}

// IsMember reports whether id is a server of the latest Raft
// configuration (voter or not).
func (n *Node) IsMember(id string) bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}

// MemberIDs are the server ids of the latest Raft configuration.
func (n *Node) MemberIDs() []string {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	ids := make([]string, 0, len(f.Configuration().Servers))
	for _, s := range f.Configuration().Servers {
		ids = append(ids, string(s.ID))
	}
	return ids
}

// ID is this server's id.
func (n *Node) ID() string { return n.cfg.ID }

// Addr is the Raft address peers use.
func (n *Node) Addr() string { return string(n.transport.LocalAddr()) }

// Shutdown stops Raft and closes the stores.
func (n *Node) Shutdown() error {
	err := n.raft.Shutdown().Error()
	if cerr := n.logs.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// HasState reports whether this server belongs to a cluster: it had Raft
// state when opened, was bootstrapped, or is in a configuration now.
func (n *Node) HasState() bool {
	if n.hadState.Load() {
		return true
	}
	f := n.raft.GetConfiguration()
	return f.Error() == nil && len(f.Configuration().Servers) > 0
}

// BootstrapCluster makes a fresh server the first member of a cluster of
// the given voters (each server id and Raft address).
func (n *Node) BootstrapCluster(members []Member) error {
	conf := hraft.Configuration{}
	for _, m := range members {
		conf.Servers = append(conf.Servers, hraft.Server{ID: hraft.ServerID(m.ID), Address: hraft.ServerAddress(m.Address), Suffrage: hraft.Voter})
	}
	if err := n.raft.BootstrapCluster(conf).Error(); err != nil {
		return fmt.Errorf("raft: bootstrap: %w", err)
	}
	n.hadState.Store(true)
	return nil
}

// AddVoter adds (or keeps) a voter; a no-op when it is already one at addr.
// With prevIndex > 0 it is applied only to the configuration of that
// index (Membership), else it fails with ErrMembershipChanged: a check
// made on one configuration never adds a server to another.
func (n *Node) AddVoter(ctx context.Context, id, addr string, prevIndex uint64) error {
	if err := waitFuture(ctx, n.raft.AddVoter(hraft.ServerID(id), hraft.ServerAddress(addr), prevIndex, 10*time.Second)); err != nil {
		if errors.Is(err, hraft.ErrNotLeader) {
			return n.notLeader()
		}
		if prevIndex > 0 && strings.Contains(err.Error(), "configuration changed since") {
			// hashicorp/raft has no sentinel for this refusal
			// (appendConfigurationEntry formats it).
			return fmt.Errorf("raft: add voter %s at %s: %w (%v)", id, addr, ErrMembershipChanged, err)
		}
		return fmt.Errorf("raft: add voter %s at %s: %w", id, addr, err)
	}
	return nil
}

// RemoveServer removes a server from the configuration.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if err := waitFuture(ctx, n.raft.RemoveServer(hraft.ServerID(id), 0, 10*time.Second)); err != nil {
		if errors.Is(err, hraft.ErrNotLeader) {
			return n.notLeader()
		}
		return fmt.Errorf("raft: remove server %s: %w", id, err)
	}
	return nil
}

// TransferLeadership hands leadership to another voter (planned shutdown).
func (n *Node) TransferLeadership(ctx context.Context) error {
	if n.raft.State() != hraft.Leader {
		return nil
	}
	return waitFuture(ctx, n.raft.LeadershipTransfer())
}

// PeerHealth reports, on the leader, the followers that are failing
// heartbeats and since when. It returns a stop function.
func (n *Node) PeerHealth(onFail func(id string, since time.Time), onResume func(id string)) (stop func()) {
	ch := make(chan hraft.Observation, 64)
	obs := hraft.NewObserver(ch, false, func(o *hraft.Observation) bool {
		switch o.Data.(type) {
		case hraft.FailedHeartbeatObservation, hraft.ResumedHeartbeatObservation:
			return true
		}
		return false
	})
	n.raft.RegisterObserver(obs)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case o := <-ch:
				switch d := o.Data.(type) {
				case hraft.FailedHeartbeatObservation:
					onFail(string(d.PeerID), d.LastContact)
				case hraft.ResumedHeartbeatObservation:
					onResume(string(d.PeerID))
				}
			}
		}
	}()
	return func() {
		n.raft.DeregisterObserver(obs)
		close(done)
	}
}
