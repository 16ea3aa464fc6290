package nodelabels

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestKueueLevels(t *testing.T) {
	cases := []struct {
		depth  int
		blocks bool
		want   string
	}{
		{1, false, "gin.topology/leaf kubernetes.io/hostname"},
		{2, false, "gin.topology/spine gin.topology/leaf kubernetes.io/hostname"},
		{3, true, "gin.topology/core gin.topology/spine gin.topology/leaf gin.topology/block kubernetes.io/hostname"},
		{0, true, "gin.topology/block kubernetes.io/hostname"},
	}
	for _, c := range cases {
		if got := strings.Join(KueueLevels(c.depth, c.blocks), " "); got != c.want {
			t.Errorf("KueueLevels(%d, %v) = %s, want %s", c.depth, c.blocks, got, c.want)
		}
	}
}

func TestKueueTopology(t *testing.T) {
	y, err := KueueTopology("gin", KueueLevels(2, false), "a comment\nsecond line")
	if err != nil {
		t.Fatal(err)
	}
	want := "# a comment\n# second line\napiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata:\n  name: gin\nspec:\n  levels:\n" +
		"  - nodeLabel: gin.topology/spine\n  - nodeLabel: gin.topology/leaf\n  - nodeLabel: kubernetes.io/hostname\n"
	if string(y) != want {
		t.Fatalf("got\n%s\nwant\n%s", y, want)
	}
	bad := []struct {
		name   string
		levels []string
		err    string
	}{
		{"Gin", KueueLevels(1, false), "DNS subdomain"},
		{"gin", nil, "0 topology levels"},
		{"gin", make([]string, 17), "17 topology levels"},
		{"gin", []string{HostnameKey, KeyLeaf}, "must be the last"},
	}
	for _, b := range bad {
		if _, err := KueueTopology(b.name, b.levels, ""); err == nil || !strings.Contains(err.Error(), b.err) {
			t.Errorf("KueueTopology(%q, %v): %v, want %q", b.name, b.levels, err, b.err)
		}
	}
}

func TestValue(t *testing.T) {
	long := strings.Repeat("a", 70)
	cases := []struct{ in, want string }{
		{"leaf01", "leaf01"},
		{"A09-P1-IBLEAF-04-04", "A09-P1-IBLEAF-04-04"},
		{"8f2c1d3e-0b6a-4e5f-9a7b-1c2d3e4f5a6b.7", "8f2c1d3e-0b6a-4e5f-9a7b-1c2d3e4f5a6b.7"},
		{"MF0;switch:QM9700/U1", "MF0-switch-QM9700-U1"},
		{"-x-", "x"},
		{"", ""},
		{long, strings.Repeat("a", 54) + "-"},
	}
	for _, c := range cases {
		got := Value(c.in)
		if c.in == long {
			if !strings.HasPrefix(got, c.want) || len(got) != 63 {
				t.Errorf("Value(70 a) = %q (%d)", got, len(got))
			}
			continue
		}
		if got != c.want {
			t.Errorf("Value(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func FuzzValue(f *testing.F) {
	for _, s := range []string{"leaf01", "MF0;a:b/U1", strings.Repeat("x.", 40), "--", "\x00é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := Value(s)
		if v == "" {
			return
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Fatalf("Value(%q) = %q: %v", s, v, errs)
		}
		if Value(s) != v {
			t.Fatal("not deterministic")
		}
	})
}
