package draw

import (
	"bytes"
	"html"
	"strconv"
)

// svg writes SVG elements into a buffer. Attribute values and text are
// escaped (html.EscapeString covers the five XML specials), so no input
// string can open an element or an attribute.
type svg struct{ b bytes.Buffer }

// attrs writes ` k="v"` pairs; kv has an even length by construction at
// every call site.
func (w *svg) attrs(kv []string) {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			continue // an empty class or data value is left out
		}
		w.b.WriteByte(' ')
		w.b.WriteString(kv[i])
		w.b.WriteString(`="`)
		w.b.WriteString(html.EscapeString(kv[i+1]))
		w.b.WriteByte('"')
	}
}

// open writes <tag k="v" ...>.
func (w *svg) open(tag string, kv ...string) {
	w.b.WriteByte('<')
	w.b.WriteString(tag)
	w.attrs(kv)
	w.b.WriteByte('>')
}

// close writes </tag>.
func (w *svg) close(tag string) {
	w.b.WriteString("</")
	w.b.WriteString(tag)
	w.b.WriteString(">\n")
}

// empty writes <tag k="v" .../>.
func (w *svg) empty(tag string, kv ...string) {
	w.b.WriteByte('<')
	w.b.WriteString(tag)
	w.attrs(kv)
	w.b.WriteString("/>\n")
}

// text writes <text k="v" ...>s</text>.
func (w *svg) text(s string, kv ...string) {
	w.open("text", kv...)
	w.b.WriteString(html.EscapeString(s))
	w.close("text")
}

// title writes a <title> (the browser's tooltip, and what screen readers say).
func (w *svg) title(s string) {
	w.b.WriteString("<title>")
	w.b.WriteString(html.EscapeString(s))
	w.b.WriteString("</title>")
}

// rect writes a rectangle with an optional title.
func (w *svg) rect(x, y, wd, ht int, title string, kv ...string) {
	a := append([]string{"x", itoa(x), "y", itoa(y), "width", itoa(wd), "height", itoa(ht)}, kv...)
	if title == "" {
		w.empty("rect", a...)
		return
	}
	w.open("rect", a...)
	w.title(title)
	w.close("rect")
}

// line writes a line.
func (w *svg) line(x1, y1, x2, y2 int, kv ...string) {
	w.empty("line", append([]string{"x1", itoa(x1), "y1", itoa(y1), "x2", itoa(x2), "y2", itoa(y2)}, kv...)...)
}

// start writes the <svg> root.
func (w *svg) start(width, height int, class, label string) {
	w.open("svg", "xmlns", "http://www.w3.org/2000/svg", "class", class, "width", itoa(width), "height", itoa(height),
		"viewBox", "0 0 "+itoa(width)+" "+itoa(height), "role", "img", "aria-label", label)
	w.b.WriteByte('\n')
}

func itoa(i int) string { return strconv.Itoa(i) }

// ftoa formats a coordinate with one decimal.
func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }
