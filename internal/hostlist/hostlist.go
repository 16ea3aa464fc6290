package hostlist

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

const (
	// MaxHosts is the largest number of host names an expression may expand
	// to, counting duplicates. Expand rejects larger expressions before
	// generating any name.
	MaxHosts = 1 << 17

	// MaxNameLen is the longest host name, in bytes, that an expression may
	// produce. It keeps the memory used by an expansion proportional to
	// MaxHosts rather than to the length of the expression.
	MaxNameLen = 255
)

// Error describes a malformed or over-large hostlist expression.
type Error struct {
	Item   string // the offending item, without surrounding whitespace
	Offset int    // byte offset of the problem in the whole expression
	Msg    string // what is wrong
	// tooMany: the expression names more hosts than allowed (Unwrap is
	// ErrTooMany), as opposed to being malformed.
	tooMany bool
}

// ErrTooMany is what an Error for an expression naming more hosts than
// allowed wraps (errors.Is).
var ErrTooMany = errors.New("hostlist: too many hosts")

// Unwrap is ErrTooMany for an expression naming too many hosts, else nil.
func (e *Error) Unwrap() error {
	if e.tooMany {
		return ErrTooMany
	}
	return nil
}

func (e *Error) Error() string {
	return fmt.Sprintf("hostlist: %q: %s (at offset %d)", e.Item, e.Msg, e.Offset)
}

// Expand returns the host names named by the Slurm hostlist expression expr,
// in the order written, without duplicates (the first occurrence is kept).
// An expression that is empty or only whitespace yields an empty slice.
//
// Errors are of type *Error and name the offending item and the byte offset
// of the problem.
func Expand(expr string) ([]string, error) {
	return ExpandAtMost(expr, MaxHosts)
}

// ExpandAtMost is Expand for an expression that may name at most limit
// hosts (counting duplicates; limit is clamped to 1..MaxHosts): a larger
// one is refused before any name is generated, so a caller that bounds
// what one request may cost (a server expanding a client's expression)
// never holds more than limit names for it.
func ExpandAtMost(expr string, limit int) ([]string, error) {
	limit = min(max(limit, 1), MaxHosts)
	if isBlank(expr) {
		return []string{}, nil
	}
	var (
		items []item
		total uint64
	)
	for start := 0; ; {
		end := itemEnd(expr, start)
		it, err := parseItem(expr, start, end)
		if err != nil {
			return nil, err
		}
		total += it.count // it.count <= MaxHosts+1, so no overflow
		if total > uint64(limit) {
			e := it.errorf(it.off, "expands to more than %d hosts", limit)
			e.tooMany = true
			return nil, e
		}
		items = append(items, it)
		if end == len(expr) {
			break
		}
		start = end + 1
	}

	out := make([]string, 0, total)
	seen := make(map[string]struct{}, total)
	buf := make([]byte, 0, MaxNameLen)
	for i := range items {
		items[i].expand(buf, func(name []byte) {
			if _, dup := seen[string(name)]; dup {
				return
			}
			s := string(name)
			seen[s] = struct{}{}
			out = append(out, s)
		})
	}
	return out, nil
}

// numRange is one "lo" or "lo-hi" element of a bracket group.
type numRange struct {
	lo, hi uint64
	width  int // digits in lo as written; values are zero-padded to it
}

// segment is either a literal piece of a name or a bracket group.
type segment struct {
	lit    string
	ranges []numRange // nil for a literal
}

// item is one parsed top-level element of an expression.
type item struct {
	text  string // trimmed text, for error messages
	off   int    // offset of text in the expression
	segs  []segment
	count uint64 // number of names, capped at MaxHosts+1
}

