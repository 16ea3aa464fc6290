package sysfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/gin-topology/gin/internal/devid"
	"github.com/gin-topology/gin/internal/discovery"
)

// Default roots of a real node.
const (
	DefaultSysRoot  = "/sys"
	DefaultProcRoot = "/proc"
	DefaultEtcRoot  = "/etc"
)

// source is the ItemError source of every collector in this package.
const source = "sysfs"

// maxSysFile bounds one read: sysfs attributes are at most a page.
const maxSysFile = 64 << 10

// errMalformed wraps content that does not parse.
var errMalformed = errors.New("malformed")

func itemErr(item string, err error) discovery.ItemError {
	return discovery.ItemError{Source: source, Item: item, Err: err}
}

// readFile reads one sysfs attribute, bounded, and trims surrounding space.
func readFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSysFile))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// readUint reads a decimal unsigned attribute.
func readUint(path string, bits int) (uint64, error) {
	s, err := readFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is not an unsigned integer", errMalformed, clip(s))
	}
	return v, nil
}

// readNUMA reads a numa_node attribute: a decimal int, -1 for none.
func readNUMA(path string) (int32, error) {
	s, err := readFile(path)
	if err != nil {
		return -1, err
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil || v < -1 {
		return -1, fmt.Errorf("%w: %q is not a NUMA node", errMalformed, clip(s))
	}
	return int32(v), nil
}

// unsupported reports read errors that mean "the driver does not provide
// this attribute" rather than a failure: sysfs returns EINVAL or EOPNOTSUPP
// from show() for those.
func unsupported(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP) ||
		errors.Is(err, syscall.ENOTSUP) || errors.Is(err, os.ErrNotExist)
}

// clip bounds text quoted in error messages.
func clip(s string) string {
	const n = 64
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

var (
	bdfRe        = regexp.MustCompile(`^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
	hostBridgeRe = regexp.MustCompile(`^pci[0-9a-f]{4,8}:[0-9a-f]{2}$`)
)

// NormalizeBusID returns a PCI address in sysfs form, "0000:07:00.0"
// (internal/devid.PCIBusID). ok is false when s is not a PCI address.
func NormalizeBusID(s string) (string, bool) { return devid.PCIBusID(s) }

// sortedNumeric returns the names in dir that are decimal numbers, in
// numeric order; other names are ignored.
func sortedNumeric(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, e := range ents {
		n, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil {
			continue
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// pciDevPath is sysRoot/bus/pci/devices/<bdf>.
func pciDevPath(sysRoot, bdf string) string {
	return filepath.Join(sysRoot, "bus", "pci", "devices", bdf)
}
