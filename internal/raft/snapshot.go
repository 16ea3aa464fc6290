package raft

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
)

// Snapshot file layout: magic (8 bytes) | payload length (uint64 BE) |
// SHA-256 of the payload (32 bytes) | payload (gin.state.v1.Snapshot).
var snapshotMagic = [8]byte{'G', 'I', 'N', 'S', 'N', 'A', 'P', '1'}

// MaxSnapshotBytes bounds what ReadSnapshot accepts.
const MaxSnapshotBytes = 8 << 30

// ErrCorruptSnapshot is returned for a snapshot that fails its checks.
var ErrCorruptSnapshot = errors.New("corrupt snapshot")

// snapshotNodesField is gin.state.v1.Snapshot.nodes, which ReadSnapshot
// hands over one record at a time.
const snapshotNodesField = 2

// SnapshotPayload is what WriteSnapshot writes: a gin.state.v1.Snapshot in
// deterministic wire form, yielded in pieces (each valid only during the
// call), the same bytes every time Encode is called. state.Capture is one:
// it expands one node's inventory at a time, so a snapshot of 25,000 nodes
// is never held in memory whole.
type SnapshotPayload interface {
	Encode(yield func(piece []byte) error) error
}

// WholeSnapshot is a snapshot message as a SnapshotPayload.
type WholeSnapshot struct{ Snap *statev1.Snapshot }

// Encode yields the message's deterministic encoding in one piece.
func (w WholeSnapshot) Encode(yield func([]byte) error) error {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(w.Snap)
	if err != nil {
		return fmt.Errorf("snapshot: marshal: %w", err)
	}
	return yield(b)
}

// WriteSnapshot writes p in the checksummed layout. The header holds the
// payload's length and checksum, so p is encoded twice: once to measure
// and hash it, once to write it (checked against the first).
func WriteSnapshot(w io.Writer, p SnapshotPayload) error {
	n, sum, err := measure(p, nil)
	if err != nil {
		return fmt.Errorf("snapshot: encode: %w", err)
	}
	var hdr [8 + 8 + 32]byte
	copy(hdr[:8], snapshotMagic[:])
	binary.BigEndian.PutUint64(hdr[8:16], n)
	copy(hdr[16:], sum)
	if _, err := w.Write(hdr[:]); err != nil {
		return fmt.Errorf("snapshot: write header: %w", err)
	}
	n2, sum2, err := measure(p, w)
	if err != nil {
		return fmt.Errorf("snapshot: write payload: %w", err)
	}
	if n2 != n || !bytes.Equal(sum, sum2) {
		return errors.New("snapshot: the payload changed between its two encodings")
	}
	return nil
}

// measure encodes p, returning its length and SHA-256, and writes it to w
// when w is not nil.
func measure(p SnapshotPayload, w io.Writer) (uint64, []byte, error) {
	h := sha256.New()
	var n uint64
	err := p.Encode(func(b []byte) error {
		n += uint64(len(b))
		h.Write(b)
		if w != nil {
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		return nil
	})
	return n, h.Sum(nil), err
}

// ReadSnapshot reads and verifies a snapshot written by WriteSnapshot,
// streaming: each node record is decoded alone and handed to node (nil:
// decoded and dropped, to verify), and the rest is returned as a Snapshot
// without nodes. node may be called before a later part of the payload
// turns out corrupt: what it built must be used only once ReadSnapshot
// returns no error. An error of node is returned once the whole payload
// has been read and verified (a corrupt payload is ErrCorruptSnapshot
// first).
func ReadSnapshot(r io.Reader, node func(*statev1.NodeRecord) error) (*statev1.Snapshot, error) {
	var hdr [8 + 8 + 32]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrCorruptSnapshot, err)
	}
	if !bytes.Equal(hdr[:8], snapshotMagic[:]) {
		return nil, fmt.Errorf("%w: bad magic %q", ErrCorruptSnapshot, hdr[:8])
	}
	n := binary.BigEndian.Uint64(hdr[8:16])
	if n > MaxSnapshotBytes {
		return nil, fmt.Errorf("%w: payload length %d exceeds %d", ErrCorruptSnapshot, n, uint64(MaxSnapshotBytes))
	}
	h := sha256.New()
	pr := &payloadReader{br: bufio.NewReaderSize(io.TeeReader(io.LimitReader(r, int64(n)), h), 256<<10), left: n}
	rest, nodeErr, err := readFields(pr, node)
	if err != nil {
		return nil, fmt.Errorf("%w: payload (%d bytes): %v", ErrCorruptSnapshot, n, err)
	}
	if sum := h.Sum(nil); !bytes.Equal(sum, hdr[16:]) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorruptSnapshot)
	}
	if nodeErr != nil {
		return nil, nodeErr
	}
	snap := &statev1.Snapshot{}
	if err := proto.Unmarshal(rest, snap); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptSnapshot, err)
	}
	return snap, nil
}

