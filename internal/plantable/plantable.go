package plantable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/planread"
)

// Table dimensions, as the C side's (shim/tuner.h).
const (
	NumColls   = 5  // ncclFunc_t 0..4
	NumBuckets = 64 // floor(log2(nBytes)) of a size_t
	MaxShapes  = 8  // GIN_MAX_SHAPES
	MaxAlgos   = 7  // NCCL_NUM_ALGORITHMS today
	MaxProtos  = 3
	// MaxChoices bounds a rule's ordered choices (GIN_MAX_CHOICES).
	MaxChoices = planread.MaxChoices
	maxString  = 128
	version    = 2
	// choiceBytes: i8 algo, i8 proto, u8 flags, i16 channels, u32 min and
	// max NCCL version.
	choiceBytes = 13
	// version 1's cell: i8 algo, i8 proto, i16 channels.
	v1CellBytes    = 4
	maxShapeBytes  = 8 + NumColls*NumBuckets*(1+MaxChoices*choiceBytes)
	headerMaxBytes = 4 + 3 + 2 + maxString + 2 + maxString
	// MaxBytes bounds an encoded table.
	MaxBytes = headerMaxBytes + MaxShapes*maxShapeBytes + 8
)

// Choice flags (GIN_CHOICE_*).
const (
	// FlagIfOffered: when NCCL offers the algorithm (for Proto -1 any of
	// its cells, else that cell), leave the choice to NCCL.
	FlagIfOffered = 1
	knownFlags    = FlagIfOffered
)

var magic = [4]byte{'G', 'I', 'N', 'T'}

// Choice is one entry of a bucket's ordered choices. Algo -1 is NCCL's
// choice, unconditionally (with Channels when non-zero); otherwise the
// choice is usable when NCCL's cost table marks its cell usable (Proto -1
// with FlagIfOffered: any cell of Algo). A usable forcing choice (no
// FlagIfOffered) forces its cell; a usable FlagIfOffered choice leaves
// NCCL's choice. MinVersion/MaxVersion (NCCL_VERSION_CODE) bound the
// release series its measurements cover; 0 when it stands on none.
type Choice struct {
	Algo, Proto            int8
	Flags                  uint8
	Channels               int16
	MinVersion, MaxVersion uint32
}

// Cell is one bucket's ordered choices (N of them); N 0 leaves the choice
// to NCCL.
type Cell struct {
	N       uint8
	Choices [MaxChoices]Choice
}

// Leave is "NCCL decides".
var Leave = Cell{}

// Shape is one communicator shape's cells.
type Shape struct {
	NRanks, NNodes uint32
	Cells          [NumColls][NumBuckets]Cell
}

// Table is a compiled plan.
type Table struct {
	Shapes  []Shape
	Dropped int // shapes beyond MaxShapes
}

// choiceOf turns a plan choice into a table choice; ok is false when it
// names an algorithm or protocol outside NCCL's ranges, or forces an
// algorithm without a protocol (such a choice is dropped).
func choiceOf(c *ginv1.PlanChoice) (Choice, bool) {
	ch := Choice{Algo: -1, Proto: -1, MinVersion: c.GetMinNcclVersion(), MaxVersion: c.GetMaxNcclVersion()}
	if n := c.GetChannels(); n > 0 {
		ch.Channels = int16(min(n, math.MaxInt16))
	}
	a, p := int(c.GetAlgorithm())-1, int(c.GetProtocol())-1
	if a >= MaxAlgos || p >= MaxProtos {
		return Choice{}, false
	}
	if a < 0 {
		return ch, true // NCCL's choice
	}
	ch.Algo = int8(a)
	if p >= 0 {
		ch.Proto = int8(p)
	}
	if c.GetNcclIfOffered() {
		ch.Flags |= FlagIfOffered
	} else if p < 0 {
		return Choice{}, false
	}
	return ch, true
}

