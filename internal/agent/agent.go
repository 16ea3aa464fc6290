package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/masteraddr"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultHeartbeatInterval = 5 * time.Second
	DefaultInitialBackoff    = 200 * time.Millisecond
	DefaultMaxBackoff        = 30 * time.Second
)

// Bounds on a heartbeat interval the master asks for; values outside are
// clamped so a misconfigured master cannot make agents spin or go silent.
const (
	minHeartbeatInterval = 10 * time.Millisecond
	maxHeartbeatInterval = 10 * time.Minute
)

// maxExtraCandidates bounds how many leader-hinted addresses that were not in
// Config.Masters the agent remembers.
const maxExtraCandidates = 16

// Source is what the agent needs from discovery: a named collector of the
// node's inventory. discovery.Source satisfies it.
type Source interface {
	// Name identifies the source in logs ("sim:dgx-h100", "file:/path").
	Name() string
	// Collect discovers the node's inventory now; the generation is ignored.
	Collect(ctx context.Context) (*ginv1.NodeInventory, error)
}

// Status is a snapshot of the agent's state, for logs and metrics.
type Status struct {
	// Connected is true while a session is established (hello acknowledged).
	Connected bool
	// Master is the address of the master of the established session, or ""
	// when disconnected.
	Master string
	// AckedGeneration is the last generation the master acknowledged (or
	// reported in sync); 0 before the first.
	AckedGeneration uint64
	// AckedHash is the content hash of the acknowledged inventory.
	AckedHash string
	// CurrentHash is the content hash of the latest collected inventory.
	CurrentHash string
	// HeartbeatInterval is the interval in use (possibly set by the master).
	HeartbeatInterval time.Duration
	// LastError is the most recent session or collection error; it is not
	// cleared by success. LastErrorAt is when it happened.
	LastError   error
	LastErrorAt time.Time
	// Reconnects counts session attempts after the first one.
	Reconnects uint64
	// HomeJoinsFailed counts returns home that the home master did not
	// take (the agent stayed attached where it was).
	HomeJoinsFailed uint64
	// Collections and CollectErrors count source collections.
	Collections   uint64
	CollectErrors uint64
	// InventoriesSent counts inventory updates sent to masters: full
	// inventories and deltas alike.
	InventoriesSent uint64
	// FabricScanner is true while the master has named this agent the one
	// that scans the fabric; FabricScans and FabricScanErrors count scans
	// uploaded and scans that failed.
	FabricScanner    bool
	FabricScans      uint64
	FabricScanErrors uint64
}

// snapshot is one successful collection. inv is never mutated once stored.
type snapshot struct {
	inv  *ginv1.NodeInventory
	hash string
	at   time.Time
}

// Agent is the gin-agent runtime. Create it with New and start it with Run.
type Agent struct {
	cfg      Config
	log      *slog.Logger
	dialOpts []grpc.DialOption
	rnd      *rand.Rand
	encoder  updateEncoder

	// after is the clock of the home-probe schedule (time.After; tests
	// fire it themselves), probe asks whether the home master takes
	// sessions (probeHome).
	after func(time.Duration) <-chan time.Time
	probe func(ctx context.Context, addr string) (bool, error)

	// silenceTimeout returns how long a session may go without any message
	// from the master before it is considered dead.
	silenceTimeout func(hb time.Duration) time.Duration

	// changed is signalled (non-blocking, capacity 1) when a collection's
	// hash differs from the previous one.
	changed chan struct{}
	// scanNow asks scanLoop for a scan at once; scanOut holds the newest
	// scan not yet sent (capacity 1).
	scanNow chan struct{}
	scanOut chan *ginv1.FabricTopology
	// first is closed after the first successful collection.
	first     chan struct{}
	firstOnce sync.Once

	runMu   sync.Mutex
	running bool

	mu         sync.Mutex
	latest     *snapshot
	status     Status
	candidates []string // Config.Masters followed by hinted extras
	hb         time.Duration
}

