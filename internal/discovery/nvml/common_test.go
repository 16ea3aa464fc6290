package nvml

import (
	"regexp"
	"testing"
)

func TestNormalizeBusID(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"00000000:07:00.0", "0000:07:00.0"},          // NVML form
		{"00000000:C8:00.0", "0000:c8:00.0"},          // upper-case hex
		{"0000:c8:00.0", "0000:c8:00.0"},              // already sysfs
		{"00000001:1A:1F.7", "0001:1a:1f.7"},          // non-zero domain, function
		{"00010000:00:02.0", "10000:00:02.0"},         // VMD-style 5-digit domain
		{"07:00.0", "0000:07:00.0"},                   // legacy, no domain
		{"0:7:0.0", "0000:07:00.0"},                   // short fields
		{" 00000000:07:00.0\x00\x00", "0000:07:00.0"}, // C string padding
		{"", ""},
		{"not a bus id", "not a bus id"},
		{"0000:07:00", "0000:07:00"},               // no function
		{"0000:07:20.0", "0000:07:20.0"},           // device > 0x1f: unchanged
		{"0000:07:00.8", "0000:07:00.8"},           // function > 7: unchanged
		{"0000:100:00.0", "0000:100:00.0"},         // bus > 0xff: unchanged
		{"000000000:07:00.0", "000000000:07:00.0"}, // 9-digit domain
		{"0x00:07:00.0", "0x00:07:00.0"},
		{"-1:07:00.0", "-1:07:00.0"},
		{"a:b:c:d.0", "a:b:c:d.0"},
	} {
		if got := NormalizeBusID(tc.in); got != tc.want {
			t.Errorf("NormalizeBusID(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

var sysfsBusID = regexp.MustCompile(`^[0-9a-f]{4,8}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]$`)

func FuzzNormalizeBusID(f *testing.F) {
	for _, s := range []string{"00000000:07:00.0", "0000:c8:00.0", "07:00.0", "", "x", "00010000:00:02.0", "0:0:0.0\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := NormalizeBusID(s)
		if again := NormalizeBusID(got); again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, got, again)
		}
		if len(got) > max(len(s), len("00000000:00:00.0")) {
			t.Fatalf("%q grew to %q", s, got)
		}
		if sysfsBusID.MatchString(got) {
			return
		}
		// Not a bus id: returned trimmed, otherwise unchanged.
		if got != trimmed(s) {
			t.Fatalf("NormalizeBusID(%q) = %q, neither a bus id nor the trimmed input", s, got)
		}
	})
}

func trimmed(s string) string {
	for len(s) > 0 && isPad(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isPad(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

func isPad(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == 0 }

func TestNVLinkGeneration(t *testing.T) {
	// nvmlNvlinkVersion_t codes (NVML_NVLINK_VERSION_*) -> generation, bandwidth.
	for _, tc := range []struct {
		code, gen uint32
		mbps      uint64
	}{
		{0, 0, 0},     // INVALID
		{1, 1, 20000}, // 1.0 (P100)
		{2, 2, 25000}, // 2.0 (V100)
		{3, 2, 25000}, // 2.2
		{4, 3, 25000}, // 3.0 (A100)
		{5, 3, 25000}, // 3.1
		{6, 4, 25000}, // 4.0 (H100)
		{7, 5, 50000}, // 5.0 (B200)
		{8, 6, 0},     // 6.0 (Rubin): bandwidth not known here
		{9, 0, 0},
		{255, 0, 0},
	} {
		gen := NVLinkGeneration(tc.code)
		if gen != tc.gen {
			t.Errorf("NVLinkGeneration(%d) = %d, want %d", tc.code, gen, tc.gen)
		}
		if got := NVLinkBandwidthMBps(gen); got != tc.mbps {
			t.Errorf("NVLinkBandwidthMBps(%d) = %d, want %d", gen, got, tc.mbps)
		}
	}
}
