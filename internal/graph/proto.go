package graph

import (
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// This file is the only place the graph touches gin.v1 topology (service)
// types: it converts answers for the master.

// ClassToProto converts a class to gin.v1.PathClass (same numbering).
func ClassToProto(c Class) ginv1.PathClass {
	if c > ClassNET {
		return ginv1.PathClass_PATH_CLASS_UNSPECIFIED
	}
	return ginv1.PathClass(c)
}

// MatrixToProto converts a matrix to GetMatrixResponse's devices and cells.
func MatrixToProto(m *Matrix) ([]*ginv1.MatrixDevice, []*ginv1.MatrixCell) {
	if m == nil {
		return nil, nil
	}
	devs := make([]*ginv1.MatrixDevice, len(m.Devices))
	for i, d := range m.Devices {
		devs[i] = &ginv1.MatrixDevice{
			NodeName: d.Node, Kind: ginv1.MatrixDeviceKind(d.Kind), Label: d.Label, Id: d.ID,
			CpuAffinity: d.CPUAffinity, NumaNode: int32(d.NUMANode),
		}
	}
	backing := make([]ginv1.MatrixCell, len(m.Cells))
	cells := make([]*ginv1.MatrixCell, len(m.Cells))
	for i, c := range m.Cells {
		backing[i].Class = ClassToProto(c.Class)
		backing[i].Count = uint32(max(c.Count, 0))
		backing[i].BottleneckMbPerS = c.BottleneckMBps
		cells[i] = &backing[i]
	}
	return devs, cells
}

// PathToProto converts a path to gin.v1.Path.
func PathToProto(p Path) *ginv1.Path {
	out := &ginv1.Path{
		Class:            ClassToProto(p.Class),
		Label:            p.Label(),
		NvlinkCount:      uint32(max(p.NVLinks, 0)),
		SwitchHops:       uint32(max(p.SwitchHops, 0)),
		BottleneckMbPerS: p.BottleneckMBps,
		Oversubscription: p.Oversubscription,
		FromNic:          p.FromNIC,
		ToNic:            p.ToNIC,
		Gpudirect:        p.GPUDirect,
		Note:             p.Note,
	}
	for _, h := range p.Hops {
		out.Hops = append(out.Hops, &ginv1.PathHop{Kind: h.Kind, Id: h.ID, NodeName: h.Node, LinkMbPerS: h.LinkMBps})
	}
	return out
}
