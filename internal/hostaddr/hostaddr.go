package hostaddr

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Source is what Derive learns about the host: the source address it would
// use for a default-routed packet (per family) and its interface addresses.
type Source interface {
	// DefaultRouteAddr returns the local address of a default-routed UDP
	// "connection" (no packet is sent), or an error when there is no
	// default route for the family.
	DefaultRouteAddr(ipv6 bool) (netip.Addr, error)
	// InterfaceAddrs returns the addresses of the interfaces that are up.
	InterfaceAddrs() ([]netip.Addr, error)
}

// System is the Source of the machine the process runs on.
type System struct{}

// DefaultRouteAddr implements Source with a connected UDP socket: the
// kernel picks the source address of the route, nothing goes on the wire.
func (System) DefaultRouteAddr(ipv6 bool) (netip.Addr, error) {
	network, probe := "udp4", "192.0.2.1:9" // TEST-NET-1, never routed anywhere real
	if ipv6 {
		network, probe = "udp6", "[2001:db8::1]:9" // documentation prefix
	}
	c, err := net.Dial(network, probe)
	if err != nil {
		return netip.Addr{}, err
	}
	defer c.Close()
	ua, ok := c.LocalAddr().(*net.UDPAddr)
	if !ok {
		return netip.Addr{}, fmt.Errorf("local address %v is not UDP", c.LocalAddr())
	}
	a, ok := netip.AddrFromSlice(ua.IP)
	if !ok {
		return netip.Addr{}, fmt.Errorf("local address %v", ua.IP)
	}
	return a.Unmap(), nil
}

// InterfaceAddrs implements Source with the addresses of up interfaces.
func (System) InterfaceAddrs() ([]netip.Addr, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, fmt.Errorf("interface %s: %w", ifc.Name, err)
		}
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				out = append(out, p.Addr().Unmap())
			}
		}
	}
	return out, nil
}

// ErrAmbiguous is returned (wrapped) when the host has no default route and
// not exactly one global unicast address.
var ErrAmbiguous = errors.New("cannot tell which address to advertise")

// Unspecified reports whether the host part of bind ("host:port") is empty,
// 0.0.0.0 or ::, i.e. the server listens on every interface.
func Unspecified(bind string) (bool, error) {
	host, _, err := net.SplitHostPort(bind)
	if err != nil {
		return false, fmt.Errorf("address %q: %w", bind, err)
	}
	if host == "" {
		return true, nil
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false, nil // a host name: advertisable as it is
	}
	return a.IsUnspecified(), nil
}

// Derive returns the address to advertise for bind. A bind with a specific
// host is returned unchanged. For an unspecified host, the port of bind
// joined with: the default route's source address (IPv4 first, IPv6 second;
// with "[::]" IPv6 first), else the only global unicast interface address.
// Anything else is an error wrapping ErrAmbiguous that lists the
// candidates.
func Derive(bind string, src Source) (string, error) {
	unspec, err := Unspecified(bind)
	if err != nil {
		return "", err
	}
	if !unspec {
		return bind, nil
	}
	host, port, _ := net.SplitHostPort(bind)
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return "", fmt.Errorf("address %q: port %q: want 1..65535 to advertise it", bind, port)
	}
	order := []bool{false, true}
	if strings.Contains(host, ":") {
		order = []bool{true, false}
	}
	for _, v6 := range order {
		a, err := src.DefaultRouteAddr(v6)
		if err == nil && usable(a) {
			return netip.AddrPortFrom(a, mustPort(port)).String(), nil
		}
	}
	addrs, err := src.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("list interface addresses: %w", err)
	}
	var cands []netip.Addr
	for _, a := range addrs {
		if usable(a) && !slices.Contains(cands, a) {
			cands = append(cands, a)
		}
	}
	switch len(cands) {
	case 1:
		return netip.AddrPortFrom(cands[0], mustPort(port)).String(), nil
	case 0:
		return "", fmt.Errorf("%w: no default route and no global unicast address on any interface that is up", ErrAmbiguous)
	default:
		s := make([]string, len(cands))
		for i, a := range cands {
			s[i] = a.String()
		}
		return "", fmt.Errorf("%w: no default route and %d addresses (%s)", ErrAmbiguous, len(cands), strings.Join(s, ", "))
	}
}

// usable is an address other hosts can dial: global unicast (which includes
// private ranges), not loopback or link-local.
func usable(a netip.Addr) bool {
	return a.IsValid() && a.IsGlobalUnicast() && !a.IsLinkLocalUnicast()
}

func mustPort(port string) uint16 {
	p, _ := strconv.Atoi(port) // checked by the caller
	return uint16(p)
}
