package fabricscan

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// Bounds of ParseLLDPCLIJSON.
const (
	// MaxLLDPBytes is the largest lldpcli output accepted.
	MaxLLDPBytes = 16 << 20
	// MaxLLDPNeighbors is the most neighbour entries accepted.
	MaxLLDPNeighbors = 100_000
)

// IfaceToHCA maps a local network interface ("ens1f0np0") to the RDMA device
// and port behind it ("mlx5_0", 1); ok is false for an interface with no
// RDMA device (a management port).
type IfaceToHCA func(ifname string) (hca string, port uint32, ok bool)

// ParseLLDPCLIJSON reads the output of `lldpcli -f json show neighbors
// details` (lldpd) and returns one FabricNeighbor per neighbour seen on an
// interface that ifaceToHCA maps to an HCA port; neighbours on other
// interfaces are left out. With a nil ifaceToHCA the interface name is used as
// the HCA and the port is 0.
//
// The switch is named by its chassis id (SwitchGuid, usually a MAC), its
// SysName (or SysDescr when it has none) and, when the port id or
// description ends in a number ("swp12", "Ethernet1/51"), that number as
// SwitchPort. RateGbps comes from the dot3 MAU type when lldpd shows it.
//
// Both layouts of lldpcli's JSON are read: "-f json", where a lone interface
// or chassis is an object keyed by its name and several are an array, and
// "-f json0", where every value is an array. Malformed input is an error
// and gives no neighbours.
func ParseLLDPCLIJSON(b []byte, ifaceToHCA IfaceToHCA) ([]*ginv1.FabricNeighbor, error) {
	if len(b) > MaxLLDPBytes {
		return nil, fmt.Errorf("lldp: input larger than %d bytes", MaxLLDPBytes)
	}
	if ifaceToHCA == nil {
		ifaceToHCA = func(ifname string) (string, uint32, bool) { return ifname, 0, true }
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("lldp: %w", err)
	}
	if dec.More() {
		return nil, errors.New("lldp: trailing data after the JSON document")
	}
	obj, ok := root.(map[string]any)
	if !ok {
		return nil, errors.New("lldp: top level is not an object")
	}
	lldp, ok := obj["lldp"]
	if !ok {
		return nil, errors.New(`lldp: no "lldp" key`)
	}
	var ifaces []lldpIface
	for i, l := range asList(lldp) {
		lm, ok := l.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("lldp: lldp[%d] is not an object", i)
		}
		got, err := collectIfaces(lm["interface"])
		if err != nil {
			return nil, err
		}
		ifaces = append(ifaces, got...)
		if len(ifaces) > MaxLLDPNeighbors {
			return nil, fmt.Errorf("lldp: more than %d neighbours", MaxLLDPNeighbors)
		}
	}

	var out []*ginv1.FabricNeighbor
	for _, ifc := range ifaces {
		n, err := ifc.neighbor()
		if err != nil {
			return nil, fmt.Errorf("lldp: interface %q: %w", ifc.name, err)
		}
		hca, port, ok := ifaceToHCA(ifc.name)
		if !ok {
			continue
		}
		n.Hca, n.Port = hca, port
		out = append(out, n)
	}
	slices.SortStableFunc(out, func(a, b *ginv1.FabricNeighbor) int {
		return cmp.Or(cmp.Compare(a.Hca, b.Hca), cmp.Compare(a.Port, b.Port),
			cmp.Compare(a.SwitchGuid, b.SwitchGuid), cmp.Compare(a.SwitchPort, b.SwitchPort))
	})
	return out, nil
}

type lldpIface struct {
	name string
	body map[string]any
}

// asList makes a lone value a one-element list; nil gives none.
func asList(v any) []any {
	switch t := v.(type) {
	case nil:
		return nil
	case []any:
		return t
	default:
		return []any{t}
	}
}

// collectIfaces reads the "interface" value: {"eth0": {...}} (json, one
// interface), [{"eth0": {...}}, {"eth1": {...}}] (json, several) or
// [{"name": "eth0", ...}] (json0).
func collectIfaces(v any) ([]lldpIface, error) {
	var out []lldpIface
	for i, e := range asList(v) {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("lldp: interface[%d] is not an object", i)
		}
		if isIfaceBody(m) {
			name, err := scalar(m["name"])
			if err != nil || name == "" {
				return nil, fmt.Errorf("lldp: interface[%d] has no name", i)
			}
			out = append(out, lldpIface{name: name, body: m})
			continue
		}
		names := make([]string, 0, len(m))
		for k := range m {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, name := range names {
			for j, b := range asList(m[name]) {
				body, ok := b.(map[string]any)
				if !ok || !isIfaceBody(body) {
					return nil, fmt.Errorf("lldp: interface %q[%d] is not an interface object", name, j)
				}
				out = append(out, lldpIface{name: name, body: body})
			}
		}
		if len(out) > MaxLLDPNeighbors {
			return nil, fmt.Errorf("lldp: more than %d neighbours", MaxLLDPNeighbors)
		}
	}
	return out, nil
}

func isIfaceBody(m map[string]any) bool {
	_, c := m["chassis"]
	_, p := m["port"]
	return c || p
}

