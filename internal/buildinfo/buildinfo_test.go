package buildinfo

import (
	"regexp"
	"runtime"
	"testing"
)

func TestLine(t *testing.T) {
	got := Line("ginctl")
	want := regexp.MustCompile(`^ginctl \S+ \(` + regexp.QuoteMeta(runtime.Version()) + ` ` + runtime.GOOS + `/` + runtime.GOARCH + `\)$`)
	if !want.MatchString(got) {
		t.Fatalf("Line = %q, want <binary> <version> (<go version> <os>/<arch>)", got)
	}
	if VersionTemplate("ginctl") != got+"\n" {
		t.Fatalf("VersionTemplate = %q", VersionTemplate("ginctl"))
	}
}
