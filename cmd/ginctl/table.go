package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gin-topology/gin/internal/jsonout"
)

// table writes aligned columns whose cells are single tokens, so that
// `awk '{print $3}'` picks a column: empty cells are "-", white space
// inside a value becomes "_". --no-headers leaves out the header row and
// the summary lines.
type table struct {
	a  *app
	tw *tabwriter.Writer
}

func (a *app) newTable(header ...string) *table {
	t := &table{a: a, tw: tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)}
	if !a.noHeaders {
		fmt.Fprintln(t.tw, strings.Join(header, "\t"))
	}
	return t
}

// row writes one row; each value is made a single token.
func (t *table) row(cells ...any) {
	s := make([]string, len(cells))
	for i, c := range cells {
		s[i] = cell(c)
	}
	fmt.Fprintln(t.tw, strings.Join(s, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// summary writes a line below a table, unless --no-headers; what a
// terminal would interpret is escaped, as in cells.
func (a *app) summary(format string, args ...any) {
	if !a.noHeaders {
		fmt.Fprintln(a.stdout, escapeText(fmt.Sprintf(format, args...)))
	}
}

// text is a free-text cell, kept as it is: only the last column of a
// table may hold one.
type text string

// cell is a value as one token (a text as it is).
func cell(v any) string {
	var s string
	switch x := v.(type) {
	case text:
		if x == "" {
			return "-"
		}
		return escapeText(string(x))
	case string:
		s = x
	case protoreflect.Enum:
		s = jsonout.EnumWord(x.Descriptor(), x.Number())
	default:
		s = fmt.Sprint(v)
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return "-"
	}
	return escapeText(strings.Join(strings.FieldsFunc(s, unicode.IsSpace), "_"))
}

// escapeText writes what a terminal would interpret rather than print as
// a visible Go escape: invalid UTF-8 bytes (\xff), C0 and C1 control
// characters (\x1b, \u0085) and the Unicode bidirectional overrides and
// isolates (\u202e, \u2066...). The master refuses these at validation;
// this is the second line, for values stored before it did, or sent by a
// master that does not. A backslash stays as it is (names never need one
// escaped to be read). JSON output needs none of this: encoding escapes.
func escapeText(s string) string {
	clean := true
	for _, r := range s {
		if mustEscape(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x80 && mustEscape(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case mustEscape(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// mustEscape is true for the runes escapeText writes as escapes:
// utf8.RuneError stands for an invalid byte (a real U+FFFD is escaped too,
// harmlessly).
func mustEscape(r rune) bool {
	switch {
	case r == utf8.RuneError:
		return true
	case r < 0x20, r >= 0x7f && r < 0xa0:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
