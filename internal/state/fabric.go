package state

import (
	"bytes"
	"compress/flate"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// fabricBlob is how the store keeps the imported fabric scan: its
// deterministic wire form, deflated (issue #16). A scan lists every HCA
// port's cable with both ends' GUIDs, node and HCA names: decoded it was
// ~4.6 KB of Go objects per DGX H100 node, the largest part of a node's
// bytes after the graph; only GetGraph and snapshots read it, and they
// decode it per call. Immutable; a nil *fabricBlob is no fabric.
type fabricBlob struct {
	z      []byte
	rawLen int
}

// fabricCompression: the FSM deflates a scan when it applies the import,
// so speed first (a scan's wire form repeats itself: names, GUID
// prefixes, rates, and deflates well even so).
const fabricCompression = flate.BestSpeed

// packFabric deflates f (nil for nil).
func packFabric(f *ginv1.FabricTopology) (*fabricBlob, error) {
	if f == nil {
		return nil, nil
	}
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encode the fabric: %w", err)
	}
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, fabricCompression)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(raw); err != nil {
		return nil, fmt.Errorf("compress the fabric: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("compress the fabric: %w", err)
	}
	return &fabricBlob{z: bytes.Clone(buf.Bytes()), rawLen: len(raw)}, nil
}

// unpack decodes the fabric into a new message (nil for no fabric).
func (b *fabricBlob) unpack() (*ginv1.FabricTopology, error) {
	if b == nil {
		return nil, nil
	}
	raw := make([]byte, b.rawLen)
	r := flate.NewReader(bytes.NewReader(b.z))
	if _, err := io.ReadFull(r, raw); err != nil {
		return nil, fmt.Errorf("expand the stored fabric: %w", err)
	}
	f := &ginv1.FabricTopology{}
	if err := proto.Unmarshal(raw, f); err != nil {
		return nil, fmt.Errorf("decode the stored fabric: %w", err)
	}
	return f, nil
}
