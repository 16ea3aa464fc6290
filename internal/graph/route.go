package graph

import (
	"fmt"
	"strconv"
)

// Path returns the path between two GPUs anywhere in the cluster.
func (g *Graph) Path(a, b GPURef) (Path, error) {
	na, ia, err := g.lookup(a)
	if err != nil {
		return Path{}, fmt.Errorf("path from: %w", err)
	}
	nb, ib, err := g.lookup(b)
	if err != nil {
		return Path{}, fmt.Errorf("path to: %w", err)
	}
	return g.gpuPath(na, ia, nb, ib, true), nil
}

// gpuPath is the path between GPU ia of na and GPU ib of nb; withHops
// records the vertices crossed and the NICs (the matrix needs neither).
func (g *Graph) gpuPath(na *node, ia int, nb *node, ib int, withHops bool) Path {
	ga, gb := &na.gpus[ia], &nb.gpus[ib]
	var hops []Hop
	if withHops {
		hops = make([]Hop, 0, 8)
		hops = append(hops, Hop{Kind: "gpu", ID: ga.uuid, Node: na.name})
	}
	if na == nb {
		if ia == ib {
			return Path{Class: ClassSelf, Hops: hops}
		}
		if nv := na.nvlink(ia, ib); nv.count > 0 {
			p := Path{Class: ClassNVLink, NVLinks: nv.count, BottleneckMBps: nv.mbps}
			if withHops {
				if nv.viaSwitch != "" {
					hops = append(hops, Hop{Kind: "nvswitch", ID: nv.viaSwitch, Node: na.name, LinkMBps: nv.mbps})
				}
				p.Hops = append(hops, Hop{Kind: "gpu", ID: gb.uuid, Node: na.name, LinkMBps: nv.mbps})
			}
			return p
		}
		var hp *[]Hop
		if withHops {
			hp = &hops
		}
		cls, mbps, _ := na.pcieWalk(ga.dev, gb.dev, hp)
		p := Path{Class: cls, BottleneckMBps: mbps}
		if withHops {
			p.Hops = append(hops, Hop{Kind: "gpu", ID: gb.uuid, Node: na.name, LinkMBps: uint64(gb.dev.linkMBps)})
		}
		return p
	}
	var note string
	if ga.domain != (istr{}) && ga.domain == gb.domain {
		if c := int(min(ga.swUp, gb.swUp)); c > 0 {
			mbps := uint64(c) * minNZ(ga.linkMBps, gb.linkMBps)
			p := Path{Class: ClassMNNVL, NVLinks: c, BottleneckMBps: mbps}
			if withHops {
				p.Hops = append(hops,
					Hop{Kind: "nvlink-domain", ID: ga.domain.String(), LinkMBps: mbps},
					Hop{Kind: "gpu", ID: gb.uuid, Node: nb.name, LinkMBps: mbps})
			}
			return p
		}
		note = "same MNNVL clique " + ga.domain.String() + " but no NVLink is up; "
	}
	if withHops && ga.near >= 0 && ga.nearP2C {
		// GPU → C2C → its Grace → PCIe → NIC (NCCL's P2C).
		hops = append(hops, Hop{Kind: "cpu", ID: c2cHopID(ga.dev.numa), Node: na.name, LinkMBps: uint64(ga.dev.linkMBps)})
	}
	p := g.netPath(na, int(ga.near), uint64(ga.nearMBps), nb, int(gb.near), uint64(gb.nearMBps), hops, withHops)
	if withHops {
		last := uint64(gb.nearMBps)
		if gb.near >= 0 && gb.nearP2C {
			p.Hops = append(p.Hops, Hop{Kind: "cpu", ID: c2cHopID(gb.dev.numa), Node: nb.name, LinkMBps: uint64(gb.nearMBps)})
			last = uint64(gb.dev.linkMBps)
		}
		p.Hops = append(p.Hops, Hop{Kind: "gpu", ID: gb.uuid, Node: nb.name, LinkMBps: last})
	}
	p.GPUDirect = ga.near >= 0 && gb.near >= 0 && (isSwitched(ga.nearCls) || ga.nearP2C) && (isSwitched(gb.nearCls) || gb.nearP2C)
	p.C2C = ga.near >= 0 && gb.near >= 0 && (ga.nearP2C || gb.nearP2C)
	if note != "" {
		p.Note = note + p.Note
	}
	return p
}

