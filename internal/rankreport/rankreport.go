package rankreport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"unicode/utf8"
)

// Magic opens a report frame; HeaderLen is the header's size.
const (
	Magic     = "GINP"
	Version   = 1
	HeaderLen = 12
)

// Bounds of one report (the plugin enforces the same ones).
const (
	MaxBody     = 65536
	MaxJobID    = 128
	MaxColls    = 64
	MaxPeers    = 256
	MaxArrivals = 64
	// SampleEvery: arrivals are the collectives whose sequence number is a
	// multiple of it.
	SampleEvery = 4
	// MaxRanks bounds nranks: NCCL's own communicators stay far below it.
	MaxRanks = 1 << 20
)

// Func is a collective's kind, numbered as NCCL's ncclFunc_t.
type Func uint8

// The collectives NCCL names; FuncOther is any other function.
const (
	FuncBroadcast     Func = 0
	FuncReduce        Func = 1
	FuncAllGather     Func = 2
	FuncReduceScatter Func = 3
	FuncAllReduce     Func = 4
	FuncOther         Func = 255
)

var funcNames = map[Func]string{
	FuncBroadcast: "broadcast", FuncReduce: "reduce", FuncAllGather: "all_gather",
	FuncReduceScatter: "reduce_scatter", FuncAllReduce: "all_reduce", FuncOther: "other",
}

func (f Func) String() string {
	if s, ok := funcNames[f]; ok {
		return s
	}
	return fmt.Sprintf("func(%d)", uint8(f))
}

// Dir is a proxy step's direction.
type Dir uint8

// Directions.
const (
	Recv Dir = 0
	Send Dir = 1
)

func (d Dir) String() string {
	if d == Send {
		return "send"
	}
	return "recv"
}

// Wait indices: a send's GPU, peer and network waits, a receive's network,
// flush and GPU waits.
const (
	SendGPU  = 0
	SendPeer = 1
	SendNet  = 2
	RecvNet  = 0
	RecvFlsh = 1
	RecvGPU  = 2
)

// Coll is one (kind, size) aggregate of a window.
type Coll struct {
	Func     Func
	Log2Size uint8
	Count    uint32
	SumNs    uint64
	MaxNs    uint64
}

// Peer is one (peer, direction) aggregate of a window's proxy steps.
type Peer struct {
	Peer   uint32
	Dir    Dir
	Bytes  uint64
	Steps  uint32
	WaitNs [3]uint64
}

// Arrival is when this rank started a sampled collective.
type Arrival struct {
	Seq     uint64
	StartNs uint64
}

// Report is one rank's window.
type Report struct {
	CommID    uint64
	NRanks    uint32
	NNodes    uint32
	Rank      uint32
	LocalRank int32 // -1 unknown
	GPU       int32 // -1 unknown
	PID       uint32
	Job       string
	StartNs   uint64
	EndNs     uint64
	Started   uint64
	Done      uint64
	// InFlightSinceNs is when the oldest collective in flight started; 0
	// when none is.
	InFlightSinceNs uint64
	Dropped         uint64
	Colls           []Coll
	Peers           []Peer
	Arrivals        []Arrival
}

// ErrMagic says the bytes are not a report frame.
var ErrMagic = errors.New("rankreport: not a report frame (magic)")

// BodyLen checks a frame header and returns its body's length.
func BodyLen(h []byte) (int, error) {
	if len(h) < HeaderLen {
		return 0, fmt.Errorf("rankreport: header of %d bytes, want %d", len(h), HeaderLen)
	}
	if string(h[:4]) != Magic {
		return 0, ErrMagic
	}
	if h[4] != Version {
		return 0, fmt.Errorf("rankreport: version %d, this agent reads %d", h[4], Version)
	}
	n := binary.BigEndian.Uint32(h[8:12])
	if n > MaxBody {
		return 0, fmt.Errorf("rankreport: body of %d bytes, at most %d", n, MaxBody)
	}
	return int(n), nil
}

