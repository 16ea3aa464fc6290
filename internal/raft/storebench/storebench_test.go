package storebench

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"

	"github.com/gin-topology/gin/internal/testkit"
)

// Sizes of the entries GIN's master writes: a DGX H100 inventory command is
// about 12 KB, a heartbeat-sized state change about 512 B.
const (
	inventorySize = 12 * 1024
	changeSize    = 512
)

// store is what raft.NewRaft needs from a durable store: GIN's master passes
// the same value as its LogStore and its StableStore.
type store interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

type backend struct {
	name string
	open func(dir string) (store, error)
	// lazyHeadDelete: after DeleteRange of a prefix, GetLog below the new
	// FirstIndex may still return the old entry. raft-wal only drops whole
	// segments and keeps serving entries from the segments it keeps;
	// hashicorp/raft never reads below FirstIndex, but GIN code must not
	// rely on ErrLogNotFound there.
	lazyHeadDelete bool
}

// backends lists the two candidates; every benchmark runs them under the
// sub-benchmark names "wal/..." and "bolt/...".
var backends = []backend{
	{name: "wal", open: openWAL, lazyHeadDelete: true},
	{name: "bolt", open: openBolt},
}

// openWAL opens raft-wal in dir/wal. wal.Open does not create the directory.
func openWAL(dir string) (store, error) {
	d := filepath.Join(dir, "wal")
	if err := os.MkdirAll(d, 0o750); err != nil {
		return nil, err
	}
	return wal.Open(d)
}

// openBolt opens raft-boltdb/v2 (bbolt, one fsync per transaction) at dir/raft.db.
func openBolt(dir string) (store, error) {
	return raftboltdb.NewBoltStore(filepath.Join(dir, "raft.db"))
}

// openTemp opens be on a fresh b.TempDir (same disk as the data directory
// would be) and closes it when the test ends.
func openTemp(tb testing.TB, be backend) (store, string) {
	tb.Helper()
	dir := tb.TempDir()
	s, err := be.open(dir)
	if err != nil {
		tb.Fatalf("open %s: %v", be.name, err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("close %s: %v", be.name, err)
		}
	})
	return s, dir
}

// payload returns n deterministic, incompressible bytes.
func payload(n int) []byte {
	r := rand.New(rand.NewPCG(uint64(n), 42))
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	return p
}

var appendedAt = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// entries returns n command entries starting at first, all sharing data.
func entries(first uint64, n int, data []byte) []*raft.Log {
	logs := make([]*raft.Log, n)
	for i := range logs {
		logs[i] = &raft.Log{
			Index:      first + uint64(i),
			Term:       1,
			Type:       raft.LogCommand,
			Data:       data,
			AppendedAt: appendedAt,
		}
	}
	return logs
}

// fill appends n entries of data after the store's last index, in batches.
func fill(tb testing.TB, s store, n, batch int, data []byte) {
	tb.Helper()
	last, err := s.LastIndex()
	if err != nil {
		tb.Fatal(err)
	}
	for done := 0; done < n; {
		k := min(batch, n-done)
		if err := s.StoreLogs(entries(last+1, k, data)); err != nil {
			tb.Fatal(err)
		}
		last += uint64(k)
		done += k
	}
}

// diskBytes is the apparent size of every file under dir: raft-wal
// preallocates each 64 MiB segment, bbolt grows its file and never shrinks it.
func diskBytes(tb testing.TB, dir string) int64 {
	tb.Helper()
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += info.Size()
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return total
}

func reportDisk(b *testing.B, dir string) {
	b.ReportMetric(float64(diskBytes(b, dir))/(1<<20), "disk-MiB")
}

func sizeName(n int) string {
	if n%1024 == 0 {
		return strconv.Itoa(n/1024) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}

// BenchmarkStoreLog is one fsynced StoreLogs call per entry: what a
// single-node leader does for sequential proposals.
func BenchmarkStoreLog(b *testing.B) {
	for _, size := range []int{inventorySize, changeSize} {
		for _, be := range backends {
			b.Run(be.name+"/single-"+sizeName(size), func(b *testing.B) {
				s, dir := openTemp(b, be)
				data := payload(size)
				log := &raft.Log{Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: appendedAt}
				one := []*raft.Log{log}
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					log.Index++
					if err := s.StoreLogs(one); err != nil {
						b.Fatal(err)
					}
				}
				reportDisk(b, dir)
			})
		}
	}
}

