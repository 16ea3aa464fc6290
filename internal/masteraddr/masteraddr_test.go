package masteraddr

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		list string
		want []string
	}{
		{"master1", []string{"master1:5000"}},
		{"master1:6000", []string{"master1:6000"}},
		{"Master-1.Example.COM:6000", []string{"master-1.example.com:6000"}},
		{"10.0.0.1", []string{"10.0.0.1:5000"}},
		{"10.0.0.1:7000", []string{"10.0.0.1:7000"}},
		{"[::1]", []string{"[::1]:5000"}},
		{"[::1]:7000", []string{"[::1]:7000"}},
		{"[FE80:0:0::1%eth0]:7000", []string{"[fe80::1%eth0]:7000"}},
		{"[::ffff:10.0.0.1]", []string{"[::ffff:10.0.0.1]:5000"}},
		// Bare IPv6: more than one colon and no brackets, never a port.
		{"::1", []string{"[::1]:5000"}},
		{"fe80::1%eth0", []string{"[fe80::1%eth0]:5000"}},
		{"fe80::1%eth0.100", []string{"[fe80::1%eth0.100]:5000"}},
		{"fe80::1%3", []string{"[fe80::1%3]:5000"}},
		{"::1:5000", []string{"[::1:5000]:5000"}},
		{"2001:db8::1", []string{"[2001:db8::1]:5000"}},
		// Lists, whitespace and duplicates.
		{"a,b:6000,[::1]:7000", []string{"a:5000", "b:6000", "[::1]:7000"}},
		{"  a , b\t,\n c  ", []string{"a:5000", "b:5000", "c:5000"}},
		{"a,b,a", []string{"a:5000", "b:5000"}},
		{"a,a:5000,A", []string{"a:5000"}},
		{"::1,[::1],[0:0::1]:5000,[::1]:5001", []string{"[::1]:5000", "[::1]:5001"}},
		// Ports.
		{"a:1", []string{"a:1"}},
		{"a:65535", []string{"a:65535"}},
		{"a:05000", []string{"a:5000"}},
		// Host names.
		{"1host", []string{"1host:5000"}},
		{"a-b.c-d", []string{"a-b.c-d:5000"}},
		{"x1.2", []string{"x1.2:5000"}},
		{strings.Repeat("a", 63), []string{strings.Repeat("a", 63) + ":5000"}},
		{longName(253), []string{longName(253) + ":5000"}},
		{DefaultMaster, []string{DefaultMaster}},
	}
	for _, tt := range tests {
		t.Run(tt.list, func(t *testing.T) {
			got, err := Parse(tt.list)
			if err != nil {
				t.Fatalf("Parse(%q) error: %v", tt.list, err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Parse(%q) = %q, want %q", tt.list, got, tt.want)
			}
		})
	}
}

