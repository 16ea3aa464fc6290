package ratelog

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	long := strings.Repeat("n", 1<<20)
	// 255 ASCII bytes, then a 3-byte rune straddling the 256-byte cut.
	straddle := strings.Repeat("a", 255) + "€" + strings.Repeat("b", 10)
	tests := []struct {
		name     string
		in       string
		wantLen  int // bytes of input kept
		wantTail string
	}{
		{"short kept whole", "node[001-004]", 13, ""},
		{"exactly the limit kept whole", strings.Repeat("x", MaxEcho), MaxEcho, ""},
		{"a 1 MiB hostlist", long, MaxEcho, "… (1048576 bytes)"},
		{"cut before a split rune", straddle, 255, "… (268 bytes)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Clip(tc.in)
			if !strings.HasPrefix(got, tc.in[:tc.wantLen]) || !strings.HasSuffix(got, tc.wantTail) {
				t.Fatalf("Clip kept %q…, want the first %d bytes and tail %q", got[:min(len(got), 40)], tc.wantLen, tc.wantTail)
			}
			if len(got) != tc.wantLen+len(tc.wantTail) {
				t.Fatalf("Clip: %d bytes, want %d", len(got), tc.wantLen+len(tc.wantTail))
			}
			if !utf8.ValidString(got) {
				t.Fatalf("Clip returned invalid UTF-8")
			}
		})
	}
}
