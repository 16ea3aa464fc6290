package memlimit

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// Auto is the flag value that derives the limit from the cgroup.
const Auto = "auto"

// AutoFraction is the share of the cgroup memory limit "auto" sets.
const AutoFraction = 0.9

// minLimit refuses limits too small for any master to start with: the
// garbage collector would run continuously.
const minLimit = 64 << 20

// Setting is a parsed flag value.
type Setting struct {
	auto  bool
	off   bool
	bytes int64
}

// Parse reads a flag value: "auto", "off" (or "0"), or a size in bytes with
// an optional unit (B, KiB, MiB, GiB, TiB, or KB, MB, GB, TB in powers of
// 1000), at least 64 MiB.
func Parse(s string) (Setting, error) {
	t := strings.TrimSpace(s)
	switch strings.ToLower(t) {
	case Auto:
		return Setting{auto: true}, nil
	case "off", "0", "none":
		return Setting{off: true}, nil
	}
	n, err := parseSize(t)
	if err != nil {
		return Setting{}, err
	}
	if n < minLimit {
		return Setting{}, fmt.Errorf("memory limit %q is below 64MiB", s)
	}
	return Setting{bytes: n}, nil
}

var units = []struct {
	suffix string
	mult   float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"b", 1},
}

func parseSize(s string) (int64, error) {
	low := strings.ToLower(s)
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(low, u.suffix) {
			low, mult = strings.TrimSpace(strings.TrimSuffix(low, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(low, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("memory limit %q: want auto, off or a size such as 900MiB or 2GiB", s)
	}
	b := v * mult
	if b >= math.MaxInt64 {
		return 0, fmt.Errorf("memory limit %q is too large", s)
	}
	return int64(b), nil
}

// Result says what Apply set and why.
type Result struct {
	// Bytes is the limit in effect after Apply (math.MaxInt64: none).
	Bytes int64
	// Source: "flag", "cgroup <path>", "GOMEMLIMIT", "off" or "none".
	Source string
}

// System is where Apply looks: the cgroup file system, this process's
// /proc/self/cgroup and its environment.
type System struct {
	CgroupRoot string              // "/sys/fs/cgroup"
	SelfCgroup string              // the contents of /proc/self/cgroup
	Getenv     func(string) string // reads GOMEMLIMIT
}

// Host is this process's System.
func Host() System {
	b, _ := os.ReadFile("/proc/self/cgroup")
	return System{CgroupRoot: "/sys/fs/cgroup", SelfCgroup: string(b), Getenv: os.Getenv}
}

// Apply sets the soft memory limit. GOMEMLIMIT, which the runtime has
// applied already, is left in place by "auto" (an explicit flag wins).
func (s Setting) Apply(sys System) (Result, error) {
	switch {
	case s.off:
		debug.SetMemoryLimit(math.MaxInt64)
		return Result{Bytes: math.MaxInt64, Source: "off"}, nil
	case !s.auto:
		debug.SetMemoryLimit(s.bytes)
		return Result{Bytes: s.bytes, Source: "flag"}, nil
	}
	if sys.Getenv != nil && sys.Getenv("GOMEMLIMIT") != "" {
		return Result{Bytes: debug.SetMemoryLimit(-1), Source: "GOMEMLIMIT"}, nil
	}
	lim, path, err := CgroupLimit(sys.CgroupRoot, sys.SelfCgroup)
	if err != nil {
		return Result{Bytes: debug.SetMemoryLimit(-1), Source: "none"}, err
	}
	if lim <= 0 {
		return Result{Bytes: debug.SetMemoryLimit(-1), Source: "none"}, nil
	}
	b := max(int64(float64(lim)*AutoFraction), minLimit)
	debug.SetMemoryLimit(b)
	return Result{Bytes: b, Source: "cgroup " + path}, nil
}

// CgroupLimit reads the memory limit of a process's cgroup under root,
// given its /proc/self/cgroup: cgroup v2's memory.max (of the process's
// own cgroup, then the root's), else cgroup v1's memory.limit_in_bytes. It
// returns 0 when there is no limit ("max", or v1's page-rounded
// "unlimited").
func CgroupLimit(root, selfCgroup string) (int64, string, error) {
	var candidates []string
	if own := ownCgroupV2(selfCgroup); own != "" && own != "/" {
		candidates = append(candidates, filepath.Join(root, own, "memory.max"))
	}
	candidates = append(candidates, filepath.Join(root, "memory.max"), filepath.Join(root, "memory", "memory.limit_in_bytes"))
	for _, p := range candidates {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, p, fmt.Errorf("cgroup memory limit: %w", err)
		}
		v := strings.TrimSpace(string(b))
		if v == "max" {
			return 0, p, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, p, fmt.Errorf("cgroup memory limit %s: %q is not a number", p, v)
		}
		if n >= 1<<62 { // cgroup v1 writes "no limit" as a huge page-rounded number
			return 0, p, nil
		}
		return n, p, nil
	}
	return 0, "", nil
}

// ownCgroupV2 is the cgroup v2 path in /proc/self/cgroup's contents
// ("0::/system.slice/gin-master.service"), "" without one.
func ownCgroupV2(selfCgroup string) string {
	for _, line := range strings.Split(selfCgroup, "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Clean("/" + strings.TrimSpace(rest))
		}
	}
	return ""
}

// String writes a limit for logs and --help ("900MiB", "none").
func String(b int64) string {
	if b <= 0 || b == math.MaxInt64 {
		return "none"
	}
	switch {
	case b%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", b>>30)
	case b%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", b>>20)
	}
	return fmt.Sprintf("%.0fMiB", float64(b)/(1<<20))
}