// CellOf turns a plan rule into a cell: its choices, or for a rule
// without any (plans written before choices existed) its one
// algorithm/protocol/channels. A rule that names no algorithm and no
// channels, or an algorithm or protocol outside NCCL's ranges, leaves the
// choice to NCCL.
func CellOf(r *ginv1.PlanRule, ok bool) Cell {
	if !ok || r == nil {
		return Leave
	}
	var c Cell
	if cs := r.GetChoices(); len(cs) > 0 {
		for _, pc := range cs {
			if int(c.N) == MaxChoices {
				break
			}
			if ch, ok := choiceOf(pc); ok {
				c.Choices[c.N] = ch
				c.N++
			}
		}
		return c
	}
	one := Choice{Algo: -1, Proto: -1}
	if ch := r.GetChannels(); ch > 0 {
		one.Channels = int16(min(ch, math.MaxInt16))
	}
	a, p := int(r.GetAlgorithm())-1, int(r.GetProtocol())-1
	if a >= 0 && a < MaxAlgos && p >= 0 && p < MaxProtos {
		one.Algo, one.Proto = int8(a), int8(p)
	}
	if one.Algo < 0 && one.Channels == 0 {
		return Leave
	}
	c.Choices[0], c.N = one, 1
	return c
}

// Mask is NCCL's usable cells as the cost table shows them: bit
// algo*MaxProtos+proto is set when the cell is not NCCL_ALGO_PROTO_IGNORE.
type Mask uint32

// Usable reports whether the mask offers (algo, proto).
func (m Mask) Usable(algo, proto int) bool {
	return algo >= 0 && algo < MaxAlgos && proto >= 0 && proto < MaxProtos && m&(1<<(algo*MaxProtos+proto)) != 0
}

// Resolution is what a cell resolves to for one cost table: Index the
// choice taken (-1: none usable, NCCL's choice), Algo/Proto the cell
// forced (-1: NCCL's choice), Channels 0 to keep NCCL's count.
type Resolution struct {
	Index, Algo, Proto int
	Channels           int16
}

// Resolve walks the cell's choices as the C shim does: the first usable
// one, skipping those the version rule excludes for running (0: unknown,
// every choice applies).
func (c Cell) Resolve(m Mask, numAlgo, numProto int, running uint32) Resolution {
	for i := range int(c.N) {
		ch := c.Choices[i]
		if !VersionApplies(ch, running) {
			continue
		}
		if ch.Algo < 0 {
			return Resolution{Index: i, Algo: -1, Proto: -1, Channels: ch.Channels}
		}
		a := int(ch.Algo)
		if a >= numAlgo {
			continue
		}
		if ch.Proto < 0 { // FlagIfOffered, any protocol
			for p := range numProto {
				if m.Usable(a, p) {
					return Resolution{Index: i, Algo: -1, Proto: -1, Channels: ch.Channels}
				}
			}
			continue
		}
		p := int(ch.Proto)
		if p >= numProto || !m.Usable(a, p) {
			continue
		}
		if ch.Flags&FlagIfOffered != 0 {
			return Resolution{Index: i, Algo: -1, Proto: -1, Channels: ch.Channels}
		}
		return Resolution{Index: i, Algo: a, Proto: p, Channels: ch.Channels}
	}
	return Resolution{Index: -1, Algo: -1, Proto: -1}
}

// Series is a version code's release series, major*100+minor (NCCL 2.9 and
// later: NCCL_VERSION_CODE = major*10000 + minor*100 + patch).
func Series(code uint32) uint32 { return code / 100 }

// VersionApplies is the version rule: a choice that stands on
// measurements (MinVersion > 0) applies on a running NCCL whose release
// series (major.minor) lies from the oldest measurement's series to the
// newest's; patch releases of a series are taken to choose alike. Any
// other choice applies everywhere, and so does every choice when the
// running version is unknown (0).
func VersionApplies(ch Choice, running uint32) bool {
	if ch.MinVersion == 0 || running == 0 {
		return true
	}
	s := Series(running)
	return Series(ch.MinVersion) <= s && s <= Series(ch.MaxVersion)
}

// Decide is what the table answers for a call: the plan's rule for
// (coll, nRanks, nNodes, nBytes) as a cell (planread.Lookup).
func Decide(p *ginv1.Plan, coll int, nRanks, nNodes uint32, nBytes uint64) Cell {
	r, ok := planread.Lookup(p, ginv1.Collective(coll+1), int(nRanks), int(nNodes), nBytes)
	return CellOf(r, ok)
}

