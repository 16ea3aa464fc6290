package inspector

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Bounds of what a dump may hold; beyond them reading stops with an error
// (nothing is half-imported: the caller stores only a finished Aggregate).
const (
	// MaxObjectBytes bounds one JSON object (a verbose object with 64
	// channels' kernel events is ~15 KB).
	MaxObjectBytes = 256 << 10
	// MaxGroups bounds the distinct (communicator, collective, size
	// bucket) groups.
	MaxGroups = 8192
	// MaxHosts bounds the distinct host names.
	MaxHosts = 8192
	// MaxFiles bounds the files of a directory.
	MaxFiles = 65536
	// MaxLog2Bytes is the last size bucket (as planread's).
	MaxLog2Bytes = 40
	// MaxRanks bounds the (communicator, rank) pairs whose host is kept.
	MaxRanks = 1 << 18
)

// Comm is one communicator of a dump: its shape and where each of its
// ranks ran.
type Comm struct {
	ID, Name       string
	NRanks, NNodes int
	// RankHost is each rank's host; RankWhere where it was first seen
	// ("file object N").
	RankHost  map[int]string
	RankWhere map[int]string
}

// Header is an object's "header": the communicator and the rank.
type Header struct {
	ID       string `json:"id"`
	CommName string `json:"comm_name"`
	Rank     *int   `json:"rank"`
	NRanks   int    `json:"n_ranks"`
	NNodes   uint64 `json:"nnodes"`
}

// Metadata is an object's "metadata".
type Metadata struct {
	FormatVersion   string `json:"inspector_output_format_version"`
	GitRev          string `json:"git_rev"`
	RecMechanism    string `json:"rec_mechanism"`
	DumpTimestampUs uint64 `json:"dump_timestamp_us"`
	Hostname        string `json:"hostname"`
	PID             uint64 `json:"pid"`
}

// CollPerf is an object's "coll_perf" (the event traces of verbose mode
// are read past, not kept).
type CollPerf struct {
	Coll         string  `json:"coll"`
	SN           uint64  `json:"coll_sn"`
	MsgSizeBytes *uint64 `json:"coll_msg_size_bytes"`
	ExecTimeUs   *uint64 `json:"coll_exec_time_us"`
	TimingSource string  `json:"coll_timing_source"`
	AlgoBWGBps   float64 `json:"coll_algobw_gbs"`
	BusBWGBps    float64 `json:"coll_busbw_gbs"`
}

// Record is one object: one collective on one rank.
type Record struct {
	Header   Header          `json:"header"`
	Metadata Metadata        `json:"metadata"`
	CollPerf *CollPerf       `json:"coll_perf"`
	P2PPerf  json.RawMessage `json:"p2p_perf"`
}

// Collectives are the coll names NCCL's Inspector writes that the tuner
// sees (ncclFuncToString), to ncclFunc_t.
var Collectives = map[string]int{"Broadcast": 0, "Reduce": 1, "AllGather": 2, "ReduceScatter": 3, "AllReduce": 4}

// GroupKey names one group: a communicator (its id and shape), a
// collective (ncclFunc_t) and a size bucket (floor(log2(bytes)), clamped).
type GroupKey struct {
	CommID         string
	NRanks, NNodes int
	Coll           int
	Bucket         int
}

// Group is what a dump measured of one group.
type Group struct {
	GroupKey
	CommName string
	// Count is the records (collectives × ranks); MinBytes/MaxBytes the
	// message sizes seen.
	Count              uint64
	MinBytes, MaxBytes uint64
	sumBytes           float64
	// Time and bus bandwidth over the records: sum (for the mean), min
	// and max.
	sumUs, minUs, maxUs float64
	sumBus              float64
	// perHost: records and summed time per host, for a host whose ranks
	// are consistently slower (bounded by the dump's hosts).
	perHost map[string]*HostTime
	// TimingSources counts records per coll_timing_source ("kernel_gpu").
	TimingSources map[string]uint64
}

// HostTime is one host's share of a group.
type HostTime struct {
	Count uint64
	SumUs float64
}

// MeanBytes is the mean message size of the group's records.
func (g *Group) MeanBytes() uint64 { return uint64(math.Round(g.sumBytes / float64(g.Count))) }

// MeanUs is the mean execution time, µs.
func (g *Group) MeanUs() float64 { return g.sumUs / float64(g.Count) }

// MinUs and MaxUs are the fastest and slowest record, µs.
func (g *Group) MinUs() float64 { return g.minUs }

// MaxUs is the slowest record, µs.
func (g *Group) MaxUs() float64 { return g.maxUs }

// MeanBusBW is the mean of the records' bus bandwidth, GB/s.
func (g *Group) MeanBusBW() float64 { return g.sumBus / float64(g.Count) }

// Hosts returns each host's record count and mean time, by host name.
func (g *Group) Hosts() map[string]HostTime {
	out := make(map[string]HostTime, len(g.perHost))
	for h, t := range g.perHost {
		out[h] = *t
	}
	return out
}

