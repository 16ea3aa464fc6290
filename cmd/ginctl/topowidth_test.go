package main

import "testing"

func TestWidthHint(t *testing.T) {
	for _, tc := range []struct {
		name        string
		width, cols int
		nodes       string
		noNICs      bool
		want        string
	}{
		{"fits", 80, 120, "", false, ""},
		{"no terminal", 600, 0, "", false, ""},
		{"too wide", 612, 200, "", false, "ginctl: the matrix is 612 columns wide, the terminal 200: narrow it with --nodes LIST (fewer nodes), --no-nics, or a pager that scrolls sideways (| less -S)"},
		{"already narrowed", 300, 200, "node[001-002]", true, "ginctl: the matrix is 300 columns wide, the terminal 200: narrow it with a shorter --nodes list, or a pager that scrolls sideways (| less -S)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := widthHint(tc.width, tc.cols, tc.nodes, tc.noNICs); got != tc.want {
				t.Fatalf("got %q\nwant %q", got, tc.want)
			}
		})
	}
	if w := widestLine([]byte("ab\nGPU0  X  NV18\nc")); w != 13 {
		t.Errorf("widestLine = %d, want 13", w)
	}
}
