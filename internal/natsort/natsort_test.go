package natsort

import (
	"slices"
	"testing"
)

func TestCompare(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"node2", "node10", -1},
		{"mlx5_10", "mlx5_2", 1},
		{"node002", "node2", 1}, // same number: the shorter spelling first
		{"node2", "node2", 0},
		{"a", "b", -1},
		{"n1", "n1a", -1},
		{"99999999999999999999999", "100000000000000000000000", -1}, // beyond uint64
		{"", "a", -1},
		{"node2a", "node2b", -1},
		{"a", "ab", -1},
		{"rack1-node9", "rack1-node10", -1},
		{"rack2-node1", "rack10-node0", -1},
	}
	for _, tc := range tests {
		if got := Compare(tc.a, tc.b); got != tc.want {
			t.Errorf("Compare(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Compare(tc.b, tc.a); got != -tc.want {
			t.Errorf("Compare(%q, %q) = %d, want %d", tc.b, tc.a, got, -tc.want)
		}
	}
	names := []string{"mlx5_10", "mlx5_2", "mlx5_0", "mlx5_1"}
	slices.SortFunc(names, Compare)
	if !slices.Equal(names, []string{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_10"}) {
		t.Fatalf("sorted = %v", names)
	}
}

func FuzzCompare(f *testing.F) {
	f.Add("node2", "node10")
	f.Fuzz(func(t *testing.T, a, b string) {
		if Compare(a, b) != -Compare(b, a) {
			t.Fatalf("not antisymmetric: %q %q", a, b)
		}
		if (Compare(a, b) == 0) != (a == b) {
			t.Fatalf("equal only for equal strings: %q %q", a, b)
		}
	})
}
