package nccltests

import (
	"strings"
	"testing"
)

// BenchmarkParse parses the 10-node, five-test published log.
func BenchmarkParse(b *testing.B) {
	text := readFixture(b, "xxrjun_N10_G8.log")
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := Parse(strings.NewReader(text)); err != nil {
			b.Fatal(err)
		}
	}
}
