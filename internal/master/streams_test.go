package master

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// announcedMaxStreams opens a raw HTTP/2 connection to addr and returns the
// SETTINGS_MAX_CONCURRENT_STREAMS of the server's first SETTINGS frame
// (RFC 9113 §6.5). ok is false when the server did not send the setting
// (unlimited).
func announcedMaxStreams(t *testing.T, addr string) (limit uint32, ok bool) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	// Client preface, then an empty SETTINGS frame.
	if _, err := io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	for {
		var h [9]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			t.Fatalf("reading a frame header: %v", err)
		}
		n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			t.Fatalf("reading a frame: %v", err)
		}
		if h[3] != 0x4 || h[4]&0x1 != 0 { // not SETTINGS, or a SETTINGS ack
			continue
		}
		for i := 0; i+6 <= len(payload); i += 6 {
			if binary.BigEndian.Uint16(payload[i:]) == 0x3 {
				return binary.BigEndian.Uint32(payload[i+2:]), true
			}
		}
		return 0, false
	}
}

// TestMaxStreamsPerConnAnnounced: the gRPC listener announces the
// configured per-connection stream limit (the default when unset) on the
// wire, so a client cannot open 80,000 streams on one connection.
func TestMaxStreamsPerConnAnnounced(t *testing.T) {
	tests := []struct {
		name string
		cfg  uint32
		want uint32
	}{
		{"default", 0, DefaultMaxStreamsPerConn},
		{"flag", 7, 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Config{ID: "m1", Bind: "127.0.0.1:0", RaftBind: "127.0.0.1:0", DataDir: t.TempDir(),
				Bootstrap: true, FastRaft: true, MaxStreamsPerConn: tc.cfg})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- s.Serve(ctx) }()
			defer func() {
				cancel()
				<-served
				_ = s.Close()
			}()
			got, ok := announcedMaxStreams(t, s.Addr())
			if !ok || got != tc.want {
				t.Fatalf("SETTINGS_MAX_CONCURRENT_STREAMS = %d (sent: %v), want %d", got, ok, tc.want)
			}
		})
	}
}
