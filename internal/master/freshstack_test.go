package master

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// goroutineID is the number runtime.Stack prints for the calling goroutine.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := bytes.Cut(bytes.TrimPrefix(buf, []byte("goroutine ")), []byte(" "))
	return string(id)
}

// recordingCodec is the proto codec, recording the goroutine each
// Unmarshal ran on.
type recordingCodec struct {
	freshStackCodec
	on *string
}

func (r recordingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*r.on = goroutineID()
	return r.freshStackCodec.CodecV2.Unmarshal(data, v)
}

// A request from freshStackDecodeBytes on is decoded on another goroutine
// than the stream's, a smaller one on the stream's; both decode the same
// as grpc-go's proto codec.
func TestFreshStackCodecDecodesLargeRequestsElsewhere(t *testing.T) {
	big := &ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Inventory{Inventory: simInventory(t, "dgx-h100", "n1")}}
	small := &ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Heartbeat{Heartbeat: &ginv1.Heartbeat{Sequence: 7}}}
	for _, tc := range []struct {
		name      string
		m         *ginv1.SessionRequest
		elsewhere bool
	}{
		{"heartbeat", small, false},
		{"inventory", big, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wire, err := proto.Marshal(tc.m)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(wire) >= freshStackDecodeBytes; got != tc.elsewhere {
				t.Fatalf("%d bytes: over the threshold %v, the table says %v", len(wire), got, tc.elsewhere)
			}
			var on string
			inner := newFreshStackCodec()
			c := freshStackCodec{recordingCodec{freshStackCodec: inner, on: &on}}
			if c.Name() != "proto" {
				t.Fatalf("codec name %q, want proto", c.Name())
			}
			got := &ginv1.SessionRequest{}
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, got); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, tc.m) {
				t.Fatal("decoded message differs from the one encoded")
			}
			if here := goroutineID(); (on != here) != tc.elsewhere {
				t.Fatalf("decoded on goroutine %s, the caller is %s; want elsewhere=%v", on, here, tc.elsewhere)
			}
			if strings.TrimSpace(on) == "" {
				t.Fatal("the codec did not run")
			}
		})
	}
}
