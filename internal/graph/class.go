package graph

import "strconv"

// Class is the class of a path between two devices, from closest to farthest.
// The numbering matches gin.v1.PathClass.
type Class uint8

// Path classes.
const (
	// ClassUnknown is the zero value: no path was computed.
	ClassUnknown Class = iota
	// ClassSelf is the same device ("X").
	ClassSelf
	// ClassNVLink is a bonded set of NVLinks, direct or through NVSwitches ("NV#").
	ClassNVLink
	// ClassPIX traverses at most a single PCIe bridge (switch).
	ClassPIX
	// ClassPXB traverses multiple PCIe bridges without the host bridge.
	ClassPXB
	// ClassPHB traverses PCIe and a host bridge.
	ClassPHB
	// ClassNODE traverses PCIe and the interconnect between host bridges of a NUMA node.
	ClassNODE
	// ClassSYS traverses PCIe and the SMP interconnect between NUMA nodes.
	ClassSYS
	// ClassMNNVL reaches another node of the same multi-node NVLink clique.
	ClassMNNVL
	// ClassNET reaches another node over the scale-out network.
	ClassNET
)

var classNames = [...]string{"UNKNOWN", "X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS", "MNNVL", "NET"}

// String is the class name as `nvidia-smi topo -m` writes it, without counts.
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "Class(" + strconv.Itoa(int(c)) + ")"
}

// label is what a matrix cell or path prints: "X", "NV18", "PIX", "MNNVL",
// "NET3" ("NET" when the number of switches is unknown).
func label(c Class, count int) string {
	switch c {
	case ClassNVLink:
		return "NV" + strconv.Itoa(count)
	case ClassNET:
		if count <= 0 {
			return "NET"
		}
		return "NET" + strconv.Itoa(count)
	}
	return c.String()
}

// pcieMBps is the per-direction bandwidth of a PCIe link in MB/s: 8b/10b
// encoding for Gen1/2, 128b/130b from Gen3 (Gen4 x16 ≈ 31508, Gen5 x16 ≈ 63015).
func pcieMBps(gen, width uint32) uint64 {
	if gen == 0 || width == 0 || gen > 6 || width > 32 {
		return 0
	}
	gts := [...]uint64{0, 2500, 5000, 8000, 16000, 32000, 64000}[gen] // MT/s per lane
	lanes := gts * uint64(width)
	if gen <= 2 {
		return lanes / 10 // 8b/10b: ×8/10 bits→bytes, ×1/8
	}
	return (lanes*16 + 65) / 130 // 128b/130b, rounded
}

// minNZ is the smaller of a and b, ignoring zeros (unknown).
func minNZ(a, b uint64) uint64 {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}