// readFields reads the payload's top-level fields: node records go to
// node, the others are re-encoded into rest. nodeErr is node's first
// error (node is not called after it); err is a payload that does not
// parse.
func readFields(pr *payloadReader, node func(*statev1.NodeRecord) error) (rest []byte, nodeErr, err error) {
	var buf []byte
	for pr.left > 0 {
		tag, err := pr.uvarint()
		if err != nil {
			return nil, nil, err
		}
		num, typ := protowire.DecodeTag(tag)
		if num < protowire.MinValidNumber || num > protowire.MaxValidNumber {
			return nil, nil, fmt.Errorf("field number %d", num)
		}
		switch typ {
		case protowire.VarintType:
			v, err := pr.uvarint()
			if err != nil {
				return nil, nil, err
			}
			rest = protowire.AppendVarint(protowire.AppendTag(rest, num, typ), v)
		case protowire.Fixed32Type, protowire.Fixed64Type:
			size := 4
			if typ == protowire.Fixed64Type {
				size = 8
			}
			if buf, err = pr.bytes(buf, uint64(size)); err != nil {
				return nil, nil, err
			}
			rest = append(protowire.AppendTag(rest, num, typ), buf...)
		case protowire.BytesType:
			l, err := pr.uvarint()
			if err != nil {
				return nil, nil, err
			}
			if buf, err = pr.bytes(buf, l); err != nil {
				return nil, nil, err
			}
			if num != snapshotNodesField {
				rest = protowire.AppendBytes(protowire.AppendTag(rest, num, typ), buf)
				continue
			}
			rec := &statev1.NodeRecord{}
			if err := proto.Unmarshal(buf, rec); err != nil {
				return nil, nil, fmt.Errorf("node record: %v", err)
			}
			if node != nil && nodeErr == nil {
				nodeErr = node(rec)
			}
		default:
			return nil, nil, fmt.Errorf("field %d has wire type %d", num, typ)
		}
	}
	return rest, nodeErr, nil
}

// payloadReader reads the payload's bytes, counting what is left.
type payloadReader struct {
	br   *bufio.Reader
	left uint64
}

func (p *payloadReader) uvarint() (uint64, error) {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if p.left == 0 {
			return 0, io.ErrUnexpectedEOF
		}
		b, err := p.br.ReadByte()
		if err != nil {
			return 0, io.ErrUnexpectedEOF
		}
		p.left--
		if shift == 63 && b > 1 {
			return 0, errors.New("varint overflows 64 bits")
		}
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return v, nil
		}
	}
}

// bytes reads l bytes into buf (reused).
func (p *payloadReader) bytes(buf []byte, l uint64) ([]byte, error) {
	if l > p.left {
		return buf, fmt.Errorf("a field of %d bytes with %d left", l, p.left)
	}
	if uint64(cap(buf)) < l {
		buf = make([]byte, l)
	}
	buf = buf[:l]
	if _, err := io.ReadFull(p.br, buf); err != nil {
		return buf, io.ErrUnexpectedEOF
	}
	p.left -= l
	return buf, nil
}
