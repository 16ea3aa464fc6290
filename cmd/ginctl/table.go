package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"unicode"

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

// summary writes a line below a table, unless --no-headers.
func (a *app) summary(format string, args ...any) {
	if !a.noHeaders {
		fmt.Fprintf(a.stdout, format+"\n", args...)
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
		return string(x)
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
	return strings.Join(strings.FieldsFunc(s, unicode.IsSpace), "_")
}