// Compile turns a verified plan into cells: the plan's distinct
// (n_ranks, n_nodes) shapes in rule order (at most MaxShapes), and for
// each rule its buckets. Verify guarantees that rules do not overlap, so
// this is what Decide answers for every (shape, collective, bucket), in one
// pass over the rules; sizes past the last bucket take its cell, as Lookup
// clamps them.
func Compile(p *ginv1.Plan) *Table {
	t := &Table{}
	index := map[[2]uint32]int{}
	for _, r := range p.GetRules() {
		k := [2]uint32{r.GetNRanks(), r.GetNNodes()}
		i, seen := index[k]
		if !seen {
			if len(t.Shapes) == MaxShapes {
				index[k] = -1
				t.Dropped++
				continue
			}
			i = len(t.Shapes)
			index[k] = i
			t.Shapes = append(t.Shapes, Shape{NRanks: k[0], NNodes: k[1]})
		}
		coll := int(r.GetCollective()) - 1
		if i < 0 || coll < 0 || coll >= NumColls {
			continue
		}
		cl := CellOf(r, true)
		for b := r.GetMinLog2Bytes(); b <= min(r.GetMaxLog2Bytes(), planread.MaxLog2Bytes); b++ {
			t.Shapes[i].Cells[coll][b] = cl
		}
	}
	for i := range t.Shapes {
		for coll := range NumColls {
			for b := planread.MaxLog2Bytes + 1; b < NumBuckets; b++ {
				t.Shapes[i].Cells[coll][b] = t.Shapes[i].Cells[coll][planread.MaxLog2Bytes]
			}
		}
	}
	return t
}

// Encoded is a decoded table with what it names.
type Encoded struct {
	JobID, Hash string
	Table       *Table
}

// Encode writes the table of job's plan (content hash) in the C form
// (version 2).
func Encode(job, hash string, t *Table) ([]byte, error) {
	if len(job) > maxString || len(hash) > maxString || len(t.Shapes) > MaxShapes {
		return nil, fmt.Errorf("plantable: job id %d bytes, hash %d bytes, %d shapes: over the limits", len(job), len(hash), len(t.Shapes))
	}
	b := make([]byte, 0, 64+len(t.Shapes)*(8+NumColls*NumBuckets*(1+choiceBytes)))
	b = append(b, magic[:]...)
	b = append(b, version, byte(len(t.Shapes)), byte(min(t.Dropped, 255)))
	b = binary.BigEndian.AppendUint16(b, uint16(len(job)))
	b = append(b, job...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(hash)))
	b = append(b, hash...)
	for _, s := range t.Shapes {
		b = binary.BigEndian.AppendUint32(b, s.NRanks)
		b = binary.BigEndian.AppendUint32(b, s.NNodes)
		for coll := range NumColls {
			for k := range NumBuckets {
				c := s.Cells[coll][k]
				if c.N > MaxChoices {
					return nil, fmt.Errorf("plantable: %d choices in a cell, more than %d", c.N, MaxChoices)
				}
				b = append(b, c.N)
				for _, ch := range c.Choices[:c.N] {
					b = append(b, byte(ch.Algo), byte(ch.Proto), ch.Flags)
					b = binary.BigEndian.AppendUint16(b, uint16(ch.Channels))
					b = binary.BigEndian.AppendUint32(b, ch.MinVersion)
					b = binary.BigEndian.AppendUint32(b, ch.MaxVersion)
				}
			}
		}
	}
	return binary.BigEndian.AppendUint64(b, fnv1a(b)), nil
}

// validChoice is the C shim's check of one choice.
func validChoice(c Choice) bool {
	switch {
	case c.Algo < -1 || c.Algo >= MaxAlgos || c.Proto < -1 || c.Proto >= MaxProtos || c.Channels < 0 || c.Flags&^knownFlags != 0:
		return false
	case c.Algo < 0 && (c.Proto >= 0 || c.Flags != 0):
		return false
	case c.Algo >= 0 && c.Proto < 0 && c.Flags&FlagIfOffered == 0:
		return false
	case (c.MinVersion == 0) != (c.MaxVersion == 0) || c.MinVersion > c.MaxVersion:
		return false
	}
	return true
}

