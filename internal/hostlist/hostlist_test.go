package hostlist

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{"", []string{}},
		{"   \t\n", []string{}},
		{"login1", []string{"login1"}},
		{"a.b_c-d", []string{"a.b_c-d"}},
		{"node[001-004,010]", []string{"node001", "node002", "node003", "node004", "node010"}},
		{"node[08-11]", []string{"node08", "node09", "node10", "node11"}},
		{"node[8-11]", []string{"node8", "node9", "node10", "node11"}},
		{"node[098-100]", []string{"node098", "node099", "node100"}},
		{"node[98-0100]", []string{"node98", "node99", "node100"}},
		{"n[5]", []string{"n5"}},
		{"n[05]", []string{"n05"}},
		{"n[0]", []string{"n0"}},
		{"n[1-1]", []string{"n1"}},
		{"n[3,1,2]", []string{"n3", "n1", "n2"}},
		{"[1-3]", []string{"1", "2", "3"}},
		{"n[1-2]x", []string{"n1x", "n2x"}},
		{"gpu-a[1-3]-b[01-02]", []string{
			"gpu-a1-b01", "gpu-a1-b02",
			"gpu-a2-b01", "gpu-a2-b02",
			"gpu-a3-b01", "gpu-a3-b02",
		}},
		{"[1-2][3-4]", []string{"13", "14", "23", "24"}},
		{"node[1-2],login1,rack[1-2]n[3-4]", []string{
			"node1", "node2", "login1", "rack1n3", "rack1n4", "rack2n3", "rack2n4",
		}},
		{"  node1 ,\tnode2\n, login1  ", []string{"node1", "node2", "login1"}},
		// Duplicates are removed, keeping the first occurrence.
		{"b,a,b", []string{"b", "a"}},
		{"n[1-3,2-4]", []string{"n1", "n2", "n3", "n4"}},
		{"n[3-4],n[1-5]", []string{"n3", "n4", "n1", "n2", "n5"}},
		{"n[1,1,1]", []string{"n1"}},
		// Different spellings of the same number are different names.
		{"n[1,01,001]", []string{"n1", "n01", "n001"}},
		// Large values are fine as long as the count is small.
		{"n[18446744073709551614-18446744073709551615]", []string{"n18446744073709551614", "n18446744073709551615"}},
		{"n[0000000000000000000000001-2]", []string{"n0000000000000000000000001", "n0000000000000000000000002"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			got, err := Expand(tt.expr)
			if err != nil {
				t.Fatalf("Expand(%q) error: %v", tt.expr, err)
			}
			if got == nil {
				t.Fatalf("Expand(%q) = nil, want non-nil slice", tt.expr)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Expand(%q) = %q, want %q", tt.expr, got, tt.want)
			}
		})
	}
}