func isSwitched(c Class) bool { return c == ClassPIX || c == ClassPXB }

// c2cHopID names the CPU a C2C GPU's traffic crosses: "numa0 (C2C)".
func c2cHopID(numa int32) string { return "numa" + strconv.Itoa(int(numa)) + " (C2C)" }

// netPath is the scale-out part of a path between port pa of na and port
// pb of nb (NIC → leaf → ... → leaf → NIC); pcieA and pcieB are the PCIe
// bandwidths from the end devices to their NICs (0 when the end is the NIC).
func (g *Graph) netPath(na *node, pa int, pcieA uint64, nb *node, pb int, pcieB uint64, hops []Hop, withHops bool) Path {
	p := Path{Class: ClassNET, Hops: hops}
	if pa < 0 || pb < 0 {
		missing := na.name
		if pa >= 0 {
			missing = nb.name
		}
		p.Note = "node " + missing + " has no compute HCA port"
		return p
	}
	porta, portb := &na.ports[pa], &nb.ports[pb]
	if withHops {
		p.FromNIC, p.ToNIC = na.nic(porta), nb.nic(portb)
	}
	bw := minNZ(minNZ(pcieA, pcieB), minNZ(porta.rateMBps(), portb.rateMBps()))
	if !porta.active() || !portb.active() {
		down, dn := porta, na
		if porta.active() {
			down, dn = portb, nb
		}
		p.Note = "port " + dn.nic(down) + " port " + fmt.Sprint(down.num) + " is not ACTIVE"
	}
	aa, ab := g.attachment(porta), g.attachment(portb)
	bw = minNZ(bw, minNZ(aa.mbps, ab.mbps))
	if withHops {
		p.Hops = append(p.Hops, Hop{Kind: "port", ID: porta.id.String(), Node: na.name, LinkMBps: pcieA})
	}
	switch {
	case aa.sw >= 0 && ab.sw >= 0:
		r := g.fabric.route(aa.sw, ab.sw, withHops)
		if r.hops == 0 {
			p.Note = joinNote(p.Note, "leaf switches "+g.fabric.switches[aa.sw].name()+" and "+g.fabric.switches[ab.sw].name()+" have no common ancestor in the fabric")
			break
		}
		p.SwitchHops, p.Oversubscription = r.hops, r.oversub
		bw = minNZ(bw, r.mbps)
		if withHops {
			p.Hops = append(p.Hops, Hop{Kind: "switch", ID: g.fabric.switches[aa.sw].name(), LinkMBps: aa.mbps})
			for _, s := range r.via {
				p.Hops = append(p.Hops, Hop{Kind: "switch", ID: g.fabric.switches[s].name(), LinkMBps: r.mbps})
			}
			if aa.sw != ab.sw {
				p.Hops = append(p.Hops, Hop{Kind: "switch", ID: g.fabric.switches[ab.sw].name(), LinkMBps: r.mbps})
			}
		}
	case aa.key != "" && aa.key == ab.key:
		p.SwitchHops, p.Oversubscription = 1, 1
		if withHops {
			p.Hops = append(p.Hops, Hop{Kind: "switch", ID: "0x" + aa.key, LinkMBps: aa.mbps})
		}
	default:
		unknown, un := porta, na
		if aa.sw >= 0 || aa.key != "" {
			unknown, un = portb, nb
		}
		p.Note = joinNote(p.Note, "fabric attachment of "+un.nic(unknown)+" port "+fmt.Sprint(unknown.num)+" is unknown (no fabric scan or neighbour lists it)")
	}
	p.BottleneckMBps = bw
	if withHops {
		p.Hops = append(p.Hops, Hop{Kind: "port", ID: portb.id.String(), Node: nb.name, LinkMBps: ab.mbps})
	}
	return p
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
