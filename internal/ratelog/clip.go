package ratelog

import (
	"fmt"
	"unicode/utf8"
)

// MaxEcho is how many bytes of caller input a log line repeats: enough to
// tell one request from another, too few for a caller to write the log.
const MaxEcho = 256

// Clip returns s cut to MaxEcho bytes (at a rune boundary) with the
// length it had, so a line echoes at most MaxEcho bytes of what a caller
// sent however large the request was.
func Clip(s string) string {
	if len(s) <= MaxEcho {
		return s
	}
	cut := MaxEcho
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}
