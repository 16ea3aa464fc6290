package sysfs

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

func TestParseRate(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want uint32
		ok   bool
	}{
		{"400 Gb/sec (4X NDR)\n", 400, true},
		{"200 Gb/sec (4X HDR)", 200, true},
		{"100 Gb/sec (2X HDR)", 100, true},
		{"2.5 Gb/sec (1X SDR)", 2, true},
		{"10 Gb/sec (4X SDR)", 10, true},
		{"800 Gb/sec (4X XDR)", 800, true},
		{"25 Gb/sec", 25, true},
		{"fast", 0, false},
		{"", 0, false},
		{" Gb/sec (4X NDR)", 0, false},
		{"-1 Gb/sec (4X NDR)", 0, false},
		{"1. Gb/sec (4X NDR)", 0, false},
		{"400 Gb/sec 4X NDR", 0, false},
		{"400 Mb/sec (4X NDR)", 0, false},
		{"99999999999 Gb/sec (4X NDR)", 0, false},
	} {
		got, err := ParseRate(tt.in)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("ParseRate(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestParseState(t *testing.T) {
	for _, tt := range []struct {
		in   string
		id   uint32
		name string
		ok   bool
	}{
		{"4: ACTIVE\n", 4, "ACTIVE", true},
		{"1: DOWN", 1, "DOWN", true},
		{"5: LinkUp", 5, "LinkUp", true},
		{"3: Disabled", 3, "Disabled", true},
		{"7: Phy Test", 7, "Phy Test", true},
		{"ACTIVE", 0, "", false},
		{"x: ACTIVE", 0, "", false},
		{"4:", 0, "", false},
		{"-1: DOWN", 0, "", false},
		{"300: BIG", 0, "", false},
	} {
		id, name, err := ParseState(tt.in)
		if id != tt.id || name != tt.name || (err == nil) != tt.ok {
			t.Errorf("ParseState(%q) = %d, %q, %v; want %d, %q, ok %v", tt.in, id, name, err, tt.id, tt.name, tt.ok)
		}
	}
}

func TestParseLinkSpeed(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want uint32
		ok   bool
	}{
		{"2.5 GT/s PCIe", 1, true},
		{"5.0 GT/s PCIe", 2, true},
		{"8.0 GT/s PCIe", 3, true},
		{"16.0 GT/s PCIe", 4, true},
		{"32.0 GT/s PCIe\n", 5, true},
		{"64.0 GT/s PCIe", 6, true},
		{"128.0 GT/s PCIe", 7, true},
		{"8 GT/s", 3, true},
		{"2.5 GT/s", 1, true},
		{"Unknown", 0, true},
		{"Unknown speed", 0, true},
		{"fast GT/s PCIe", 0, false},
		{"33.0 GT/s PCIe", 0, false},
		{"32.0 GT/s PCIe x16", 0, false},
		{"", 0, false},
	} {
		got, err := ParseLinkSpeed(tt.in)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("ParseLinkSpeed(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestParseHelpers(t *testing.T) {
	if g, err := parseGUID("0C42:a103:0012:3456"); err != nil || g != "0x0c42a10300123456" {
		t.Errorf("parseGUID = %q, %v", g, err)
	}
	for _, bad := range []string{"", "0c42a10300123456", "0c42:a103:0012", "0c42:a103:0012:345g", "0c42:a103:0012:34567"} {
		if _, err := parseGUID(bad); err == nil {
			t.Errorf("parseGUID(%q) succeeded", bad)
		}
	}
	if v, err := parseLID("0x1a\n"); err != nil || v != 26 {
		t.Errorf("parseLID = %d, %v", v, err)
	}
	for _, bad := range []string{"26", "0x", "0xzz", ""} {
		if _, err := parseLID(bad); err == nil {
			t.Errorf("parseLID(%q) succeeded", bad)
		}
	}
	g, zero, err := parseGID("FE80:0000:0000:0000:A088:C203:0045:2E10")
	if err != nil || zero || g != "fe80:0000:0000:0000:a088:c203:0045:2e10" || gidGUID(g) != "0xa088c20300452e10" {
		t.Errorf("parseGID = %q, %v, %v", g, zero, err)
	}
	if _, zero, err := parseGID("0000:0000:0000:0000:0000:0000:0000:0000"); err != nil || !zero {
		t.Errorf("zero GID: %v, %v", zero, err)
	}
	for _, bad := range []string{"fe80::1", "", "fe80:0000:0000:0000:a088:c203:0045:2e1"} {
		if _, _, err := parseGID(bad); err == nil {
			t.Errorf("parseGID(%q) succeeded", bad)
		}
	}
	for _, w := range []string{"0", "1", "2", "4", "8", "16", "32"} {
		if _, err := parseLinkWidth(w); err != nil {
			t.Errorf("parseLinkWidth(%q): %v", w, err)
		}
	}
	for _, w := range []string{"3", "x16", "", "-1"} {
		if _, err := parseLinkWidth(w); err == nil {
			t.Errorf("parseLinkWidth(%q) succeeded", w)
		}
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"400 Gb/sec (4X NDR)\n", "2.5 Gb/sec (1X SDR)", "25 Gb/sec", "fast", "", "1.5.5 Gb/sec (X)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseRate(s)
		if err != nil {
			if g != 0 {
				t.Fatalf("ParseRate(%q) = %d with error %v", s, g, err)
			}
			return
		}
		// The whole number leads the text, and "<n> Gb/sec" alone parses to it.
		tr := strings.TrimSpace(s)
		if n := strconv.FormatUint(uint64(g), 10); !strings.HasPrefix(strings.TrimLeft(tr, "0"), strings.TrimLeft(n, "0")) {
			t.Fatalf("ParseRate(%q) = %d: not the leading number", s, g)
		}
		if g2, err := ParseRate(fmt.Sprintf("%d Gb/sec", g)); err != nil || g2 != g {
			t.Fatalf("round trip of %d: %d, %v", g, g2, err)
		}
	})
}

func FuzzParseState(f *testing.F) {
	for _, s := range []string{"4: ACTIVE\n", "5: LinkUp", "7: Phy Test", "1:DOWN", ":", "x: y", "4:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, name, err := ParseState(s)
		if err != nil {
			return
		}
		if id > 255 || name == "" || name != strings.TrimSpace(name) {
			t.Fatalf("ParseState(%q) = %d, %q", s, id, name)
		}
		id2, name2, err := ParseState(fmt.Sprintf("%d: %s", id, name))
		if err != nil || id2 != id || name2 != name {
			t.Fatalf("round trip of %d, %q: %d, %q, %v", id, name, id2, name2, err)
		}
	})
}