// scalar reads a string value, or json0's [{"value": "..."}].
func scalar(v any) (string, error) {
	switch t := v.(type) {
	case nil:
		return "", nil
	case string:
		return t, nil
	case json.Number:
		return t.String(), nil
	case bool:
		return strconv.FormatBool(t), nil
	case []any:
		if len(t) == 0 {
			return "", nil
		}
		return scalar(t[0])
	case map[string]any:
		if val, ok := t["value"]; ok {
			return scalar(val)
		}
		return "", errors.New("object without a value")
	}
	return "", fmt.Errorf("unexpected %T", v)
}

// object reads an object value, or the first of json0's array.
func object(v any) (map[string]any, error) {
	switch t := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return t, nil
	case []any:
		if len(t) == 0 {
			return nil, nil
		}
		return object(t[0])
	}
	return nil, fmt.Errorf("unexpected %T", v)
}

// typedID reads {"type": "mac", "value": "..."}.
func typedID(v any) (typ, val string, err error) {
	m, err := object(v)
	if err != nil || m == nil {
		return "", "", err
	}
	if typ, err = scalar(m["type"]); err != nil {
		return "", "", fmt.Errorf("id type: %w", err)
	}
	if val, err = scalar(m["value"]); err != nil {
		return "", "", fmt.Errorf("id value: %w", err)
	}
	return typ, val, nil
}

func (ifc lldpIface) neighbor() (*ginv1.FabricNeighbor, error) {
	ch, err := object(ifc.body["chassis"])
	if err != nil {
		return nil, fmt.Errorf("chassis: %w", err)
	}
	if ch == nil {
		return nil, errors.New("no chassis")
	}
	sysname := ""
	if _, direct := ch["id"]; !direct {
		// "-f json" keys the chassis by its SysName.
		if len(ch) != 1 {
			return nil, errors.New("chassis has no id")
		}
		for k, v := range ch {
			sysname = k
			if ch, err = object(v); err != nil || ch == nil {
				return nil, fmt.Errorf("chassis %q is not an object", k)
			}
		}
	} else if sysname, err = scalar(ch["name"]); err != nil {
		return nil, fmt.Errorf("chassis name: %w", err)
	}
	_, chassisID, err := typedID(ch["id"])
	if err != nil {
		return nil, fmt.Errorf("chassis id: %w", err)
	}
	if chassisID == "" {
		return nil, errors.New("chassis has no id")
	}
	descr, err := scalar(ch["descr"])
	if err != nil {
		return nil, fmt.Errorf("chassis descr: %w", err)
	}
	n := &ginv1.FabricNeighbor{
		SwitchGuid: strings.ToLower(chassisID),
		// A system description often spans lines; the inventory takes
		// no control characters (inventory.CheckText): one line, spaces.
		SwitchDescription: cmp.Or(sysname, strings.Join(strings.Fields(descr), " ")),
		Source:            ginv1.FabricNeighborSource_FABRIC_NEIGHBOR_SOURCE_LLDP,
	}

	port, err := object(ifc.body["port"])
	if err != nil {
		return nil, fmt.Errorf("port: %w", err)
	}
	if port != nil {
		ptype, pid, err := typedID(port["id"])
		if err != nil {
			return nil, fmt.Errorf("port id: %w", err)
		}
		pdescr, err := scalar(port["descr"])
		if err != nil {
			return nil, fmt.Errorf("port descr: %w", err)
		}
		if ptype != "mac" {
			n.SwitchPort, _ = trailingNumber(pid)
		}
		if n.SwitchPort == 0 {
			n.SwitchPort, _ = trailingNumber(pdescr)
		}
		if an, err := object(port["auto-negotiation"]); err == nil && an != nil {
			cur, _ := scalar(an["current"])
			n.RateGbps = mauGbps(cur)
		}
	}
	return n, nil
}

// trailingNumber returns the number a port name ends in: "swp12" → 12,
// "Ethernet1/51" → 51, "Eth1/1/4" → 4.
func trailingNumber(s string) (uint32, bool) {
	j := len(s)
	for j > 0 && s[j-1] >= '0' && s[j-1] <= '9' {
		j--
	}
	if j == len(s) || len(s)-j > 9 {
		return 0, false
	}
	v, err := strconv.ParseUint(s[j:], 10, 32)
	return uint32(v), err == nil
}

// mauGbps reads the speed from a dot3 MAU type as lldpd prints it
// ("100GbaseCR4 - 100GBASE-R PCS/PMA over 4 lane shielded copper",
// "10GigBaseCX4 - X copper ...", "1000BaseTFD - Four-pair Category 5 UTP").
func mauGbps(s string) uint32 {
	j := 0
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j == 0 || j > 6 {
		return 0
	}
	v, _ := strconv.ParseUint(s[:j], 10, 32)
	rest := strings.ToLower(s[j:])
	switch {
	case strings.HasPrefix(rest, "gbase"), strings.HasPrefix(rest, "gigbase"), strings.HasPrefix(rest, "g"):
		return uint32(v)
	case strings.HasPrefix(rest, "base"), strings.HasPrefix(rest, "mbase"):
		return uint32(v / 1000)
	}
	return 0
}
