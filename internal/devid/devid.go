package devid

import (
	"fmt"
	"strconv"
	"strings"
)

// PCIBusID returns the canonical form of a PCI bus id, "dddd:bb:dd.f":
// lower-case hex, the domain in at least four digits without extra leading
// zeros (VMD domains are "10000:e0:06.0"). It accepts NVML's form
// ("00000000:07:00.0"), the legacy form without a domain ("07:00.0", domain
// 0) and the canonical form itself, with surrounding blanks and NULs. ok is
// false when s is not a bus id (device above 0x1f, function above 7, a
// domain over 8 digits, anything but hex).
func PCIBusID(s string) (string, bool) {
	if canonicalBus(s) {
		return s, true // the common case, without allocating
	}
	s = strings.Trim(s, " \t\r\n\x00")
	first, rest, ok := strings.Cut(s, ":")
	if !ok {
		return "", false
	}
	dom, bus, devfn := "0", first, rest
	if second, third, ok := strings.Cut(rest, ":"); ok {
		if strings.Contains(third, ":") {
			return "", false
		}
		dom, bus, devfn = first, second, third
	}
	dev, fn, ok := strings.Cut(devfn, ".")
	if !ok {
		return "", false
	}
	d, ok1 := parseHex(dom, 8, 0xffffffff)
	b, ok2 := parseHex(bus, 2, 0xff)
	v, ok3 := parseHex(dev, 2, 0x1f)
	f, ok4 := parseHex(fn, 1, 7)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return "", false
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", d, b, v, f), true
}

// GUID returns the canonical form of an InfiniBand GUID, 16 lower-case hex
// digits, from "0x0002C903004F1A2B", "0002:c903:004f:1a2b" (sysfs) or fewer
// digits ("0x2c903004f1a2b", zero-padded). ok is false for anything else
// (an LLDP chassis name, more than 16 digits, non-hex).
func GUID(s string) (string, bool) {
	if len(s) == 16 && lowerHex(s) {
		return s, true // the common case, without allocating
	}
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.ReplaceAll(strings.TrimPrefix(s, "0x"), ":", "")
	if s == "" || len(s) > 16 {
		return "", false
	}
	if _, ok := parseHex(s, 16, ^uint64(0)); !ok {
		return "", false
	}
	return strings.Repeat("0", 16-len(s)) + s, true
}

// GUIDWire returns the form a GUID is stored and sent in (inventories,
// fabric scans) and shown in: "0x" and the 16 digits of GUID
// ("0x0002c903004f1a2b"), as ibnetdiscover and ibstat write it. ok is false
// for what GUID refuses.
func GUIDWire(s string) (string, bool) {
	if len(s) == 18 && s[0] == '0' && s[1] == 'x' && lowerHex(s[2:]) {
		return s, true // the common case, without allocating
	}
	g, ok := GUID(s)
	if !ok {
		return "", false
	}
	return "0x" + g, true
}

// GUIDValue is the number a GUID (in any form GUID accepts) stands for.
func GUIDValue(s string) (uint64, bool) {
	g, ok := GUID(s)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(g, 16, 64)
	return v, err == nil
}

// GUIDText writes a GUID as GUIDWire does; a string that is not a GUID is
// returned as it is (an LLDP chassis name stays readable).
func GUIDText(s string) string {
	if g, ok := GUIDWire(s); ok {
		return g
	}
	return s
}

// canonicalBus reports whether s is already in PCIBusID's output form with
// a four-digit domain ("0000:07:00.0").
func canonicalBus(s string) bool {
	if len(s) != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.' {
		return false
	}
	if !lowerHex(s[0:4]) || !lowerHex(s[5:7]) || !lowerHex(s[8:10]) {
		return false
	}
	return s[8] <= '1' && s[11] >= '0' && s[11] <= '7'
}

// lowerHex reports whether s is all lower-case hex digits.
func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// parseHex parses 1..maxDigits hex digits (no sign, prefix or underscore)
// into a value no greater than limit.
func parseHex(s string, maxDigits int, limit uint64) (uint64, bool) {
	if len(s) == 0 || len(s) > maxDigits {
		return 0, false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil || v > limit {
		return 0, false
	}
	return v, true
}
