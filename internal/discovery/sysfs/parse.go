package sysfs

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseRate parses an HCA port's sysfs rate, "%d%s Gb/sec (%dX%s)" as the
// kernel prints it ("400 Gb/sec (4X NDR)", "2.5 Gb/sec (1X SDR)", or a bare
// "100 Gb/sec"), and returns the signalling rate in whole Gb/s (a ".5" is
// dropped: 2.5 → 2).
func ParseRate(s string) (gbps uint32, err error) {
	s = strings.TrimSpace(s)
	num, rest, ok := strings.Cut(s, " Gb/sec")
	if !ok || num == "" {
		return 0, fmt.Errorf("%w: rate %q: want \"<n> Gb/sec (<w>X <speed>)\"", errMalformed, clip(s))
	}
	whole, frac, hasFrac := strings.Cut(num, ".")
	if hasFrac && (frac == "" || strings.Trim(frac, "0123456789") != "") {
		return 0, fmt.Errorf("%w: rate %q: bad number %q", errMalformed, clip(s), clip(num))
	}
	if whole == "" || strings.Trim(whole, "0123456789") != "" {
		return 0, fmt.Errorf("%w: rate %q: bad number %q", errMalformed, clip(s), clip(num))
	}
	v, err := strconv.ParseUint(whole, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%w: rate %q: %v", errMalformed, clip(s), err)
	}
	if rest != "" {
		// " (4X NDR)": width and speed name; only the shape is checked.
		if !strings.HasPrefix(rest, " (") || !strings.HasSuffix(rest, ")") || !strings.Contains(rest, "X") {
			return 0, fmt.Errorf("%w: rate %q: bad suffix %q", errMalformed, clip(s), clip(rest))
		}
	}
	return uint32(v), nil
}

// ParseState parses an HCA port's "state" or "phys_state" attribute,
// "%d: %s" ("4: ACTIVE", "5: LinkUp", "7: Phy Test").
func ParseState(s string) (id uint32, name string, err error) {
	s = strings.TrimSpace(s)
	n, name, ok := strings.Cut(s, ":")
	if !ok {
		return 0, "", fmt.Errorf("%w: state %q: want \"<id>: <name>\"", errMalformed, clip(s))
	}
	v, err := strconv.ParseUint(strings.TrimSpace(n), 10, 8)
	if err != nil {
		return 0, "", fmt.Errorf("%w: state %q: bad id", errMalformed, clip(s))
	}
	name = strings.TrimSpace(name)
	if name == "" {
		return 0, "", fmt.Errorf("%w: state %q: no name", errMalformed, clip(s))
	}
	return uint32(v), name, nil
}

// linkSpeedGen maps a PCIe transfer rate (GT/s) to its generation.
var linkSpeedGen = map[string]uint32{
	"2.5": 1, "5": 2, "8": 3, "16": 4, "32": 5, "64": 6, "128": 7,
}

// ParseLinkSpeed parses a PCI device's current_link_speed / max_link_speed
// ("32.0 GT/s PCIe", older kernels "8 GT/s", "2.5 GT/s") into a PCIe
// generation 1..7. The kernel prints "Unknown" (older: "Unknown speed")
// when the link is down; that is generation 0 and no error.
func ParseLinkSpeed(s string) (gen uint32, err error) {
	s = strings.TrimSpace(s)
	if s == "Unknown" || s == "Unknown speed" {
		return 0, nil
	}
	num, rest, ok := strings.Cut(s, " GT/s")
	if !ok || (rest != "" && rest != " PCIe") {
		return 0, fmt.Errorf("%w: link speed %q: want \"<n> GT/s PCIe\"", errMalformed, clip(s))
	}
	// "32.0" → "32", "2.5" stays.
	if strings.HasSuffix(num, ".0") {
		num = strings.TrimSuffix(num, ".0")
	}
	g, ok := linkSpeedGen[num]
	if !ok {
		return 0, fmt.Errorf("%w: link speed %q: unknown transfer rate", errMalformed, clip(s))
	}
	return g, nil
}

// parseLinkWidth parses current_link_width: decimal lanes (0 when down).
func parseLinkWidth(s string) (uint32, error) {
	v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 8)
	if err != nil {
		return 0, fmt.Errorf("%w: link width %q", errMalformed, clip(s))
	}
	switch v {
	case 0, 1, 2, 4, 8, 12, 16, 32:
		return uint32(v), nil
	}
	return 0, fmt.Errorf("%w: link width %q is not a PCIe width", errMalformed, clip(s))
}

// parseGUID turns the kernel's "%04x:%04x:%04x:%04x" GUID into "0x" + 16
// hex digits.
func parseGUID(s string) (string, error) {
	s = strings.TrimSpace(s)
	parts := strings.Split(s, ":")
	if len(parts) != 4 {
		return "", fmt.Errorf("%w: GUID %q: want xxxx:xxxx:xxxx:xxxx", errMalformed, clip(s))
	}
	for _, p := range parts {
		if len(p) != 4 || !isHex(p) {
			return "", fmt.Errorf("%w: GUID %q: want xxxx:xxxx:xxxx:xxxx", errMalformed, clip(s))
		}
	}
	return "0x" + strings.ToLower(strings.Join(parts, "")), nil
}

// parseLID parses lid / sm_lid, "0x%x".
func parseLID(s string) (uint32, error) {
	s = strings.TrimSpace(s)
	h, ok := strings.CutPrefix(s, "0x")
	if !ok {
		return 0, fmt.Errorf("%w: LID %q: want 0x<hex>", errMalformed, clip(s))
	}
	v, err := strconv.ParseUint(h, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("%w: LID %q: want 0x<hex>", errMalformed, clip(s))
	}
	return uint32(v), nil
}

// parseGID checks a GID in the kernel's "%pI6" form (8 groups of 4 hex
// digits) and returns it lower-cased; zero is true for the all-zero
// (invalid) entry.
func parseGID(s string) (gid string, zero bool, err error) {
	s = strings.ToLower(strings.TrimSpace(s))
	parts := strings.Split(s, ":")
	if len(parts) != 8 {
		return "", false, fmt.Errorf("%w: GID %q: want 8 groups of 4 hex digits", errMalformed, clip(s))
	}
	zero = true
	for _, p := range parts {
		if len(p) != 4 || !isHex(p) {
			return "", false, fmt.Errorf("%w: GID %q: want 8 groups of 4 hex digits", errMalformed, clip(s))
		}
		if p != "0000" {
			zero = false
		}
	}
	return s, zero, nil
}

// gidGUID returns the low 64 bits of a parsed GID as "0x" + 16 hex digits
// (the port GUID when the GID is the port's link-local GID 0).
func gidGUID(gid string) string {
	parts := strings.Split(gid, ":")
	return "0x" + strings.Join(parts[4:], "")
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