// Decode checks and reads an encoded table as the C shim does: version 2,
// or version 1 (one cell per bucket, from agents before choices), read as
// one choice per bucket.
func Decode(b []byte) (*Encoded, error) {
	if len(b) < 4+3+2+2+8 || len(b) > MaxBytes {
		return nil, fmt.Errorf("plantable: %d bytes, not a table", len(b))
	}
	body, sum := b[:len(b)-8], binary.BigEndian.Uint64(b[len(b)-8:])
	if fnv1a(body) != sum {
		return nil, errors.New("plantable: checksum mismatch (corrupt or truncated)")
	}
	if [4]byte(body[:4]) != magic || (body[4] != version && body[4] != 1) {
		return nil, errors.New("plantable: not a GIN table of version 1 or 2")
	}
	v1 := body[4] == 1
	n, dropped := int(body[5]), int(body[6])
	if n > MaxShapes {
		return nil, fmt.Errorf("plantable: %d shapes, more than %d", n, MaxShapes)
	}
	rest := body[7:]
	str := func() (string, error) {
		if len(rest) < 2 {
			return "", errors.New("plantable: truncated")
		}
		l := int(binary.BigEndian.Uint16(rest))
		if l > maxString || len(rest) < 2+l {
			return "", errors.New("plantable: bad string length")
		}
		s := string(rest[2 : 2+l])
		rest = rest[2+l:]
		return s, nil
	}
	e := &Encoded{Table: &Table{Dropped: dropped}}
	var err error
	if e.JobID, err = str(); err != nil {
		return nil, err
	}
	if e.Hash, err = str(); err != nil {
		return nil, err
	}
	if v1 && len(rest) != n*(8+NumColls*NumBuckets*v1CellBytes) {
		return nil, fmt.Errorf("plantable: %d bytes of shapes, want %d", len(rest), n*(8+NumColls*NumBuckets*v1CellBytes))
	}
	truncated := fmt.Errorf("plantable: %d bytes of shapes, truncated", len(rest))
	for range n {
		if len(rest) < 8 {
			return nil, truncated
		}
		s := Shape{NRanks: binary.BigEndian.Uint32(rest), NNodes: binary.BigEndian.Uint32(rest[4:])}
		rest = rest[8:]
		for coll := range NumColls {
			for k := range NumBuckets {
				var c Cell
				if v1 {
					one := Choice{Algo: int8(rest[0]), Proto: int8(rest[1]), Channels: int16(binary.BigEndian.Uint16(rest[2:]))}
					rest = rest[v1CellBytes:]
					if one.Algo < -1 || one.Algo >= MaxAlgos || one.Proto < -1 || one.Proto >= MaxProtos || one.Channels < 0 {
						return nil, fmt.Errorf("plantable: cell out of range %+v", one)
					}
					if one.Algo < 0 {
						one.Proto = -1
					}
					if one.Algo >= 0 && one.Proto < 0 {
						one.Algo = -1
					}
					if one.Algo >= 0 || one.Channels > 0 {
						c.N, c.Choices[0] = 1, one
					}
				} else {
					if len(rest) < 1 || int(rest[0]) > MaxChoices || len(rest) < 1+int(rest[0])*choiceBytes {
						return nil, truncated
					}
					c.N = rest[0]
					rest = rest[1:]
					for i := range int(c.N) {
						ch := Choice{Algo: int8(rest[0]), Proto: int8(rest[1]), Flags: rest[2],
							Channels: int16(binary.BigEndian.Uint16(rest[3:])), MinVersion: binary.BigEndian.Uint32(rest[5:]),
							MaxVersion: binary.BigEndian.Uint32(rest[9:])}
						rest = rest[choiceBytes:]
						if !validChoice(ch) {
							return nil, fmt.Errorf("plantable: choice out of range %+v", ch)
						}
						c.Choices[i] = ch
					}
				}
				s.Cells[coll][k] = c
			}
		}
		e.Table.Shapes = append(e.Table.Shapes, s)
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("plantable: %d bytes after the last shape", len(rest))
	}
	return e, nil
}

// fnv1a is the 64-bit FNV-1a hash (what shim.c computes).
func fnv1a(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}
