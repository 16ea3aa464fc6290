// Package buildinfo holds the version stamped into the binaries at link time
// (make build sets Version with -ldflags -X).
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is set by the linker; "dev" for plain `go build`.
var Version = "dev" //nolint:gochecknoglobals // set once by the linker, never written at run time

// String returns the version and, when known, the VCS revision.
func String() string {
	if Version != "dev" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return Version
}

// Line is what `--version` prints in every GIN binary (and `ginctl
// version`): "<binary> <version> (<go version> <os>/<arch>)".
func Line(binary string) string {
	return fmt.Sprintf("%s %s (%s %s/%s)", binary, String(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// VersionTemplate is Line for cobra's SetVersionTemplate.
func VersionTemplate(binary string) string {
	return Line(binary) + "\n"
}
