package pki

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"
)

func TestParseSerial(t *testing.T) {
	tests := []struct {
		in, want, wantErr string
	}{
		{in: "3F2A9C01", want: "3F2A9C01"},
		{in: "3f2a9c01", want: "3F2A9C01"},
		{in: "3f:2a:9c:01", want: "3F2A9C01"},
		{in: "serial=3F2A9C01", want: "3F2A9C01"},
		{in: "0x3f2a9c01", want: "3F2A9C01"},
		{in: " 3F 2A 9C 01\n", want: "3F2A9C01"},
		{in: "abc", want: "0ABC"},    // an even number of digits, as openssl prints
		{in: "000abc", want: "0ABC"}, // leading zero bytes are not part of the number
		{in: strings.Repeat("FF", MaxSerialBytes), want: strings.Repeat("FF", MaxSerialBytes)},
		{in: "", wantErr: "empty"},
		{in: "serial=", wantErr: "empty"},
		{in: "00", wantErr: "zero"},
		{in: "12G4", wantErr: "not a hex digit"},
		{in: "-12", wantErr: "not a hex digit"},
		{in: "12\x1b34", wantErr: "not a hex digit"},
		{in: strings.Repeat("FF", MaxSerialBytes+1), wantErr: "more than 20"},
		{in: strings.Repeat("F", 500), wantErr: "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSerial(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseSerial(%q) = %q, %v; want an error with %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseSerial(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
			if again, err := ParseSerial(got); err != nil || again != got {
				t.Fatalf("the canonical form does not parse to itself: %q, %v", again, err)
			}
		})
	}
}

// TestFormatSerialIsWhatIssuedCertificatesCarry: the serial of an issued
// certificate parses back to the same number.
func TestFormatSerialIsWhatIssuedCertificatesCarry(t *testing.T) {
	ca, err := CreateCA(t.TempDir(), 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _, err := ca.Issue(CertRequest{Identity: Identity{Role: RoleAdmin}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(certPEM)
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	s := FormatSerial(c.SerialNumber)
	back, ok := new(big.Int).SetString(s, 16)
	if !ok || back.Cmp(c.SerialNumber) != 0 || strings.ToUpper(s) != s || len(s)%2 != 0 {
		t.Fatalf("FormatSerial(%v) = %q", c.SerialNumber, s)
	}
	list := denyMap{s: "lost"}
	var de *DeniedError
	if err := CheckDenied(list, c); !errors.As(err, &de) || de.Serial != s || !strings.Contains(err.Error(), "certificate serial "+s+" (spiffe://gin/admin) is denied: lost") {
		t.Fatalf("CheckDenied: %v", err)
	}
	if err := CheckDenied(denyMap{}, c); err != nil {
		t.Fatalf("CheckDenied on an empty list: %v", err)
	}
	if err := CheckDenied(nil, c); err != nil {
		t.Fatalf("CheckDenied without a list: %v", err)
	}
}

type denyMap map[string]string

func (m denyMap) Denied(serial string) (string, bool) {
	r, ok := m[serial]
	return r, ok
}

func FuzzParseSerial(f *testing.F) {
	for _, s := range []string{"3F:2A", "serial=0A", "0x1", "", "zz", strings.Repeat("F", 41)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseSerial(s)
		if err != nil {
			return
		}
		again, err := ParseSerial(got)
		if err != nil || again != got {
			t.Fatalf("%q → %q → %q, %v", s, got, again, err)
		}
		n, ok := new(big.Int).SetString(got, 16)
		if !ok || n.Sign() <= 0 || len(n.Bytes()) > MaxSerialBytes || FormatSerial(n) != got {
			t.Fatalf("%q → %q is not a canonical serial", s, got)
		}
	})
}