// longName returns a valid host name of n bytes.
func longName(n int) string {
	var sb strings.Builder
	for sb.Len() < n {
		if sb.Len() > 0 {
			sb.WriteByte('.')
		}
		sb.WriteString(strings.Repeat("a", min(63, n-sb.Len())))
	}
	return sb.String()
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		list string
		want string
	}{
		{"empty list", "", `master list: empty`},
		{"blank list", " \t", `master list: empty`},
		{"too many", strings.Repeat("a,", MaxEntries), `master list: too many entries (65, at most 64)`},
		{"empty entry", "a,,b", `master list: entry 2 "": empty entry`},
		{"blank entry", "a, ,b", `master list: entry 2 "": empty entry`},
		{"trailing comma", "a,", `master list: entry 2 "": empty entry`},
		{"leading comma", ",a", `master list: entry 1 "": empty entry`},
		// Brackets.
		{"missing ]", "a,[::1:5000", `master list: entry 2 "[::1:5000": missing ']'`},
		{"missing [", "::1]:5000", `master list: entry 1 "::1]:5000": missing '['`},
		{"stray [", "a[1]", `master list: entry 1 "a[1]": unexpected '['`},
		{"stray [ only", "a[1", `master list: entry 1 "a[1": unexpected '['`},
		{"empty brackets", "[]:5000", `master list: entry 1 "[]:5000": empty address in brackets`},
		{"IPv4 in brackets", "[10.0.0.1]:5000", `master list: entry 1 "[10.0.0.1]:5000": invalid IPv6 address "10.0.0.1" in brackets`},
		{"name in brackets", "[host]", `master list: entry 1 "[host]": invalid IPv6 address "host" in brackets`},
		{"junk after ]", "[::1]5000", `master list: entry 1 "[::1]5000": unexpected "5000" after ']'`},
		{"missing port after ]", "[::1]:", `master list: entry 1 "[::1]:": missing port after ':'`},
		{"bad port after ]", "[::1]:http", `master list: entry 1 "[::1]:http": invalid port "http"`},
		// Bare IPv6.
		{"bad bare IPv6", "host:1:2", `master list: entry 1 "host:1:2": invalid IPv6 address (write [address]:port to give a port)`},
		{"bad bare IPv6 zone", "fe80::1%eth/0", `master list: entry 1 "fe80::1%eth/0": invalid character '/' in IPv6 zone`},
		{"bad bracketed zone", "[fe80::1%eth 0]", `master list: entry 1 "[fe80::1%eth 0]": invalid character ' ' in IPv6 zone`},
		{"empty zone", "fe80::1%", `master list: entry 1 "fe80::1%": invalid IPv6 address (write [address]:port to give a port)`},
		// Ports.
		{"missing port", "a:", `master list: entry 1 "a:": missing port after ':'`},
		{"missing host", ":5000", `master list: entry 1 ":5000": missing host before ':'`},
		{"port zero", "a:0", `master list: entry 1 "a:0": port 0 out of range 1-65535`},
		{"port too big", "a:65536", `master list: entry 1 "a:65536": port 65536 out of range 1-65535`},
		{"port huge", "a:99999999999999999999999", `master list: entry 1 "a:99999999999999999999999": port 99999999999999999999999 out of range 1-65535`},
		{"port name", "a:http", `master list: entry 1 "a:http": invalid port "http"`},
		{"port negative", "a:-1", `master list: entry 1 "a:-1": invalid port "-1"`},
		{"port plus", "a:+1", `master list: entry 1 "a:+1": invalid port "+1"`},
		{"port hex", "a:0x10", `master list: entry 1 "a:0x10": invalid port "0x10"`},
		{"port space", "a: 5000", `master list: entry 1 "a: 5000": invalid port " 5000"`},
		// IPv4.
		{"IPv4 octet too big", "10.0.0.256", `master list: entry 1 "10.0.0.256": invalid IPv4 address "10.0.0.256"`},
		{"IPv4 too short", "10.0.1:5000", `master list: entry 1 "10.0.1:5000": invalid IPv4 address "10.0.1"`},
		{"IPv4 leading zero", "010.0.0.1", `master list: entry 1 "010.0.0.1": invalid IPv4 address "010.0.0.1"`},
		{"all digits", "12345", `master list: entry 1 "12345": invalid IPv4 address "12345"`},
		// Host names.
		{"underscore", "my_host", `master list: entry 1 "my_host": invalid character '_' in host name`},
		{"space", "my host", `master list: entry 1 "my host": invalid character ' ' in host name`},
		{"non-ASCII", "höst", `master list: entry 1 "höst": invalid character 'ö' in host name`},
		{"invalid UTF-8", "h\xffst", `master list: entry 1 "h\xffst": invalid character '\xff' in host name`},
		{"leading dot", ".host", `master list: entry 1 ".host": host name has an empty label`},
		{"trailing dot", "host.", `master list: entry 1 "host.": host name has an empty label`},
		{"double dot", "a..b", `master list: entry 1 "a..b": host name has an empty label`},
		{"leading hyphen", "-host", `master list: entry 1 "-host": host name label "-host" starts or ends with '-'`},
		{"trailing hyphen", "a.host-", `master list: entry 1 "a.host-": host name label "host-" starts or ends with '-'`},
		{"label too long", strings.Repeat("a", 64), `master list: entry 1 "` + strings.Repeat("a", 64) + `": host name label "` + strings.Repeat("a", 64) + `" is longer than 63 bytes`},
		{"name too long", longName(254), `master list: entry 1 "` + longName(254) + `": host name is longer than 253 bytes`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.list)
			if err == nil {
				t.Fatalf("Parse(%q) = %q, want error %q", tt.list, got, tt.want)
			}
			if got != nil {
				t.Errorf("Parse(%q) returned %q with error", tt.list, got)
			}
			if err.Error() != tt.want {
				t.Errorf("Parse(%q) error:\n got %s\nwant %s", tt.list, err, tt.want)
			}
			var merr *Error
			if !errors.As(err, &merr) {
				t.Fatalf("error %T is not *Error", err)
			}
		})
	}
}

