package hostaddr

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

type fakeSource struct {
	route4, route6 string // "" = no default route for the family
	addrs          []string
	addrsErr       error
}

func (f fakeSource) DefaultRouteAddr(v6 bool) (netip.Addr, error) {
	s := f.route4
	if v6 {
		s = f.route6
	}
	if s == "" {
		return netip.Addr{}, errors.New("network is unreachable")
	}
	return netip.MustParseAddr(s), nil
}

func (f fakeSource) InterfaceAddrs() ([]netip.Addr, error) {
	if f.addrsErr != nil {
		return nil, f.addrsErr
	}
	var out []netip.Addr
	for _, a := range f.addrs {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

func TestDerive(t *testing.T) {
	oneNIC := fakeSource{route4: "10.1.2.3", route6: "fd00::3", addrs: []string{"10.1.2.3", "fd00::3", "fe80::1"}}
	tests := []struct {
		name    string
		bind    string
		src     fakeSource
		want    string
		wantErr string
	}{
		{"specific host kept", "10.9.9.9:5001", oneNIC, "10.9.9.9:5001", ""},
		{"host name kept", "m1.example:5001", oneNIC, "m1.example:5001", ""},
		{"empty host: IPv4 default route", ":5001", oneNIC, "10.1.2.3:5001", ""},
		{"0.0.0.0: IPv4 default route", "0.0.0.0:5001", oneNIC, "10.1.2.3:5001", ""},
		{"[::]: IPv6 default route first", "[::]:5001", oneNIC, "[fd00::3]:5001", ""},
		{"only IPv6 route", ":5001", fakeSource{route6: "2001:db8::5"}, "[2001:db8::5]:5001", ""},
		{"no route, one global address", ":5001",
			fakeSource{addrs: []string{"172.16.0.4", "fe80::1", "127.0.0.1"}}, "172.16.0.4:5001", ""},
		{"no route, loopback-looking route ignored", ":5001",
			fakeSource{route4: "127.0.0.1", addrs: []string{"192.168.1.7"}}, "192.168.1.7:5001", ""},
		{"no route, two addresses", ":5001",
			fakeSource{addrs: []string{"10.0.0.1", "10.1.0.1"}}, "", "2 addresses (10.0.0.1, 10.1.0.1)"},
		{"no route, none", ":5001", fakeSource{addrs: []string{"fe80::1"}}, "", "no global unicast address"},
		{"interface error", ":5001", fakeSource{addrsErr: errors.New("boom")}, "", "list interface addresses: boom"},
		{"port 0 cannot be advertised", ":0", oneNIC, "", "want 1..65535"},
		{"no port", "0.0.0.0", oneNIC, "", "missing port"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Derive(tc.bind, tc.src)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Derive(%q) = %q, %v; want error containing %q", tc.bind, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Derive(%q) = %q, %v; want %q", tc.bind, got, err, tc.want)
			}
		})
	}
}

func TestDeriveAmbiguousIsWrapped(t *testing.T) {
	_, err := Derive(":5001", fakeSource{})
	if !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("err = %v, want it to wrap ErrAmbiguous", err)
	}
}

func TestUnspecified(t *testing.T) {
	for _, tc := range []struct {
		bind string
		want bool
	}{{":1", true}, {"0.0.0.0:1", true}, {"[::]:1", true}, {"127.0.0.1:1", false}, {"[::1]:1", false}, {"h:1", false}} {
		got, err := Unspecified(tc.bind)
		if err != nil || got != tc.want {
			t.Errorf("Unspecified(%q) = %v, %v; want %v", tc.bind, got, err, tc.want)
		}
	}
}

// TestSystemSource checks the real source on this machine returns only
// addresses Derive would accept or reject consistently (no panic, no
// loopback among the interface addresses).
func TestSystemSource(t *testing.T) {
	addrs, err := System{}.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if a.IsLoopback() {
			t.Errorf("InterfaceAddrs returned loopback %s", a)
		}
	}
	if a, err := (System{}).DefaultRouteAddr(false); err == nil && !a.Is4() {
		t.Errorf("IPv4 default route address %s is not IPv4", a)
	}
}

// FuzzDerive: any bind string gives either an error or an address that
// parses as host:port with the bind's port, and a specific host is kept.
func FuzzDerive(f *testing.F) {
	for _, s := range []string{":5001", "0.0.0.0:5001", "[::]:5001", "10.0.0.1:5001", "m1:5001", ":0", "0.0.0.0", "[::1", "::::", ":99999", "[fe80::1%eth0]:5001"} {
		f.Add(s)
	}
	src := fakeSource{route4: "10.1.2.3", route6: "fd00::3"}
	f.Fuzz(func(t *testing.T, bind string) {
		got, err := Derive(bind, src)
		if err != nil {
			return
		}
		if unspec, _ := Unspecified(bind); !unspec {
			if got != bind {
				t.Fatalf("Derive(%q) = %q: a specific host must be kept", bind, got)
			}
			return
		}
		host, port, err := net.SplitHostPort(got)
		if err != nil {
			t.Fatalf("Derive(%q) = %q, not host:port: %v", bind, got, err)
		}
		_, bport, _ := net.SplitHostPort(bind)
		if p, _ := strconv.Atoi(port); strconv.Itoa(p) != port || !samePort(port, bport) {
			t.Fatalf("Derive(%q) = %q: port changed", bind, got)
		}
		if host != "10.1.2.3" && host != "fd00::3" {
			t.Fatalf("Derive(%q) = %q: not the default route's address", bind, got)
		}
	})
}

func samePort(a, b string) bool {
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	return err1 == nil && err2 == nil && x == y
}
