package masteraddr

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"
)

const (
	// DefaultPort is the master port used for entries that give none.
	DefaultPort = 5000

	// DefaultMaster is the master list used when neither the flag nor the
	// environment variable is set.
	DefaultMaster = "127.0.0.1:5000"

	// EnvVar is the environment variable consulted when no flag is given.
	EnvVar = "GIN_MASTER_HOST"

	// MaxEntries is the largest number of entries a master list may have.
	MaxEntries = 64

	maxHostnameLen = 253
	maxLabelLen    = 63
)

// Error describes an invalid master list. Index is the 1-based position of
// the offending entry, or 0 when the problem concerns the whole list.
type Error struct {
	Index int
	Entry string // the offending entry, without surrounding whitespace
	Msg   string
}

func (e *Error) Error() string {
	if e.Index == 0 {
		return "master list: " + e.Msg
	}
	return fmt.Sprintf("master list: entry %d %q: %s", e.Index, e.Entry, e.Msg)
}

// Parse parses a comma-separated list of master addresses and returns them
// as normalised "host:port" strings (as built by net.JoinHostPort), in the
// order given and without duplicates. Entries without a port get
// DefaultPort. IP addresses are written in canonical form and host names in
// lower case, so different spellings of one address count as duplicates.
//
// Errors are of type *Error and name the offending entry.
func Parse(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, &Error{Msg: "empty"}
	}
	if n := strings.Count(list, ",") + 1; n > MaxEntries {
		return nil, &Error{Msg: fmt.Sprintf("too many entries (%d, at most %d)", n, MaxEntries)}
	}
	entries := strings.Split(list, ",")
	out := make([]string, 0, len(entries))
	seen := make(map[string]bool, len(entries))
	for i, entry := range entries {
		entry = strings.TrimSpace(entry)
		addr, err := parseEntry(entry)
		if err != nil {
			return nil, &Error{Index: i + 1, Entry: entry, Msg: err.Error()}
		}
		if !seen[addr] {
			seen[addr] = true
			out = append(out, addr)
		}
	}
	return out, nil
}

// One normalises one master address (a leader hint, say) the way Parse
// writes list entries, so that it compares equal to a configured address.
func One(addr string) (string, error) {
	if strings.Contains(addr, ",") {
		return "", fmt.Errorf("%q: want one address, not a list", addr)
	}
	return parseEntry(strings.TrimSpace(addr))
}

// FromEnv resolves the master list from its sources, in order of precedence:
// flagValue (the --master flag) if it is not blank, else the EnvVar
// environment variable as read by getenv if that is not blank, else
// DefaultMaster. It returns the parsed list; errors say which source was
// wrong. A nil getenv means os.Getenv.
func FromEnv(flagValue string, getenv func(string) string) ([]string, error) {
	if strings.TrimSpace(flagValue) != "" {
		addrs, err := Parse(flagValue)
		if err != nil {
			return nil, fmt.Errorf("--master: %w", err)
		}
		return addrs, nil
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	if v := getenv(EnvVar); strings.TrimSpace(v) != "" {
		addrs, err := Parse(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvVar, err)
		}
		return addrs, nil
	}
	return Parse(DefaultMaster)
}

// parseEntry parses one trimmed entry and returns it as host:port.
func parseEntry(entry string) (string, error) {
	if entry == "" {
		return "", errors.New("empty entry")
	}
	var host, port string
	switch {
	case entry[0] == '[':
		end := strings.IndexByte(entry, ']')
		if end < 0 {
			return "", errors.New("missing ']'")
		}
		inner, rest := entry[1:end], entry[end+1:]
		if inner == "" {
			return "", errors.New("empty address in brackets")
		}
		addr, err := netip.ParseAddr(inner)
		if err != nil || !addr.Is6() {
			return "", fmt.Errorf("invalid IPv6 address %q in brackets", inner)
		}
		if err := checkZone(addr.Zone()); err != nil {
			return "", err
		}
		host = addr.String()
		if rest != "" {
			if rest[0] != ':' {
				return "", fmt.Errorf("unexpected %q after ']'", rest)
			}
			if port = rest[1:]; port == "" {
				return "", errors.New("missing port after ':'")
			}
		}
	case strings.IndexByte(entry, '[') >= 0:
		return "", errors.New("unexpected '['")
	case strings.IndexByte(entry, ']') >= 0:
		return "", errors.New("missing '['")
	case strings.Count(entry, ":") > 1:
		// A bare IPv6 address; it cannot carry a port.
		addr, err := netip.ParseAddr(entry)
		if err != nil || !addr.Is6() {
			return "", errors.New("invalid IPv6 address (write [address]:port to give a port)")
		}
		if err := checkZone(addr.Zone()); err != nil {
			return "", err
		}
		host = addr.String()
	default:
		host = entry
		if i := strings.IndexByte(entry, ':'); i >= 0 {
			host, port = entry[:i], entry[i+1:]
			if host == "" {
				return "", errors.New("missing host before ':'")
			}
			if port == "" {
				return "", errors.New("missing port after ':'")
			}
		}
		var err error
		if host, err = normaliseHost(host); err != nil {
			return "", err
		}
	}

	p := DefaultPort
	if port != "" {
		v, err := strconv.ParseUint(port, 10, 16)
		switch {
		case errors.Is(err, strconv.ErrRange), err == nil && v == 0:
			return "", fmt.Errorf("port %s out of range 1-65535", port)
		case err != nil:
			return "", fmt.Errorf("invalid port %q", port)
		}
		p = int(v)
	}
	return net.JoinHostPort(host, strconv.Itoa(p)), nil
}

// normaliseHost validates an unbracketed host without a colon: an IPv4
// address or an RFC 1123 host name. Host names are lower-cased.
func normaliseHost(host string) (string, error) {
	if strings.Trim(host, "0123456789.") == "" {
		// Only digits and dots: this must be an IPv4 address, never a
		// host name (RFC 1123, section 2.1).
		addr, err := netip.ParseAddr(host)
		if err != nil || !addr.Is4() {
			return "", fmt.Errorf("invalid IPv4 address %q", host)
		}
		return addr.String(), nil
	}
	if len(host) > maxHostnameLen {
		return "", fmt.Errorf("host name is longer than %d bytes", maxHostnameLen)
	}
	for label := range strings.SplitSeq(host, ".") {
		switch {
		case label == "":
			return "", errors.New("host name has an empty label")
		case len(label) > maxLabelLen:
			return "", fmt.Errorf("host name label %q is longer than %d bytes", label, maxLabelLen)
		case label[0] == '-' || label[len(label)-1] == '-':
			return "", fmt.Errorf("host name label %q starts or ends with '-'", label)
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !isAlnum(c) && c != '-' {
				return "", fmt.Errorf("invalid character %s in host name", quoteChar(label, i))
			}
		}
	}
	return strings.ToLower(host), nil
}

// checkZone accepts IPv6 zones that look like interface names or indexes.
func checkZone(zone string) error {
	for i := 0; i < len(zone); i++ {
		if c := zone[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return fmt.Errorf("invalid character %s in IPv6 zone", quoteChar(zone, i))
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// quoteChar quotes the character starting at s[i] for an error message.
func quoteChar(s string, i int) string {
	r, size := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && size <= 1 {
		return fmt.Sprintf(`'\x%02x'`, s[i])
	}
	return strconv.QuoteRune(r)
}