func TestParseMaxEntries(t *testing.T) {
	entries := make([]string, MaxEntries)
	for i := range entries {
		entries[i] = fmt.Sprintf("m%d", i)
	}
	got, err := Parse(strings.Join(entries, ","))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != MaxEntries {
		t.Fatalf("got %d addresses, want %d", len(got), MaxEntries)
	}
}

func TestDefaults(t *testing.T) {
	if want := net.JoinHostPort("127.0.0.1", strconv.Itoa(DefaultPort)); DefaultMaster != want {
		t.Errorf("DefaultMaster = %q, want %q", DefaultMaster, want)
	}
}

func TestFromEnv(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	tests := []struct {
		name    string
		flag    string
		getenv  func(string) string
		want    []string
		wantErr string
	}{
		{"flag wins", "m1,m2:6000", env(map[string]string{EnvVar: "e1"}), []string{"m1:5000", "m2:6000"}, ""},
		{"env when no flag", "", env(map[string]string{EnvVar: "e1, [::1]:7000"}), []string{"e1:5000", "[::1]:7000"}, ""},
		{"env when blank flag", "  ", env(map[string]string{EnvVar: "e1"}), []string{"e1:5000"}, ""},
		{"default", "", env(nil), []string{"127.0.0.1:5000"}, ""},
		{"default when env blank", "", env(map[string]string{EnvVar: " "}), []string{"127.0.0.1:5000"}, ""},
		{"bad flag", "a,,b", env(map[string]string{EnvVar: "e1"}), nil, `--master: master list: entry 2 "": empty entry`},
		{"bad env", "", env(map[string]string{EnvVar: "a:0"}), nil, `GIN_MASTER_HOST: master list: entry 1 "a:0": port 0 out of range 1-65535`},
		{"other variables ignored", "", env(map[string]string{"GIN_MASTER": "x"}), []string{"127.0.0.1:5000"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromEnv(tt.flag, tt.getenv)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("FromEnv error = %v, want %s", err, tt.wantErr)
				}
				var merr *Error
				if !errors.As(err, &merr) {
					t.Errorf("error %T does not wrap *Error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("FromEnv = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFromEnvNilGetenv(t *testing.T) {
	t.Setenv(EnvVar, "from-os:6000")
	got, err := FromEnv("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"from-os:6000"}; !slices.Equal(got, want) {
		t.Errorf("FromEnv = %q, want %q", got, want)
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"master1", "master1:6000", "10.0.0.1:7000", "[::1]:7000", "::1", "fe80::1%eth0",
		"[fe80::1%eth0]:1", "a,,b", "[::1:5000", "a:0", "a:65536", "host:1:2", "[10.0.0.1]",
		" a , b ", "::ffff:1.2.3.4", "a..b", "-a", "12345",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, list string) {
		addrs, err := Parse(list)
		if err != nil {
			var merr *Error
			if !errors.As(err, &merr) {
				t.Fatalf("error %T is not *Error", err)
			}
			if addrs != nil {
				t.Fatalf("addresses %q returned with error", addrs)
			}
			return
		}
		if len(addrs) == 0 || len(addrs) > MaxEntries {
			t.Fatalf("%d addresses", len(addrs))
		}
		seen := make(map[string]bool)
		for _, a := range addrs {
			host, port, err := net.SplitHostPort(a)
			if err != nil {
				t.Fatalf("SplitHostPort(%q): %v", a, err)
			}
			if host == "" {
				t.Fatalf("%q has an empty host", a)
			}
			p, err := strconv.Atoi(port)
			if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != port {
				t.Fatalf("%q has invalid port %q", a, port)
			}
			if net.JoinHostPort(host, port) != a {
				t.Fatalf("%q is not normalised", a)
			}
			if seen[a] {
				t.Fatalf("duplicate %q", a)
			}
			seen[a] = true
		}
		// Normalised output parses to itself.
		again, err := Parse(strings.Join(addrs, ","))
		if err != nil {
			t.Fatalf("Parse(%q): %v", addrs, err)
		}
		if !slices.Equal(again, addrs) {
			t.Fatalf("Parse(%q) = %q, not idempotent", addrs, again)
		}
	})
}

func TestOne(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"m1", "m1:5000", true},
		{" 10.0.0.1:5001 ", "10.0.0.1:5001", true},
		{"[fe80::1]", "[fe80::1]:5000", true},
		{"m1,m2", "", false},
		{"", "", false},
		{"[::1", "", false},
	}
	for _, tc := range tests {
		got, err := One(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("One(%q) = %q, %v; want %q, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