// BenchmarkStoreLogsBatch64 is one fsynced StoreLogs call of 64 entries, the
// most hashicorp/raft groups into one append (MaxAppendEntries) under load.
func BenchmarkStoreLogsBatch64(b *testing.B) {
	const batch = 64
	for _, size := range []int{inventorySize, changeSize} {
		for _, be := range backends {
			b.Run(be.name+"/batch64-"+sizeName(size), func(b *testing.B) {
				s, dir := openTemp(b, be)
				logs := entries(1, batch, payload(size))
				b.SetBytes(int64(batch * size))
				b.ReportAllocs()
				for b.Loop() {
					if err := s.StoreLogs(logs); err != nil {
						b.Fatal(err)
					}
					for _, l := range logs {
						l.Index += batch
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/entry")
				reportDisk(b, dir)
			})
		}
	}
}

// BenchmarkGetLog reads random entries among the newest 1,024 of 20,000, as
// the leader does when it replicates to a follower that lags a little.
func BenchmarkGetLog(b *testing.B) {
	const stored, recent = 20_000, 1024
	for _, size := range []int{inventorySize, changeSize} {
		for _, be := range backends {
			b.Run(be.name+"/recent-"+sizeName(size), func(b *testing.B) {
				s, _ := openTemp(b, be)
				fill(b, s, stored, 512, payload(size))
				r := rand.New(rand.NewPCG(1, 2))
				var log raft.Log
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					idx := uint64(stored) - r.Uint64N(recent)
					if err := s.GetLog(idx, &log); err != nil {
						b.Fatal(err)
					}
					if log.Index != idx {
						b.Fatalf("got index %d, want %d", log.Index, idx)
					}
				}
			})
		}
	}
}

// maxCompactionRounds bounds BenchmarkDeleteRange: each round first appends
// 10,000 entries (up to 120 MB), so -benchtime=2000x would write 240 GB.
const maxCompactionRounds = 50

// benchtimeCount returns N when -test.benchtime is "Nx", else 0.
func benchtimeCount() int {
	f := flag.Lookup("test.benchtime")
	if f == nil {
		return 0
	}
	v := f.Value.String()
	if !strings.HasSuffix(v, "x") {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSuffix(v, "x"))
	if err != nil {
		return 0
	}
	return n
}

// BenchmarkDeleteRange is log compaction after a snapshot: with 20,000
// entries stored, DeleteRange drops the oldest 10,000 (hashicorp/raft's
// defaults are SnapshotThreshold 8192, TrailingLogs 10240). Each round first
// appends 10,000 entries in batches of 512 so that 20,000 are stored again;
// ns/op covers that refill too, delete-ms is the DeleteRange call alone.
func BenchmarkDeleteRange(b *testing.B) {
	const keep, drop = 10_000, 10_000
	if n := benchtimeCount(); n > maxCompactionRounds {
		b.Skipf("each round appends %d entries; run with -benchtime=%dx or less (got %dx)", drop, maxCompactionRounds, n)
	}
	for _, size := range []int{inventorySize, changeSize} {
		for _, be := range backends {
			b.Run(be.name+"/oldest10k-of-20k-"+sizeName(size), func(b *testing.B) {
				s, dir := openTemp(b, be)
				data := payload(size)
				fill(b, s, keep, 512, data)
				var del time.Duration
				var full, compacted int64
				for b.Loop() {
					fill(b, s, drop, 512, data)
					first, err := s.FirstIndex()
					if err != nil {
						b.Fatal(err)
					}
					full = diskBytes(b, dir)
					start := time.Now()
					if err := s.DeleteRange(first, first+drop-1); err != nil {
						b.Fatal(err)
					}
					del += time.Since(start)
					compacted = diskBytes(b, dir)
					if got, err := s.FirstIndex(); err != nil || got != first+drop {
						b.Fatalf("FirstIndex after compaction = %d, %v; want %d", got, err, first+drop)
					}
				}
				b.ReportMetric(float64(del.Microseconds())/1000/float64(b.N), "delete-ms")
				b.ReportMetric(float64(full)/(1<<20), "disk-MiB-20k")
				b.ReportMetric(float64(compacted)/(1<<20), "disk-MiB-10k")
			})
		}
	}
}

// countFSM is the trivial state machine of the end-to-end benchmark.
type countFSM struct{ applied uint64 }

func (f *countFSM) Apply(*raft.Log) any                 { f.applied++; return nil }
func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) { return countSnapshot{}, nil }
func (f *countFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type countSnapshot struct{}

func (countSnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (countSnapshot) Release()                             {}

// BenchmarkRaftApply runs a bootstrapped single-voter hashicorp/raft node on
// an InmemTransport with the store as both LogStore and StableStore (as
// GIN's master does, without a LogCache), and Applies 12 KiB commands one
// after another. Each Apply waits for the fsynced append and the FSM.
func BenchmarkRaftApply(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name+"/apply-"+sizeName(inventorySize), func(b *testing.B) {
			s, _ := openTemp(b, be)
			conf := raft.DefaultConfig()
			conf.LocalID = "m1"
			conf.HeartbeatTimeout = 50 * time.Millisecond
			conf.ElectionTimeout = 50 * time.Millisecond
			conf.LeaderLeaseTimeout = 50 * time.Millisecond
			conf.SnapshotThreshold = 1 << 40 // no snapshot inside the measurement
			conf.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Error, Output: io.Discard})
			addr, trans := raft.NewInmemTransport("")
			snaps := raft.NewDiscardSnapshotStore()
			fsm := &countFSM{}
			cfg := raft.Configuration{Servers: []raft.Server{{ID: conf.LocalID, Address: addr}}}
			if err := raft.BootstrapCluster(conf, s, s, snaps, trans, cfg); err != nil {
				b.Fatal(err)
			}
			r, err := raft.NewRaft(conf, fsm, s, s, snaps, trans)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				if err := r.Shutdown().Error(); err != nil {
					b.Errorf("shutdown: %v", err)
				}
			})
			testkit.WaitFor(b, 10*time.Second, "a leader", func() bool { return r.State() == raft.Leader })
			if err := r.Barrier(10 * time.Second).Error(); err != nil {
				b.Fatal(err)
			}
			cmd := payload(inventorySize)
			lat := make([]time.Duration, 0, 4096)
			b.SetBytes(inventorySize)
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				if err := r.Apply(cmd, 10*time.Second).Error(); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(len(lat))/b.Elapsed().Seconds(), "commits/s")
			b.ReportMetric(ms(percentile(lat, 50)), "p50-ms")
			b.ReportMetric(ms(percentile(lat, 99)), "p99-ms")
		})
	}
}