func (it *item) errorf(off int, format string, args ...any) *Error {
	return &Error{Item: it.text, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

func (it *item) tooMany() *Error {
	e := it.errorf(it.off, "expands to more than %d hosts", MaxHosts)
	e.tooMany = true
	return e
}

// expand calls emit with every name of the item, leftmost group slowest.
// The slice passed to emit is only valid during the call.
func (it *item) expand(buf []byte, emit func([]byte)) {
	var rec func(i int, buf []byte)
	rec = func(i int, buf []byte) {
		if i == len(it.segs) {
			emit(buf)
			return
		}
		seg := &it.segs[i]
		if seg.ranges == nil {
			rec(i+1, append(buf, seg.lit...))
			return
		}
		for _, r := range seg.ranges {
			for v := r.lo; ; v++ {
				rec(i+1, appendPadded(buf, v, r.width))
				if v == r.hi {
					break
				}
			}
		}
	}
	rec(0, buf[:0])
}

// itemEnd returns the index of the top-level comma ending the item that
// starts at start, or len(expr). A comma inside brackets does not end an
// item; bracket errors are diagnosed later by parseItem.
func itemEnd(expr string, start int) int {
	inGroup := false
	for i := start; i < len(expr); i++ {
		switch expr[i] {
		case '[':
			inGroup = true
		case ']':
			inGroup = false
		case ',':
			if !inGroup {
				return i
			}
		}
	}
	return len(expr)
}

// parseItem parses expr[start:end], one top-level item.
func parseItem(expr string, start, end int) (item, error) {
	for start < end && isSpace(expr[start]) {
		start++
	}
	for end > start && isSpace(expr[end-1]) {
		end--
	}
	it := item{text: expr[start:end], off: start, count: 1}
	if start == end {
		return it, it.errorf(start, "empty host name")
	}

	nameLen := 0 // longest name the item can produce
	addLen := func(n int) error {
		nameLen += n
		if nameLen > MaxNameLen {
			return it.errorf(start, "host names would be longer than %d bytes", MaxNameLen)
		}
		return nil
	}
	lit := start // start of the pending literal
	flush := func(i int) error {
		if i > lit {
			it.segs = append(it.segs, segment{lit: expr[lit:i]})
			return addLen(i - lit)
		}
		return nil
	}

	for i := start; i < end; {
		c := expr[i]
		switch {
		case isNameChar(c):
			i++
		case c == '[':
			if err := flush(i); err != nil {
				return it, err
			}
			ranges, size, width, next, err := parseGroup(&it, expr, i, end)
			if err != nil {
				return it, err
			}
			it.segs = append(it.segs, segment{ranges: ranges})
			it.count = min(it.count*size, MaxHosts+1) // both factors <= MaxHosts+1
			if it.count > MaxHosts {
				return it, it.tooMany()
			}
			if err := addLen(width); err != nil {
				return it, err
			}
			i = next
			lit = i
		case c == ']':
			return it, it.errorf(i, "unmatched ']'")
		default:
			return it, it.errorf(i, "invalid character %s in host name", quoteChar(expr, i))
		}
	}
	if err := flush(end); err != nil {
		return it, err
	}
	return it, nil
}

// parseGroup parses the bracket group whose '[' is at expr[open]. It returns
// the ranges, the number of values (capped at MaxHosts+1), the widest value
// in bytes, and the index just past the closing ']'.
func parseGroup(it *item, expr string, open, end int) (ranges []numRange, size uint64, width, next int, err error) {
	// number parses the digits at expr[i:] and returns the value, the digit
	// count and the index after the digits.
	number := func(i int) (uint64, int, int, error) {
		j := i
		for j < end && isDigit(expr[j]) {
			j++
		}
		if j == i {
			switch {
			case i == end:
				return 0, 0, 0, it.errorf(open, "unmatched '['")
			case expr[i] == ',' || expr[i] == ']' || expr[i] == '-':
				return 0, 0, 0, it.errorf(i, "empty range bound")
			case expr[i] == '[':
				return 0, 0, 0, it.errorf(i, "nested '['")
			default:
				return 0, 0, 0, it.errorf(i, "invalid character %s in range", quoteChar(expr, i))
			}
		}
		v, perr := strconv.ParseUint(expr[i:j], 10, 64)
		if perr != nil {
			return 0, 0, 0, it.errorf(i, "number %s is too large", expr[i:j])
		}
		return v, j - i, j, nil
	}

	if strings.IndexByte(expr[open:end], ']') < 0 {
		return nil, 0, 0, 0, it.errorf(open, "unmatched '['")
	}
	i := open + 1
	for {
		loOff := i
		lo, loWidth, j, err := number(i)
		if err != nil {
			return nil, 0, 0, 0, err
		}
		hi := lo
		i = j
		if i < end && expr[i] == '-' {
			if hi, _, i, err = number(i + 1); err != nil {
				return nil, 0, 0, 0, err
			}
			if hi < lo {
				return nil, 0, 0, 0, it.errorf(loOff, "range %s is descending", expr[loOff:i])
			}
		}
		ranges = append(ranges, numRange{lo: lo, hi: hi, width: loWidth})
		// Values print at the lower bound's width or wider; the widest is hi.
		width = max(width, loWidth, digits(hi))
		n := hi - lo // may be 1<<64-1, so cap before adding one
		if n >= MaxHosts {
			n = MaxHosts
		}
		size = min(size+n+1, MaxHosts+1)
		if size > MaxHosts {
			return nil, 0, 0, 0, it.tooMany()
		}

		if i == end {
			return nil, 0, 0, 0, it.errorf(open, "unmatched '['")
		}
		switch c := expr[i]; {
		case c == ',':
			i++
		case c == ']':
			return ranges, size, width, i + 1, nil
		case c == '[':
			return nil, 0, 0, 0, it.errorf(i, "nested '['")
		case c == '-':
			return nil, 0, 0, 0, it.errorf(i, "unexpected '-' in range")
		default:
			return nil, 0, 0, 0, it.errorf(i, "invalid character %s in range", quoteChar(expr, i))
		}
	}
}

// Compress returns a compact hostlist expression naming exactly the given
// host names, for display: "node001,node002,node003" becomes
// "node[001-003]". Names are grouped by the text before their trailing
// number; names without a trailing number are listed as they are. Duplicates
// and empty names are dropped, and the output is sorted by prefix and then
// by number, so it does not depend on the order of names.
//
// For valid host names (see Expand) the result expands back to the same set
// of names, provided there are at most MaxHosts of them.
func Compress(names []string) string {
	plain := make(map[string]bool)          // names without a trailing number
	byPrefix := make(map[string][]numbered) // the others, by prefix
	seen := make(map[string]struct{}, len(names))
	for _, name := range names {
		if name == "" {
			continue
		}
		if _, dup := seen[name]; dup {
			continue
		}
		seen[name] = struct{}{}
		k := len(name)
		for k > 0 && isDigit(name[k-1]) {
			k--
		}
		v, err := strconv.ParseUint(name[k:], 10, 64)
		if k == len(name) || err != nil {
			plain[name] = true
			continue
		}
		byPrefix[name[:k]] = append(byPrefix[name[:k]], numbered{num: name[k:], val: v})
	}

	keys := make([]string, 0, len(plain)+len(byPrefix))
	for name := range plain {
		keys = append(keys, name)
	}
	for prefix := range byPrefix {
		if !plain[prefix] {
			keys = append(keys, prefix)
		}
	}
	slices.Sort(keys)

	var sb strings.Builder
	for _, key := range keys {
		if plain[key] {
			if sb.Len() > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(key)
		}
		nums := byPrefix[key]
		if len(nums) == 0 {
			continue
		}
		slices.SortFunc(nums, func(a, b numbered) int {
			if a.val != b.val {
				if a.val < b.val {
					return -1
				}
				return 1
			}
			return len(a.num) - len(b.num)
		})
		runs := compressRuns(nums)
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(key)
		if len(runs) == 1 && runs[0].lo == runs[0].hi {
			sb.WriteString(runs[0].lo)
			continue
		}
		sb.WriteByte('[')
		for i, r := range runs {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(r.lo)
			if r.hi != r.lo {
				sb.WriteByte('-')
				sb.WriteString(r.hi)
			}
		}
		sb.WriteByte(']')
	}
	return sb.String()
}

// numbered is the trailing number of a host name.
type numbered struct {
	num string // the digits as written
	val uint64
}

// run is a range of consecutive numbers that Expand reproduces exactly when
// written as "lo-hi": every value v prints as max(width, digits(v)) digits,
// where width is len(lo).
type run struct {
	lo, hi string
}

// compressRuns groups numbers (sorted by value, distinct as strings) into
// runs. A number with leading zeros can only join a run of its own width; a
// number without leading zeros can join any run no wider than itself.
func compressRuns(nums []numbered) []run {
	type key struct {
		width int
		last  uint64
	}
	var runs []run
	open := make(map[key]int) // run index by width and last value
	for _, n := range nums {
		s, v := n.num, n.val
		padded := len(s) > 1 && s[0] == '0'
		joined := false
		if v > 0 {
			minWidth := 1
			if padded {
				minWidth = len(s)
			}
			for w := len(s); w >= minWidth; w-- {
				idx, ok := open[key{w, v - 1}]
				if !ok {
					continue
				}
				delete(open, key{w, v - 1})
				runs[idx].hi = s
				open[key{w, v}] = idx
				joined = true
				break
			}
		}
		if !joined {
			open[key{len(s), v}] = len(runs)
			runs = append(runs, run{lo: s, hi: s})
		}
	}
	return runs
}

func appendPadded(b []byte, v uint64, width int) []byte {
	var tmp [20]byte
	d := strconv.AppendUint(tmp[:0], v, 10)
	for i := len(d); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, d...)
}

func digits(v uint64) int {
	n := 1
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}

func quoteChar(s string, i int) string {
	r, size := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && size <= 1 {
		return fmt.Sprintf(`'\x%02x'`, s[i])
	}
	return strconv.QuoteRune(r)
}

func isBlank(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isSpace(s[i]) {
			return false
		}
	}
	return true
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isNameChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || isDigit(c) || c == '.' || c == '_' || c == '-'
}
