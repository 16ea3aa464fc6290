package main

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestTableEscapesControls plants names a hostile or old master could
// send (ESC sequences, a bidi override, newlines, invalid UTF-8) in every
// kind of cell and checks that no byte a terminal interprets reaches the
// output, and that the escape shows what was there.
func TestTableEscapesControls(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"plain", "node001", "node001"},
		{"unicode kept", "nœud-ü", "nœud-ü"},
		{"ESC colour", "gpu\x1b[31mred", `gpu\x1b[31mred`},
		{"clear screen", "\x1b[2J\x1b[H", `\x1b[2J\x1b[H`},
		{"bidi override", "evil\u202egnp.exe", `evil\u202egnp.exe`},
		{"bidi isolate", "a\u2066b\u2069", `a\u2066b\u2069`},
		{"C1 NEL is white space", "a\u0085b", "a_b"},
		{"C1 CSI", "a\u009b31mb", `a\u009b31mb`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"BEL then CR", "a\x07\rb", `a\x07_b`},
		{"newline splits token", "a\nb", "a_b"},
		{"invalid UTF-8", "a\xffb", `a\xffb`},
		{"text cell ESC", text("ok \x1b]0;title\x07"), `ok \x1b]0;title\x07`},
		{"text cell newline", text("line1\nline2"), `line1\x0aline2`},
		{"text cell bidi", text("x\u202ey"), `x\u202ey`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			a := &app{stdout: &out, globals: globals{noHeaders: true}}
			tb := a.newTable("A", "B")
			tb.row("first", tc.in)
			if err := tb.flush(); err != nil {
				t.Fatal(err)
			}
			got := strings.TrimRight(out.String(), " \n")
			if want := "first  " + tc.want; got != want {
				t.Errorf("row = %q, want %q", got, want)
			}
			for i, r := range got {
				if mustEscape(r) {
					t.Errorf("output holds %U at byte %d: %q", r, i, got)
				}
			}
		})
	}
}

// TestSummaryEscapesControls: the line below a table (node models, state
// reasons, server ids come from the master) is escaped like a cell.
func TestSummaryEscapesControls(t *testing.T) {
	var out bytes.Buffer
	a := &app{stdout: &out}
	a.summary("Node %s: %s", "node001", "DGX\x1b]0;owned\x07 H100\u202e")
	if got, want := out.String(), `Node node001: DGX\x1b]0;owned\x07 H100\u202e`+"\n"; got != want {
		t.Fatalf("summary = %q, want %q", got, want)
	}
}

// FuzzEscapeText: whatever the input, the output holds no rune a terminal
// interprets (nor invalid UTF-8), and text without one is left as it is.
func FuzzEscapeText(f *testing.F) {
	for _, s := range []string{"", "node001", "a\x1b[2Jb", "x\u202ey", "\xff\xfe", "ok\u2066", "\u009b", "nœud"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := escapeText(s)
		if !utf8.ValidString(got) {
			t.Fatalf("escapeText(%q) = %q: invalid UTF-8", s, got)
		}
		clean := true
		for _, r := range s {
			if mustEscape(r) {
				clean = false
			}
		}
		for _, r := range got {
			if mustEscape(r) {
				t.Fatalf("escapeText(%q) = %q holds %U", s, got, r)
			}
		}
		if clean && got != s {
			t.Fatalf("escapeText(%q) = %q: clean text changed", s, got)
		}
	})
}
