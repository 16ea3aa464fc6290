package sim

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
)

// digest hashes the cluster, the node and a device path into 32 bytes. Every
// simulated identity derives from it, so identities are stable across runs
// and distinct across clusters and nodes.
func digest(cluster, node string, parts ...string) [32]byte {
	h := sha256.New()
	// Length-prefix every part so ("a","bc") and ("ab","c") differ.
	for _, p := range append([]string{cluster, node}, parts...) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// gpuUUID is "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
func gpuUUID(cluster, node string, index int) string {
	d := digest(cluster, node, "gpu", fmt.Sprint(index))
	x := hex.EncodeToString(d[:16])
	return "GPU-" + x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// guid is "0x" + 16 hex digits. Mellanox OUI-like prefix keeps it plausible.
func guid(cluster, node string, parts ...string) string {
	d := digest(cluster, node, parts...)
	return "0x" + hex.EncodeToString(d[:8])
}

// NodeGUID is the simulated node GUID of an HCA.
func nodeGUID(cluster, node, hca string) string { return guid(cluster, node, "hca", hca) }

// PortGUID is the simulated port GUID of an HCA port. BuildFabric uses it to
// cable the fabric, so it is exactly what a simulated node reports.
func PortGUID(cluster, node, hca string, port uint32) string {
	return guid(cluster, node, "hca", hca, "port", fmt.Sprint(port))
}

// switchGUID is the simulated node GUID of a fabric switch.
func switchGUID(cluster, name string) string { return guid(cluster, "", "fabric-switch", name) }

// serial is a 13-digit board serial.
func serial(cluster, node string, parts ...string) string {
	d := digest(cluster, node, append([]string{"serial"}, parts...)...)
	return fmt.Sprintf("%013d", binary.BigEndian.Uint64(d[:8])%1e13)
}

// machineID is a 32-hex /etc/machine-id.
func machineID(cluster, node string) string {
	d := digest(cluster, node, "machine-id")
	return hex.EncodeToString(d[:16])
}

// mac is a locally administered unicast MAC.
func mac(cluster, node, dev string) string {
	d := digest(cluster, node, "mac", dev)
	d[0] = d[0]&0xfe | 0x02
	parts := make([]string, 6)
	for i := range parts {
		parts[i] = hex.EncodeToString(d[i : i+1])
	}
	return strings.Join(parts, ":")
}

// lid is a unicast IB LID in 1..0xBFFF.
func lid(cluster, node, hca string, port uint32) uint32 {
	d := digest(cluster, node, "lid", hca, fmt.Sprint(port))
	return binary.BigEndian.Uint32(d[:4])%0xBFFF + 1
}

// linkLocalGID is the fe80::/64 GID built from a port GUID ("0x0123...").
func linkLocalGID(portGUID string) string {
	g := strings.TrimPrefix(portGUID, "0x")
	for len(g) < 16 {
		g = "0" + g
	}
	return "fe80:0000:0000:0000:" + g[0:4] + ":" + g[4:8] + ":" + g[8:12] + ":" + g[12:16]
}

// ipv4 is an address in 10.0.0.0/8.
func ipv4(cluster, node, dev string) string {
	d := digest(cluster, node, "ipv4", dev)
	return fmt.Sprintf("10.%d.%d.%d/16", d[0], d[1], d[2]%253+1)
}

// ipv6 is an address in a ULA /64 (fd00::/8).
func ipv6(cluster, node, dev string) string {
	d := digest(cluster, node, "ipv6", dev)
	w := func(i int) uint16 { return binary.BigEndian.Uint16(d[i : i+2]) }
	return fmt.Sprintf("fd%02x:%x:%x:%x:%x:%x:%x:%x/64", d[0], w(2), w(4), w(6), w(8), w(10), w(12), w(14))
}