// Aggregate is what a dump measured, group by group.
type Aggregate struct {
	groups map[GroupKey]*Group
	hosts  map[string]bool
	comms  map[string]*Comm
	ranks  int
	// Versions counts objects per inspector_output_format_version.
	Versions map[string]uint64
	// Records is the collective objects read; Skipped the others (p2p).
	Records, Skipped uint64
	// Files is the files read.
	Files int
}

// NewAggregate returns an empty Aggregate.
func NewAggregate() *Aggregate {
	return &Aggregate{groups: map[GroupKey]*Group{}, hosts: map[string]bool{}, comms: map[string]*Comm{}, Versions: map[string]uint64{}}
}

// Groups returns the groups, by communicator id, collective and bucket.
func (a *Aggregate) Groups() []*Group {
	out := make([]*Group, 0, len(a.groups))
	for _, g := range a.groups {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool {
		x, y := out[i].GroupKey, out[j].GroupKey
		if x.CommID != y.CommID {
			return x.CommID < y.CommID
		}
		if x.Coll != y.Coll {
			return x.Coll < y.Coll
		}
		return x.Bucket < y.Bucket
	})
	return out
}

// Comms returns the communicators, largest first (then by id).
func (a *Aggregate) Comms() []*Comm {
	out := make([]*Comm, 0, len(a.comms))
	for _, c := range a.comms {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].NRanks != out[j].NRanks {
			return out[i].NRanks > out[j].NRanks
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Hosts returns the comm's hosts in the order of their lowest rank.
func (c *Comm) Hosts() []string {
	ranks := make([]int, 0, len(c.RankHost))
	for r := range c.RankHost {
		ranks = append(ranks, r)
	}
	sort.Ints(ranks)
	var out []string
	seen := map[string]bool{}
	for _, r := range ranks {
		if h := c.RankHost[r]; !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}

// Hosts returns the host names the dump's ranks ran on, sorted.
func (a *Aggregate) Hosts() []string {
	out := make([]string, 0, len(a.hosts))
	for h := range a.hosts {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

// bucket is floor(log2(b)), 0 for b <= 1, clamped to MaxLog2Bytes.
func bucket(b uint64) int {
	if b <= 1 {
		return 0
	}
	return min(63-bits.LeadingZeros64(b), MaxLog2Bytes)
}

// add folds one valid collective record in; where names it for Comm.
func (a *Aggregate) add(r *Record, where string) error {
	cp := r.CollPerf
	c, ok := a.comms[r.Header.ID]
	if !ok {
		c = &Comm{ID: r.Header.ID, Name: r.Header.CommName, NRanks: r.Header.NRanks, NNodes: int(r.Header.NNodes),
			RankHost: map[int]string{}, RankWhere: map[int]string{}}
		a.comms[r.Header.ID] = c
	} else if c.NRanks != r.Header.NRanks || c.NNodes != int(r.Header.NNodes) {
		return fmt.Errorf("communicator %s: %d ranks over %d nodes here, %d over %d before", c.ID, r.Header.NRanks, r.Header.NNodes, c.NRanks, c.NNodes)
	}
	rank := *r.Header.Rank
	if h, ok := c.RankHost[rank]; !ok {
		if a.ranks == MaxRanks {
			return fmt.Errorf("more than %d (communicator, rank) pairs", MaxRanks)
		}
		a.ranks++
		c.RankHost[rank], c.RankWhere[rank] = r.Metadata.Hostname, where
	} else if h != r.Metadata.Hostname {
		return fmt.Errorf("communicator %s rank %d ran on %s here, on %s before (%s)", c.ID, rank, r.Metadata.Hostname, h, c.RankWhere[rank])
	}
	k := GroupKey{CommID: r.Header.ID, NRanks: r.Header.NRanks, NNodes: int(r.Header.NNodes), Coll: Collectives[cp.Coll],
		Bucket: bucket(*cp.MsgSizeBytes)}
	g, ok := a.groups[k]
	if !ok {
		if len(a.groups) == MaxGroups {
			return fmt.Errorf("more than %d (communicator, collective, size) groups", MaxGroups)
		}
		g = &Group{GroupKey: k, CommName: r.Header.CommName, MinBytes: math.MaxUint64, minUs: math.Inf(1),
			perHost: map[string]*HostTime{}, TimingSources: map[string]uint64{}}
		a.groups[k] = g
	}
	host := r.Metadata.Hostname
	if !a.hosts[host] {
		if len(a.hosts) == MaxHosts {
			return fmt.Errorf("more than %d host names", MaxHosts)
		}
		a.hosts[host] = true
	}
	b, us := *cp.MsgSizeBytes, float64(*cp.ExecTimeUs)
	g.Count++
	g.MinBytes, g.MaxBytes = min(g.MinBytes, b), max(g.MaxBytes, b)
	g.sumBytes += float64(b)
	g.sumUs += us
	g.minUs, g.maxUs = math.Min(g.minUs, us), math.Max(g.maxUs, us)
	g.sumBus += cp.BusBWGBps
	h := g.perHost[host]
	if h == nil {
		h = &HostTime{}
		g.perHost[host] = h
	}
	h.Count++
	h.SumUs += us
	if cp.TimingSource != "" && len(g.TimingSources) < 8 {
		g.TimingSources[cp.TimingSource]++
	}
	return nil
}

// check validates one record; the error names what is wrong.
func check(r *Record) error {
	h, m, cp := r.Header, r.Metadata, r.CollPerf
	switch {
	case h.ID == "" || len(h.ID) > 64:
		return errors.New("header.id missing or longer than 64 bytes")
	case h.Rank == nil || *h.Rank < 0 || h.NRanks < 1 || *h.Rank >= h.NRanks || h.NRanks > 1<<20:
		return fmt.Errorf("header: rank %v of n_ranks %d", h.Rank, h.NRanks)
	case h.NNodes < 1 || h.NNodes > uint64(h.NRanks):
		return fmt.Errorf("header: nnodes %d for %d ranks", h.NNodes, h.NRanks)
	case len(h.CommName) > 256:
		return errors.New("header.comm_name longer than 256 bytes")
	case m.Hostname == "" || len(m.Hostname) > 255 || strings.ContainsAny(m.Hostname, " \t\n/"):
		return fmt.Errorf("metadata.hostname %q", m.Hostname)
	case len(m.FormatVersion) > 32:
		return errors.New("metadata.inspector_output_format_version longer than 32 bytes")
	}
	if _, ok := Collectives[cp.Coll]; !ok {
		return fmt.Errorf("coll_perf.coll %q is not a collective NCCL's tuner sees", cp.Coll)
	}
	switch {
	case cp.MsgSizeBytes == nil || *cp.MsgSizeBytes == 0 || *cp.MsgSizeBytes > 1<<50:
		return errors.New("coll_perf.coll_msg_size_bytes missing, 0 or above 1 PiB")
	case cp.ExecTimeUs == nil || *cp.ExecTimeUs == 0 || *cp.ExecTimeUs > 1<<40:
		return errors.New("coll_perf.coll_exec_time_us missing, 0 or out of range")
	case math.IsNaN(cp.BusBWGBps) || cp.BusBWGBps < 0 || cp.BusBWGBps > 1e6 || math.IsNaN(cp.AlgoBWGBps) || cp.AlgoBWGBps < 0 || cp.AlgoBWGBps > 1e6:
		return errors.New("coll_perf bandwidth out of range")
	case len(cp.TimingSource) > 32:
		return errors.New("coll_perf.coll_timing_source longer than 32 bytes")
	}
	return nil
}

// boundedReader fails a read that would take the current object past
// MaxObjectBytes: dec.InputOffset() says where the last object ended.
type boundedReader struct {
	r    io.Reader
	read int64
	end  func() int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.read-b.end() > MaxObjectBytes {
		return 0, fmt.Errorf("an object longer than %d bytes", MaxObjectBytes)
	}
	if len(p) > 32<<10 {
		p = p[:32<<10]
	}
	n, err := b.r.Read(p)
	b.read += int64(n)
	return n, err
}

// Read folds every object of one stream (name says where, for errors)
// into a. An error names the object's position (its ordinal and byte
// offset) and what is wrong; a is then not to be used.
func (a *Aggregate) Read(name string, r io.Reader) error {
	br := &boundedReader{r: bufio.NewReaderSize(r, 64<<10)}
	dec := json.NewDecoder(br)
	br.end = dec.InputOffset
	for n := 1; ; n++ {
		off := dec.InputOffset()
		var rec Record
		if err := dec.Decode(&rec); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%s: object %d (byte %d): %w", name, n, off, err)
		}
		if rec.CollPerf == nil {
			if len(rec.P2PPerf) > 0 {
				a.Skipped++
				continue
			}
			return fmt.Errorf("%s: object %d (byte %d): neither coll_perf nor p2p_perf", name, n, off)
		}
		if err := check(&rec); err != nil {
			return fmt.Errorf("%s: object %d (byte %d): %w", name, n, off, err)
		}
		if err := a.add(&rec, fmt.Sprintf("%s object %d", name, n)); err != nil {
			return fmt.Errorf("%s: object %d (byte %d): %w", name, n, off, err)
		}
		a.Records++
		a.Versions[rec.Metadata.FormatVersion]++
		if len(a.Versions) > 16 {
			return fmt.Errorf("%s: more than 16 format versions", name)
		}
	}
}

// ReadPath reads a file, or every regular file of a directory (not
// recursively: the Inspector writes <hostname>-pid<pid>.log into one
// directory), in name order.
func ReadPath(path string) (*Aggregate, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	files := []string{path}
	if st.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, err
		}
		files = files[:0]
		for _, e := range entries {
			if e.Type().IsRegular() {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
		if len(files) > MaxFiles {
			return nil, fmt.Errorf("%s: %d files, more than %d", path, len(files), MaxFiles)
		}
	}
	a := NewAggregate()
	for _, f := range files {
		if err := readFile(a, f); err != nil {
			return nil, err
		}
		a.Files++
	}
	if a.Records == 0 {
		return nil, fmt.Errorf("%s: no collective records", path)
	}
	return a, nil
}

func readFile(a *Aggregate, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return a.Read(path, f)
}
