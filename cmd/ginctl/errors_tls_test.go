package main

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestDescribeTLSMismatch: a client and a master that disagree about TLS get
// a sentence that says so and what to give, not "is gin-master running?".
// The messages are gRPC's own (the master client of client.go wraps them per master).
func TestDescribeTLSMismatch(t *testing.T) {
	tests := []struct {
		name, msg, want string
	}{
		{"plaintext to a TLS master", `no master answered (127.0.0.1:5000: Unavailable: connection error: desc = "error reading server preface: EOF")`,
			"the master at 127.0.0.1:5000 closed the connection without answering: it serves mutual TLS and ginctl gave no certificate; give --tls-ca, --tls-cert and --tls-key"},
		{"TLS to a plaintext port", `no master answered (m1:5000: Unavailable: connection error: desc = "transport: authentication handshake failed: tls: first record does not look like a TLS handshake")`,
			"does not speak TLS: a master started with --insecure (leave out --tls-* and GIN_TLS_*)"},
		{"plaintext to the HTTP port", `connection error: desc = "error reading server preface: http2: frame too large, note that the frame header looked like an HTTP/1.1 header"`,
			"answers HTTP, not gRPC"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := describe(status.Error(codes.Unavailable, tc.msg))
			if !strings.Contains(got, tc.want) {
				t.Fatalf("describe = %q, want it to contain %q", got, tc.want)
			}
		})
	}
}