func TestExpandErrors(t *testing.T) {
	tests := []struct {
		name string
		expr string
		want string // full error text
	}{
		// Unbalanced brackets.
		{"unclosed", "node[1-2", `hostlist: "node[1-2": unmatched '[' (at offset 4)`},
		{"unclosed after comma", "node[1-2,", `hostlist: "node[1-2,": unmatched '[' (at offset 4)`},
		{"unclosed after dash", "node[1-", `hostlist: "node[1-": unmatched '[' (at offset 4)`},
		{"unclosed empty", "node[", `hostlist: "node[": unmatched '[' (at offset 4)`},
		{"unclosed swallows items", "a,n[1-2,m1", `hostlist: "n[1-2,m1": unmatched '[' (at offset 3)`},
		{"unopened", "node1-2]", `hostlist: "node1-2]": unmatched ']' (at offset 7)`},
		{"unopened after group", "n[1]]", `hostlist: "n[1]]": unmatched ']' (at offset 4)`},
		{"unopened in second item", "a, b]", `hostlist: "b]": unmatched ']' (at offset 4)`},
		// Nested brackets.
		{"nested", "n[1[2]]", `hostlist: "n[1[2]]": nested '[' (at offset 3)`},
		{"nested at start", "n[[1]]", `hostlist: "n[[1]]": nested '[' (at offset 2)`},
		{"nested after dash", "n[1-[2]]", `hostlist: "n[1-[2]]": nested '[' (at offset 4)`},
		// Empty range parts.
		{"empty group", "n[]", `hostlist: "n[]": empty range bound (at offset 2)`},
		{"empty first part", "n[,1]", `hostlist: "n[,1]": empty range bound (at offset 2)`},
		{"empty last part", "n[1,]", `hostlist: "n[1,]": empty range bound (at offset 4)`},
		{"empty middle part", "n[1,,2]", `hostlist: "n[1,,2]": empty range bound (at offset 4)`},
		{"empty upper bound", "n[1-]", `hostlist: "n[1-]": empty range bound (at offset 4)`},
		{"empty lower bound", "n[-1]", `hostlist: "n[-1]": empty range bound (at offset 2)`},
		{"double dash", "n[1--2]", `hostlist: "n[1--2]": empty range bound (at offset 4)`},
		{"three bounds", "n[1-2-3]", `hostlist: "n[1-2-3]": unexpected '-' in range (at offset 5)`},
		// Non-digits in ranges.
		{"letter in range", "n[a-b]", `hostlist: "n[a-b]": invalid character 'a' in range (at offset 2)`},
		{"letter after number", "n[1a]", `hostlist: "n[1a]": invalid character 'a' in range (at offset 3)`},
		{"space in range", "n[1, 2]", `hostlist: "n[1, 2]": invalid character ' ' in range (at offset 4)`},
		{"sign in range", "n[+1]", `hostlist: "n[+1]": invalid character '+' in range (at offset 2)`},
		{"non-ASCII in range", "n[1é]", `hostlist: "n[1é]": invalid character 'é' in range (at offset 3)`},
		{"number too large", "n[18446744073709551616]", `hostlist: "n[18446744073709551616]": number 18446744073709551616 is too large (at offset 2)`},
		// Descending ranges.
		{"descending", "node[4-1]", `hostlist: "node[4-1]": range 4-1 is descending (at offset 5)`},
		{"descending padded", "x, node[010-009]", `hostlist: "node[010-009]": range 010-009 is descending (at offset 8)`},
		// Empty names.
		{"empty middle item", "a,,b", `hostlist: "": empty host name (at offset 2)`},
		{"empty first item", ",a", `hostlist: "": empty host name (at offset 0)`},
		{"empty last item", "a,", `hostlist: "": empty host name (at offset 2)`},
		{"blank item", "a, ,b", `hostlist: "": empty host name (at offset 3)`},
		{"only comma", ",", `hostlist: "": empty host name (at offset 0)`},
		// Bad characters in names.
		{"space in name", "node 1", `hostlist: "node 1": invalid character ' ' in host name (at offset 4)`},
		{"slash in name", "a,rack/1", `hostlist: "rack/1": invalid character '/' in host name (at offset 6)`},
		{"colon in name", "host:22", `hostlist: "host:22": invalid character ':' in host name (at offset 4)`},
		{"non-ASCII in name", "nodé", `hostlist: "nodé": invalid character 'é' in host name (at offset 3)`},
		{"invalid UTF-8 in name", "no\xffde", `hostlist: "no\xffde": invalid character '\xff' in host name (at offset 2)`},
		// Size limits.
		{"too many hosts", "n[0-999999999]", `hostlist: "n[0-999999999]": expands to more than 131072 hosts (at offset 0)`},
		{"too many hosts full range", "n[0-18446744073709551615]", `hostlist: "n[0-18446744073709551615]": expands to more than 131072 hosts (at offset 0)`},
		{"too many hosts product", "a[1-1000]b[1-1000]", `hostlist: "a[1-1000]b[1-1000]": expands to more than 131072 hosts (at offset 0)`},
		{"too many hosts sum", "a[1-100000],b[1-100000]", `hostlist: "b[1-100000]": expands to more than 131072 hosts (at offset 12)`},
		{"too many hosts duplicates", "a[0-131071],a0", `hostlist: "a0": expands to more than 131072 hosts (at offset 12)`},
		{"name too long", strings.Repeat("x", 256), `hostlist: "` + strings.Repeat("x", 256) + `": host names would be longer than 255 bytes (at offset 0)`},
		{"name too long with range", strings.Repeat("x", 253) + "[1-100]", `hostlist: "` + strings.Repeat("x", 253) + `[1-100]": host names would be longer than 255 bytes (at offset 0)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Expand(tt.expr)
			if err == nil {
				t.Fatalf("Expand(%q) = %q, want error %q", tt.expr, got, tt.want)
			}
			if got != nil {
				t.Errorf("Expand(%q) returned names %q with error", tt.expr, got)
			}
			if err.Error() != tt.want {
				t.Errorf("Expand(%q) error:\n got %s\nwant %s", tt.expr, err, tt.want)
			}
			var herr *Error
			if !errors.As(err, &herr) {
				t.Fatalf("error %T is not *Error", err)
			}
			if herr.Offset < 0 || herr.Offset > len(tt.expr) {
				t.Errorf("offset %d outside expression of length %d", herr.Offset, len(tt.expr))
			}
			if !strings.Contains(tt.expr, herr.Item) {
				t.Errorf("item %q is not part of the expression", herr.Item)
			}
		})
	}
}

func TestExpandLimits(t *testing.T) {
	// Exactly MaxHosts names is allowed.
	got, err := Expand(fmt.Sprintf("n[0-%d]", MaxHosts-1))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != MaxHosts || got[0] != "n0" || got[MaxHosts-1] != fmt.Sprint("n", MaxHosts-1) {
		t.Fatalf("got %d names, first %q", len(got), got[0])
	}
	// The longest allowed name.
	long := strings.Repeat("x", MaxNameLen-3) + "[1-100]"
	got, err = Expand(long)
	if err != nil {
		t.Fatal(err)
	}
	if len(got[99]) != MaxNameLen {
		t.Fatalf("last name has %d bytes, want %d", len(got[99]), MaxNameLen)
	}
}

// Oversized expressions must be rejected before any name is generated.
func TestExpandTooManyFailsFast(t *testing.T) {
	for _, expr := range []string{
		"n[0-999999999]",
		"n[0-18446744073709551615]",
		"a[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]",
		"a[0-1][0-1][0-1][0-1][0-1][0-1][0-1][0-1][0-1][0-1][0-1][0-1][0-1][0-1][0-1][0-1][0-1][0-1]",
	} {
		allocs := testing.AllocsPerRun(10, func() {
			if _, err := Expand(expr); err == nil {
				t.Fatalf("Expand(%q) succeeded", expr)
			}
		})
		if allocs > 30 {
			t.Errorf("Expand(%q) made %v allocations, want a handful", expr, allocs)
		}
	}

	// A long list of values stops being parsed once it is too large.
	expr := "n[" + strings.Repeat("1,", 10*MaxHosts) + "1]"
	_, err := Expand(expr)
	var herr *Error
	if !errors.As(err, &herr) || !strings.Contains(herr.Msg, "expands to more than") {
		t.Fatalf("Expand(n[1,1,...]) error = %.100v, want too many hosts", err)
	}
}

func TestCompress(t *testing.T) {
	tests := []struct {
		names []string
		want  string
	}{
		{nil, ""},
		{[]string{}, ""},
		{[]string{""}, ""},
		{[]string{"login1"}, "login1"},
		{[]string{"login"}, "login"},
		{[]string{"node001", "node002", "node003"}, "node[001-003]"},
		{[]string{"node003", "node001", "node002", "node001"}, "node[001-003]"},
		{[]string{"node001", "node002", "node003", "node004", "node010"}, "node[001-004,010]"},
		{[]string{"node08", "node09", "node10", "node11"}, "node[08-11]"},
		{[]string{"node8", "node9", "node10", "node11"}, "node[8-11]"},
		{[]string{"node098", "node099", "node100", "node1000"}, "node[098-100,1000]"},
		{[]string{"n1", "n01"}, "n[1,01]"},
		{[]string{"n9", "n09", "n10", "n8", "n08"}, "n[8-9,08-10]"},
		{[]string{"b2", "a1", "b1", "login", "a2"}, "a[1-2],b[1-2],login"},
		{[]string{"node", "node1", "node2"}, "node,node[1-2]"},
		{[]string{"1", "2", "3", "5"}, "[1-3,5]"},
		{[]string{"7"}, "7"},
		{[]string{"gpu-a1-b01", "gpu-a1-b02", "gpu-a2-b01"}, "gpu-a1-b[01-02],gpu-a2-b01"},
		{[]string{"n0", "n1"}, "n[0-1]"},
		{[]string{"n00", "n0"}, "n[0,00]"},
		{[]string{"n99999999999999999999"}, "n99999999999999999999"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.names, ","), func(t *testing.T) {
			got := Compress(tt.names)
			if got != tt.want {
				t.Errorf("Compress(%q) = %q, want %q", tt.names, got, tt.want)
			}
			checkRoundTrip(t, tt.names)
		})
	}
}

func TestCompressRoundTrip(t *testing.T) {
	for _, expr := range []string{
		"node[001-004,010],login[1-3],n[8-12],n[08-12],n[098-101],rack[1-2]n[3-4]",
		"x[0-1000],x[0000-0100],y[7,9,11-13]",
		"a,b,c,a[1-3]b,a[1-3]",
	} {
		names, err := Expand(expr)
		if err != nil {
			t.Fatal(err)
		}
		checkRoundTrip(t, names)
	}
}

// checkRoundTrip checks that Compress(names) expands back to the set of
// non-empty names.
func checkRoundTrip(t *testing.T, names []string) {
	t.Helper()
	expr := Compress(names)
	got, err := Expand(expr)
	if err != nil {
		t.Fatalf("Expand(Compress(%q)) = Expand(%q): %v", names, expr, err)
	}
	want := make(map[string]bool)
	for _, n := range names {
		if n != "" {
			want[n] = true
		}
	}
	if len(got) != len(want) {
		t.Fatalf("Expand(Compress(%q)) = %q: %d names, want %d", names, got, len(got), len(want))
	}
	for _, n := range got {
		if !want[n] {
			t.Fatalf("Expand(Compress(%q)) = %q: unexpected %q", names, got, n)
		}
	}
}

func FuzzExpand(f *testing.F) {
	for _, seed := range []string{
		"", "node[001-004,010]", "gpu-a[1-3]-b[01-02]", "node[1-2],login1,rack[1-2]n[3-4]",
		"node[08-11]", "n[5]", " a , b ", "node[4-1]", "n[", "n]", "n[[1]]", "n[1,,2]",
		"n[0-999999999]", "a,,b", "n[1-2-3]", "x[0-1000],x[0000-0100]", "[1-2][3-4]",
		"n[18446744073709551615]", "n[1,01,001]",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		names, err := Expand(expr)
		if err != nil {
			var herr *Error
			if !errors.As(err, &herr) {
				t.Fatalf("error %T is not *Error", err)
			}
			if herr.Offset < 0 || herr.Offset > len(expr) {
				t.Fatalf("offset %d outside expression of length %d", herr.Offset, len(expr))
			}
			if names != nil {
				t.Fatalf("names %q returned with error", names)
			}
			return
		}
		if len(names) > MaxHosts {
			t.Fatalf("%d names, more than MaxHosts", len(names))
		}
		seen := make(map[string]bool, len(names))
		for _, n := range names {
			if n == "" || len(n) > MaxNameLen {
				t.Fatalf("bad name %q", n)
			}
			if seen[n] {
				t.Fatalf("duplicate name %q", n)
			}
			seen[n] = true
		}
		checkRoundTrip(t, names)
	})
}

func BenchmarkExpand(b *testing.B) {
	for b.Loop() {
		if _, err := Expand("rack[01-16]-node[001-128],login[1-4]"); err != nil {
			b.Fatal(err)
		}
	}
}

// ExpandAtMost refuses an expression naming more than its limit before
// generating a name: the hostlist bomb of issue #21 (240-byte names, 131,072
// of them) costs a handful of allocations.
func TestExpandAtMost(t *testing.T) {
	bomb := strings.Repeat("a", 240) + "[000000-131071]"
	tests := []struct {
		expr    string
		limit   int
		want    int    // names, when no error
		wantErr string // substring
	}{
		{"n[1-4]", 4, 4, ""},
		{"n[1-4]", 3, 0, "expands to more than 3 hosts"},
		{"n[1-2],n[1-2]", 3, 0, "expands to more than 3 hosts"}, // duplicates count
		{"n1", 0, 1, ""},                                        // clamped to 1
		{bomb, 16384, 0, "expands to more than 16384 hosts"},
		{bomb, 1 << 30, 131072, ""}, // clamped to MaxHosts
	}
	for _, tt := range tests {
		got, err := ExpandAtMost(tt.expr, tt.limit)
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("ExpandAtMost(%.20q, %d) = %v, want error %q", tt.expr, tt.limit, err, tt.wantErr)
		case tt.wantErr == "" && (err != nil || len(got) != tt.want):
			t.Errorf("ExpandAtMost(%.20q, %d) = %d names, %v; want %d", tt.expr, tt.limit, len(got), err, tt.want)
		}
	}
	if _, err := ExpandAtMost(bomb, 16384); !errors.Is(err, ErrTooMany) {
		t.Errorf("the bomb past the limit: %v, want ErrTooMany", err)
	}
	if _, err := Expand("n[1-"); errors.Is(err, ErrTooMany) {
		t.Errorf("a malformed expression is ErrTooMany: %v", err)
	}
	allocs := testing.AllocsPerRun(10, func() { _, _ = ExpandAtMost(bomb, 16384) })
	if allocs > 30 {
		t.Errorf("refusing the bomb made %v allocations, want a handful", allocs)
	}
}