// Decode reads one whole frame (header and body).
func Decode(frame []byte) (Report, error) {
	n, err := BodyLen(frame)
	if err != nil {
		return Report{}, err
	}
	if len(frame) != HeaderLen+n {
		return Report{}, fmt.Errorf("rankreport: frame of %d bytes, header says %d", len(frame), HeaderLen+n)
	}
	return DecodeBody(frame[HeaderLen:])
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b) < n {
		r.err = fmt.Errorf("rankreport: body ends in %s", what)
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8(what string) uint8 {
	if v := r.take(1, what); v != nil {
		return v[0]
	}
	return 0
}

func (r *reader) u16(what string) uint16 {
	if v := r.take(2, what); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (r *reader) u32(what string) uint32 {
	if v := r.take(4, what); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (r *reader) u64(what string) uint64 {
	if v := r.take(8, what); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (r *reader) count(max int, what string) int {
	n := int(r.u16(what + " count"))
	if r.err == nil && n > max {
		r.err = fmt.Errorf("rankreport: %d %s, at most %d", n, what, max)
	}
	return n
}

// DecodeBody reads a frame's body.
func DecodeBody(b []byte) (Report, error) {
	r := &reader{b: b}
	var rep Report
	rep.CommID = r.u64("comm id")
	rep.NRanks = r.u32("nranks")
	rep.NNodes = r.u32("nnodes")
	rep.Rank = r.u32("rank")
	rep.LocalRank = int32(r.u32("local rank"))
	rep.GPU = int32(r.u32("gpu"))
	rep.PID = r.u32("pid")
	jl := int(r.u16("job length"))
	if r.err == nil && jl > MaxJobID {
		return Report{}, fmt.Errorf("rankreport: job id of %d bytes, at most %d", jl, MaxJobID)
	}
	job := r.take(jl, "job id")
	rep.StartNs = r.u64("window start")
	rep.EndNs = r.u64("window end")
	rep.Started = r.u64("collectives started")
	rep.Done = r.u64("collectives done")
	rep.InFlightSinceNs = r.u64("in flight since")
	rep.Dropped = r.u64("dropped")
	if r.err != nil {
		return Report{}, r.err
	}
	if !utf8.Valid(job) {
		return Report{}, errors.New("rankreport: job id is not UTF-8")
	}
	for _, c := range string(job) {
		if c < 0x20 || c == 0x7f {
			return Report{}, errors.New("rankreport: job id has a control character")
		}
	}
	rep.Job = string(job)
	if n := r.count(MaxColls, "collective aggregates"); r.err == nil && n > 0 {
		rep.Colls = make([]Coll, 0, min(n, len(r.b)/24))
		for range n {
			c := Coll{Func: Func(r.u8("func")), Log2Size: r.u8("size")}
			r.u16("pad")
			c.Count = r.u32("count")
			c.SumNs = r.u64("sum")
			c.MaxNs = r.u64("max")
			if r.err != nil {
				break
			}
			rep.Colls = append(rep.Colls, c)
		}
	}
	if n := r.count(MaxPeers, "peer aggregates"); r.err == nil && n > 0 {
		rep.Peers = make([]Peer, 0, min(n, len(r.b)/48))
		for range n {
			p := Peer{Peer: r.u32("peer"), Dir: Dir(r.u8("dir"))}
			r.u8("pad")
			r.u16("pad")
			p.Bytes = r.u64("bytes")
			p.Steps = r.u32("steps")
			r.u32("pad")
			for i := range p.WaitNs {
				p.WaitNs[i] = r.u64("wait")
			}
			if r.err != nil {
				break
			}
			rep.Peers = append(rep.Peers, p)
		}
	}
	if n := r.count(MaxArrivals, "arrivals"); r.err == nil && n > 0 {
		rep.Arrivals = make([]Arrival, 0, min(n, len(r.b)/16))
		for range n {
			a := Arrival{Seq: r.u64("seq"), StartNs: r.u64("start")}
			if r.err != nil {
				break
			}
			rep.Arrivals = append(rep.Arrivals, a)
		}
	}
	if r.err != nil {
		return Report{}, r.err
	}
	if len(r.b) != 0 {
		return Report{}, fmt.Errorf("rankreport: %d bytes after the arrivals", len(r.b))
	}
	return rep, rep.Validate()
}

// Validate checks a report's values against each other.
func (rep *Report) Validate() error {
	switch {
	case rep.NRanks == 0 || rep.NRanks > MaxRanks:
		return fmt.Errorf("rankreport: nranks %d, want 1..%d", rep.NRanks, MaxRanks)
	case rep.Rank >= rep.NRanks:
		return fmt.Errorf("rankreport: rank %d of %d ranks", rep.Rank, rep.NRanks)
	case rep.NNodes == 0 || rep.NNodes > rep.NRanks:
		return fmt.Errorf("rankreport: %d nodes for %d ranks", rep.NNodes, rep.NRanks)
	case rep.LocalRank < -1 || rep.GPU < -1:
		return fmt.Errorf("rankreport: local rank %d, GPU %d (-1 is unknown)", rep.LocalRank, rep.GPU)
	case rep.StartNs > rep.EndNs:
		return fmt.Errorf("rankreport: window starts at %d, after its end %d", rep.StartNs, rep.EndNs)
	case rep.Done > rep.Started:
		return fmt.Errorf("rankreport: %d collectives done of %d started", rep.Done, rep.Started)
	case rep.InFlightSinceNs > rep.EndNs:
		return fmt.Errorf("rankreport: a collective in flight since %d, after the window's end %d", rep.InFlightSinceNs, rep.EndNs)
	}
	seen := make(map[[2]uint32]bool, len(rep.Peers))
	for _, p := range rep.Peers {
		switch {
		case p.Peer >= rep.NRanks:
			return fmt.Errorf("rankreport: peer %d of %d ranks", p.Peer, rep.NRanks)
		case p.Dir > Send:
			return fmt.Errorf("rankreport: direction %d of peer %d", p.Dir, p.Peer)
		case p.Steps == 0 && (p.Bytes != 0 || p.WaitNs != [3]uint64{}):
			return fmt.Errorf("rankreport: peer %d %s: bytes or waits without steps", p.Peer, p.Dir)
		}
		k := [2]uint32{p.Peer, uint32(p.Dir)}
		if seen[k] {
			return fmt.Errorf("rankreport: peer %d %s twice", p.Peer, p.Dir)
		}
		seen[k] = true
	}
	for _, c := range rep.Colls {
		switch {
		case c.Log2Size > 63:
			return fmt.Errorf("rankreport: collective size 2^%d", c.Log2Size)
		case c.Count == 0:
			return fmt.Errorf("rankreport: %s aggregate of no collectives", c.Func)
		case c.MaxNs > c.SumNs:
			return fmt.Errorf("rankreport: %s: longest %d ns over a sum of %d ns", c.Func, c.MaxNs, c.SumNs)
		}
	}
	for _, a := range rep.Arrivals {
		if a.Seq%SampleEvery != 0 {
			return fmt.Errorf("rankreport: arrival of collective %d, not a multiple of %d", a.Seq, SampleEvery)
		}
	}
	return nil
}

// Log2 is the floor of log2(n) (0 for 0), the size class the plugin uses.
func Log2(n uint64) uint8 {
	if n == 0 {
		return 0
	}
	return uint8(bits.Len64(n) - 1)
}