// percentile returns the nearest-rank p-th percentile of sorted.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (len(sorted)*p + 99) / 100 // ceil(n*p/100)
	return sorted[max(rank, 1)-1]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func TestPercentile(t *testing.T) {
	lat := make([]time.Duration, 100)
	for i := range lat {
		lat[i] = time.Duration(i+1) * time.Millisecond
	}
	for _, tc := range []struct {
		p    int
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}} {
		if got := percentile(lat, tc.p); got != tc.want {
			t.Errorf("percentile(1..100ms, %d) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := percentile([]time.Duration{7}, 99); got != 7 {
		t.Errorf("percentile of one sample = %v, want 7", got)
	}
}

// TestStoresRoundTrip checks both stores against the contract hashicorp/raft
// relies on: append, read back, prefix and suffix DeleteRange, first/last
// index, the stable store, and that everything survives a reopen.
func TestStoresRoundTrip(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := be.open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if s != nil {
					s.Close()
				}
			}()
			checkIndexes(t, s, 0, 0)

			want := make([]*raft.Log, 100)
			for i := range want {
				l := &raft.Log{
					Index:      uint64(i + 1),
					Term:       1,
					Type:       raft.LogCommand,
					Data:       []byte(fmt.Sprintf("cmd-%d", i+1)),
					AppendedAt: appendedAt.Add(time.Duration(i) * time.Millisecond),
				}
				switch {
				case i == 0:
					l.Type, l.Data = raft.LogConfiguration, []byte("conf")
				case i == 1:
					l.Type, l.Data = raft.LogNoop, nil
				case i%10 == 0:
					l.Data = payload(inventorySize)
					l.Extensions = []byte("ext")
				}
				want[i] = l
			}
			if err := s.StoreLog(want[0]); err != nil {
				t.Fatal(err)
			}
			if err := s.StoreLogs(want[1:]); err != nil {
				t.Fatal(err)
			}
			checkIndexes(t, s, 1, 100)
			for _, w := range want {
				checkLog(t, s, w)
			}

			// Compaction: drop the prefix.
			if err := s.DeleteRange(1, 40); err != nil {
				t.Fatal(err)
			}
			checkIndexes(t, s, 41, 100)
			if be.lazyHeadDelete {
				checkLog(t, s, want[39]) // still in the kept segment, unchanged
			} else {
				var got raft.Log
				if err := s.GetLog(40, &got); !errors.Is(err, raft.ErrLogNotFound) {
					t.Errorf("GetLog(40) after DeleteRange(1, 40) = %v, want ErrLogNotFound", err)
				}
			}
			checkLog(t, s, want[40])

			// Conflict: drop the suffix and append a different term.
			if err := s.DeleteRange(91, 100); err != nil {
				t.Fatal(err)
			}
			checkIndexes(t, s, 41, 90)
			repl := &raft.Log{Index: 91, Term: 2, Type: raft.LogCommand, Data: []byte("term-2"), AppendedAt: appendedAt}
			if err := s.StoreLogs([]*raft.Log{repl}); err != nil {
				t.Fatal(err)
			}
			checkIndexes(t, s, 41, 91)
			checkLog(t, s, repl)

			// Stable store.
			if err := s.Set([]byte("LastVoteCand"), []byte("m2")); err != nil {
				t.Fatal(err)
			}
			if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
				t.Fatal(err)
			}
			checkStable(t, s)
			// hashicorp/raft accepts a missing key as (0, nil) or an error "not found".
			if v, err := s.GetUint64([]byte("missing")); v != 0 || (err != nil && err.Error() != "not found") {
				t.Errorf("GetUint64(missing) = %d, %v; want 0 and nil or \"not found\"", v, err)
			}

			// Durability: reopen on the same directory.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = nil
			s2, err := be.open(dir)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			s = s2
			checkIndexes(t, s, 41, 91)
			for _, w := range want[40:90] {
				checkLog(t, s, w)
			}
			checkLog(t, s, repl)
			checkStable(t, s)
		})
	}
}