func FuzzParseLinkSpeed(f *testing.F) {
	for _, s := range []string{"32.0 GT/s PCIe\n", "2.5 GT/s", "8 GT/s", "Unknown", "Unknown speed", "fast GT/s PCIe", "GT/s"} {
		f.Add(s)
	}
	canonical := map[uint32]string{1: "2.5", 2: "5.0", 3: "8.0", 4: "16.0", 5: "32.0", 6: "64.0", 7: "128.0"}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseLinkSpeed(s)
		if err != nil {
			return
		}
		if g > 7 {
			t.Fatalf("ParseLinkSpeed(%q) = %d", s, g)
		}
		if g == 0 {
			return
		}
		if g2, err := ParseLinkSpeed(canonical[g] + " GT/s PCIe"); err != nil || g2 != g {
			t.Fatalf("canonical form of generation %d: %d, %v", g, g2, err)
		}
	})
}

func FuzzNormalizeBusID(f *testing.F) {
	for _, s := range []string{"0000:07:00.0", "00000000:07:00.0", "07:00.0", "10000:e0:06.0", "pci0000:00", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := NormalizeBusID(s)
		if !ok {
			return
		}
		if n2, ok2 := NormalizeBusID(n); !ok2 || n2 != n {
			t.Fatalf("NormalizeBusID(%q) = %q, not a fixed point (%q, %v)", s, n, n2, ok2)
		}
		if !bdfRe.MatchString(n) {
			t.Fatalf("NormalizeBusID(%q) = %q, not a bus id", s, n)
		}
	})
}
