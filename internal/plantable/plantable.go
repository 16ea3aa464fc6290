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
	maxString  = 128
	version    = 1
	cellBytes  = 4
	shapeBytes = 8 + NumColls*NumBuckets*cellBytes
	// MaxBytes bounds an encoded table.
	MaxBytes = 4 + 3 + 2 + maxString + 2 + maxString + MaxShapes*shapeBytes + 8
)

var magic = [4]byte{'G', 'I', 'N', 'T'}

// Cell is one decision: Algo/Proto -1 leave the choice to NCCL; Channels 0
// keeps NCCL's channel count.
type Cell struct {
	Algo, Proto int8
	Channels    int16
}

// Leave is "NCCL decides".
var Leave = Cell{Algo: -1, Proto: -1}

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

// CellOf turns a plan rule into a cell. Rules that name no algorithm, or an
// algorithm or protocol outside NCCL's ranges, leave the choice to NCCL.
func CellOf(r *ginv1.PlanRule, ok bool) Cell {
	if !ok || r == nil {
		return Leave
	}
	c := Leave
	if ch := r.GetChannels(); ch > 0 {
		c.Channels = int16(min(ch, math.MaxInt16))
	}
	a, p := int(r.GetAlgorithm())-1, int(r.GetProtocol())-1
	if a >= 0 && a < MaxAlgos && p >= 0 && p < MaxProtos {
		c.Algo, c.Proto = int8(a), int8(p)
	}
	return c
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
			s := Shape{NRanks: k[0], NNodes: k[1]}
			for coll := range NumColls {
				for b := range NumBuckets {
					s.Cells[coll][b] = Leave
				}
			}
			t.Shapes = append(t.Shapes, s)
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

// Encode writes the table of job's plan (content hash) in the C form.
func Encode(job, hash string, t *Table) ([]byte, error) {
	if len(job) > maxString || len(hash) > maxString || len(t.Shapes) > MaxShapes {
		return nil, fmt.Errorf("plantable: job id %d bytes, hash %d bytes, %d shapes: over the limits", len(job), len(hash), len(t.Shapes))
	}
	b := make([]byte, 0, MaxBytes)
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
				b = append(b, byte(c.Algo), byte(c.Proto))
				b = binary.BigEndian.AppendUint16(b, uint16(c.Channels))
			}
		}
	}
	return binary.BigEndian.AppendUint64(b, fnv1a(b)), nil
}

// Decode checks and reads an encoded table as the C shim does.
func Decode(b []byte) (*Encoded, error) {
	if len(b) < 4+3+2+2+8 || len(b) > MaxBytes {
		return nil, fmt.Errorf("plantable: %d bytes, not a table", len(b))
	}
	body, sum := b[:len(b)-8], binary.BigEndian.Uint64(b[len(b)-8:])
	if fnv1a(body) != sum {
		return nil, errors.New("plantable: checksum mismatch (corrupt or truncated)")
	}
	if [4]byte(body[:4]) != magic || body[4] != version {
		return nil, errors.New("plantable: not a GIN table of version 1")
	}
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
	if len(rest) != n*shapeBytes {
		return nil, fmt.Errorf("plantable: %d bytes of shapes, want %d", len(rest), n*shapeBytes)
	}
	for range n {
		s := Shape{NRanks: binary.BigEndian.Uint32(rest), NNodes: binary.BigEndian.Uint32(rest[4:])}
		rest = rest[8:]
		for coll := range NumColls {
			for k := range NumBuckets {
				c := Cell{Algo: int8(rest[0]), Proto: int8(rest[1]), Channels: int16(binary.BigEndian.Uint16(rest[2:]))}
				rest = rest[cellBytes:]
				if c.Algo < -1 || c.Algo >= MaxAlgos || c.Proto < -1 || c.Proto >= MaxProtos || c.Channels < 0 {
					return nil, fmt.Errorf("plantable: cell out of range %+v", c)
				}
				s.Cells[coll][k] = c
			}
		}
		e.Table.Shapes = append(e.Table.Shapes, s)
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