func checkIndexes(t *testing.T, s store, first, last uint64) {
	t.Helper()
	f, err := s.FirstIndex()
	if err != nil || f != first {
		t.Errorf("FirstIndex = %d, %v; want %d", f, err, first)
	}
	l, err := s.LastIndex()
	if err != nil || l != last {
		t.Errorf("LastIndex = %d, %v; want %d", l, err, last)
	}
}

func checkLog(t *testing.T, s store, want *raft.Log) {
	t.Helper()
	var got raft.Log
	if err := s.GetLog(want.Index, &got); err != nil {
		t.Errorf("GetLog(%d): %v", want.Index, err)
		return
	}
	if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type ||
		!bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Extensions, want.Extensions) ||
		!got.AppendedAt.Equal(want.AppendedAt) {
		t.Errorf("GetLog(%d) = {%d %d %v %d bytes ext %q at %v}, want {%d %d %v %d bytes ext %q at %v}",
			want.Index, got.Index, got.Term, got.Type, len(got.Data), got.Extensions, got.AppendedAt,
			want.Index, want.Term, want.Type, len(want.Data), want.Extensions, want.AppendedAt)
	}
}

func checkStable(t *testing.T, s store) {
	t.Helper()
	if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "m2" {
		t.Errorf("Get(LastVoteCand) = %q, %v; want \"m2\"", v, err)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
		t.Errorf("GetUint64(CurrentTerm) = %d, %v; want 7", v, err)
	}
}
