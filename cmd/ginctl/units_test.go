package main

import "testing"

// TestHumanBytes: sizes read as a person writes them: exact in the largest
// unit they are a whole number of, else about so in the largest unit they
// reach, never in exponent form ("3.355392e+07 B").
func TestHumanBytes(t *testing.T) {
	for b, want := range map[uint64]string{
		0: "0 B", 1023: "1023 B", 1024: "1 KiB", 3 << 20: "3 MiB", 1 << 34: "16 GiB", 1536 << 10: "1536 KiB",
		33553920: "≈32.0 MiB", 16777215 << 10: "≈16.0 GiB", 1000000: "≈977 KiB", 1536: "≈1.50 KiB",
	} {
		if got := humanBytes(b); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", b, got, want)
		}
	}
}
