package raft

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

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

// WriteSnapshot writes snap in the checksummed layout.
func WriteSnapshot(w io.Writer, snap *statev1.Snapshot) error {
	payload, err := proto.MarshalOptions{Deterministic: true}.Marshal(snap)
	if err != nil {
		return fmt.Errorf("snapshot: marshal: %w", err)
	}
	var hdr [8 + 8 + 32]byte
	copy(hdr[:8], snapshotMagic[:])
	binary.BigEndian.PutUint64(hdr[8:16], uint64(len(payload)))
	sum := sha256.Sum256(payload)
	copy(hdr[16:], sum[:])
	if _, err := w.Write(hdr[:]); err != nil {
		return fmt.Errorf("snapshot: write header: %w", err)
	}
	if _, err := w.Write(payload); err != nil {
		return fmt.Errorf("snapshot: write payload: %w", err)
	}
	return nil
}

// ReadSnapshot reads and verifies a snapshot written by WriteSnapshot.
func ReadSnapshot(r io.Reader) (*statev1.Snapshot, error) {
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
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return nil, fmt.Errorf("%w: payload (%d bytes): %v", ErrCorruptSnapshot, n, err)
	}
	if sum := sha256.Sum256(payload); !bytes.Equal(sum[:], hdr[16:]) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorruptSnapshot)
	}
	snap := &statev1.Snapshot{}
	if err := proto.Unmarshal(payload, snap); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptSnapshot, err)
	}
	return snap, nil
}