// New validates cfg, applies defaults and returns an Agent.
func New(cfg Config) (*Agent, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("agent: node name is empty")
	}
	if cfg.Source == nil {
		return nil, errors.New("agent: no inventory source")
	}
	if len(cfg.Masters) == 0 {
		return nil, errors.New("agent: no master address")
	}
	masters := make([]string, 0, len(cfg.Masters))
	for _, m := range cfg.Masters {
		norm, err := masteraddr.One(m)
		if err != nil {
			return nil, fmt.Errorf("agent: master address %q: %w", m, err)
		}
		if !slices.Contains(masters, norm) {
			masters = append(masters, norm)
		}
	}
	cfg.Masters = masters
	if cfg.HeartbeatInterval < 0 || cfg.CollectInterval < 0 || cfg.InitialBackoff < 0 || cfg.MaxBackoff < 0 {
		return nil, errors.New("agent: negative interval or backoff")
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.CollectInterval == 0 {
		cfg.CollectInterval = cfg.HeartbeatInterval
	}
	if cfg.InitialBackoff == 0 {
		cfg.InitialBackoff = DefaultInitialBackoff
	}
	if cfg.FabricScanInterval <= 0 {
		cfg.FabricScanInterval = DefaultFabricScanInterval
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.HomeProbeInterval == 0 {
		cfg.HomeProbeInterval = DefaultHomeProbeInterval
	}
	if cfg.MaxBackoff < cfg.InitialBackoff {
		return nil, fmt.Errorf("agent: max backoff %s is below the initial backoff %s", cfg.MaxBackoff, cfg.InitialBackoff)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.NewPCG(rand.Uint64(), rand.Uint64())
	}

	ka := grpc.WithKeepaliveParams(keepalive.ClientParameters{
		// Heartbeats keep a healthy stream busy, so pings are only sent when
		// the master has gone quiet: they detect a dead peer behind a
		// half-open TCP connection.
		Time:                30 * time.Second,
		Timeout:             10 * time.Second,
		PermitWithoutStream: false,
	})
	a := &Agent{
		cfg:            cfg,
		log:            cfg.Logger.With(slog.String("node", cfg.NodeName)),
		dialOpts:       append([]grpc.DialOption{ka}, cfg.DialOptions...),
		rnd:            rand.New(cfg.Rand),
		encoder:        deltaEncoder{},
		silenceTimeout: defaultSilenceTimeout,
		changed:        make(chan struct{}, 1),
		first:          make(chan struct{}),
		scanNow:        make(chan struct{}, 1),
		scanOut:        make(chan *ginv1.FabricTopology, 1),
		candidates:     append([]string(nil), cfg.Masters...),
		hb:             cfg.HeartbeatInterval,
		after:          time.After,
	}
	a.probe = a.probeHome
	a.status.HeartbeatInterval = cfg.HeartbeatInterval
	// grpc.NewClient does not connect: this only checks the options (for
	// instance that transport credentials are set) before Run retries them.
	probe, err := grpc.NewClient(cfg.Masters[0], a.dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("agent: dial options: %w", err)
	}
	_ = probe.Close()
	return a, nil
}

// defaultSilenceTimeout allows a few missed heartbeat acks, and never less
// than 10s so a master busy committing is not mistaken for a dead one.
func defaultSilenceTimeout(hb time.Duration) time.Duration {
	return max(4*hb, 10*time.Second)
}

// Status returns a snapshot of the agent's state. It is safe to call
// concurrently with Run.
func (a *Agent) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.status
	s.HeartbeatInterval = a.hb
	if a.latest != nil {
		s.CurrentHash = a.latest.hash
	}
	return s
}

// Run collects and reports until ctx is done, then returns nil. It returns
// an error only when the agent is already running.
func (a *Agent) Run(ctx context.Context) error {
	a.runMu.Lock()
	if a.running {
		a.runMu.Unlock()
		return errors.New("agent: Run called twice")
	}
	a.running = true
	a.runMu.Unlock()

	a.log.Info("agent starting",
		slog.String("source", a.cfg.Source.Name()),
		slog.Any("masters", a.cfg.Masters),
		slog.Duration("heartbeat_interval", a.cfg.HeartbeatInterval),
		slog.Duration("collect_interval", a.cfg.CollectInterval))

	var wg sync.WaitGroup
	wg.Go(func() { a.collectLoop(ctx) })
	wg.Go(func() { a.scanLoop(ctx) })
	a.connectLoop(ctx)
	wg.Wait()
	a.setDisconnected()
	a.log.Info("agent stopped")
	return nil
}

// heartbeatInterval is the interval in force.
func (a *Agent) heartbeatInterval() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.hb
}

// setHeartbeatInterval applies a master-requested interval, clamped, and
// reports whether it changed.
func (a *Agent) setHeartbeatInterval(d time.Duration) (time.Duration, bool) {
	d = min(max(d, minHeartbeatInterval), maxHeartbeatInterval)
	a.mu.Lock()
	defer a.mu.Unlock()
	if d == a.hb {
		return d, false
	}
	a.hb = d
	return d, true
}

// Ready is closed after the first successful collection.
func (a *Agent) Ready() <-chan struct{} { return a.first }

// Inventory returns the last successfully collected inventory (nil before
// the first collection). Callers must not modify it.
func (a *Agent) Inventory() *ginv1.NodeInventory {
	if s := a.latestSnapshot(); s != nil {
		return s.inv
	}
	return nil
}

func (a *Agent) latestSnapshot() *snapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.latest
}

func (a *Agent) recordError(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.status.LastError = err
	a.status.LastErrorAt = time.Now()
}

func (a *Agent) setConnected(master string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.status.Connected = true
	a.status.Master = master
}

func (a *Agent) setDisconnected() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.status.Connected = false
	a.status.Master = ""
	a.status.FabricScanner = false // the master names a scanner among connected agents
}

func (a *Agent) setAcked(gen uint64, hash string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.status.AckedGeneration = gen
	a.status.AckedHash = hash
}

func (a *Agent) acked() (uint64, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status.AckedGeneration, a.status.AckedHash
}

// candidate returns the i-th candidate address (modulo the list length).
func (a *Agent) candidate(i int) (string, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	i %= len(a.candidates)
	return a.candidates[i], i
}

// candidateAt is the candidate at index i (modulo their number).
func (a *Agent) candidateAt(i int) string {
	addr, _ := a.candidate(i)
	return addr
}

func (a *Agent) numCandidates() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.candidates)
}

// addCandidate returns the index of addr in the candidate list, appending it
// when absent. Hinted extras beyond maxExtraCandidates replace the oldest.
func (a *Agent) addCandidate(addr string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, c := range a.candidates {
		if c == addr {
			return i
		}
	}
	n := len(a.cfg.Masters)
	if len(a.candidates)-n >= maxExtraCandidates {
		a.candidates = append(a.candidates[:n], a.candidates[n+1:]...)
	}
	a.candidates = append(a.candidates, addr)
	return len(a.candidates) - 1
}
