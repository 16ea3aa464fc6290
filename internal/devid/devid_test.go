package devid

import (
	"regexp"
	"testing"
)

func TestPCIBusID(t *testing.T) {
	tests := []struct {
		in, want string // want "": not a bus id
	}{
		{"00000000:07:00.0", "0000:07:00.0"},          // NVML
		{"00000000:C8:00.0", "0000:c8:00.0"},          // upper-case hex
		{"0000:c8:00.0", "0000:c8:00.0"},              // sysfs, already canonical
		{"00000001:1A:1F.7", "0001:1a:1f.7"},          // domain, device, function limits
		{"00010000:00:02.0", "10000:00:02.0"},         // VMD: 5-digit domain
		{"10000:e0:06.0", "10000:e0:06.0"},            // VMD as sysfs writes it
		{"07:00.0", "0000:07:00.0"},                   // legacy, no domain
		{"0:7:0.0", "0000:07:00.0"},                   // short fields
		{" 00000000:07:00.0\x00\x00", "0000:07:00.0"}, // C-string padding
		{"", ""},
		{"not a bus id", ""},
		{"0000:07:00", ""},        // no function
		{"0000:07:20.0", ""},      // device > 0x1f
		{"0000:07:00.8", ""},      // function > 7
		{"0000:100:00.0", ""},     // bus > 0xff
		{"000000000:07:00.0", ""}, // 9-digit domain
		{"0x00:07:00.0", ""},
		{"-1:07:00.0", ""},
		{"a:b:c:d.0", ""},
	}
	for _, tc := range tests {
		got, ok := PCIBusID(tc.in)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("PCIBusID(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}

func TestGUID(t *testing.T) {
	tests := []struct {
		in, want string // want "": not a GUID
		text     string // GUIDText
	}{
		{"0x0002C903004F1A2B", "0002c903004f1a2b", "0x0002c903004f1a2b"},
		{"0002:c903:004f:1a2b", "0002c903004f1a2b", "0x0002c903004f1a2b"}, // sysfs
		{" 0x2c903004f1a2b ", "0002c903004f1a2b", "0x0002c903004f1a2b"},   // fewer digits
		{"e09d7303007a5a68", "e09d7303007a5a68", "0xe09d7303007a5a68"},
		{"", "", ""},
		{"0x", "", "0x"},
		{"leaf01", "", "leaf01"}, // LLDP chassis name
		{"0x10002c903004f1a2b", "", "0x10002c903004f1a2b"}, // 17 digits
		{"0002:c903:004f:1a2g", "", "0002:c903:004f:1a2g"}, // not hex
	}
	for _, tc := range tests {
		got, ok := GUID(tc.in)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("GUID(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
		if w, ok := GUIDWire(tc.in); ok != (tc.want != "") || (ok && w != "0x"+tc.want) {
			t.Errorf("GUIDWire(%q) = %q, %v; want %q", tc.in, w, ok, "0x"+tc.want)
		}
		if txt := GUIDText(tc.in); txt != tc.text {
			t.Errorf("GUIDText(%q) = %q, want %q", tc.in, txt, tc.text)
		}
	}
	if v, ok := GUIDValue("0002:c903:004f:1a2b"); !ok || v != 0x0002c903004f1a2b {
		t.Errorf("GUIDValue = %#x, %v", v, ok)
	}
	if _, ok := GUIDValue("leaf01"); ok {
		t.Error("GUIDValue accepted a name")
	}
}

var canonicalBusRe = regexp.MustCompile(`^[0-9a-f]{4,8}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]$`)

func FuzzPCIBusID(f *testing.F) {
	for _, s := range []string{"00000000:07:00.0", "0000:c8:00.0", "07:00.0", "", "x", "00010000:00:02.0", "0:0:0.0\x00", "0000:07:20.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := PCIBusID(s)
		if !ok {
			if got != "" {
				t.Fatalf("PCIBusID(%q) = %q with ok false", s, got)
			}
			return
		}
		if !canonicalBusRe.MatchString(got) {
			t.Fatalf("PCIBusID(%q) = %q, not canonical", s, got)
		}
		if again, ok := PCIBusID(got); !ok || again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, got, again)
		}
	})
}

func FuzzGUID(f *testing.F) {
	for _, s := range []string{"0x0002C903004F1A2B", "0002:c903:004f:1a2b", "1", "", "leaf01", "0x", ":::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := GUID(s)
		if !ok {
			if got != "" {
				t.Fatalf("GUID(%q) = %q with ok false", s, got)
			}
			return
		}
		if len(got) != 16 || !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(got) {
			t.Fatalf("GUID(%q) = %q, not 16 hex digits", s, got)
		}
		if again, ok := GUID(got); !ok || again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, got, again)
		}
		if v, ok := GUIDValue(s); !ok || GUIDText(s) != "0x"+got || v == 0 && got != "0000000000000000" {
			t.Fatalf("GUIDValue/GUIDText disagree with GUID for %q", s)
		}
		w, ok := GUIDWire(s)
		if !ok || w != "0x"+got {
			t.Fatalf("GUIDWire(%q) = %q, %v; GUID says %q", s, w, ok, got)
		}
		if again, ok := GUIDWire(w); !ok || again != w {
			t.Fatalf("GUIDWire not idempotent: %q -> %q -> %q", s, w, again)
		}
	})
}
