package health

import (
	"fmt"
	"sort"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// facts is what the cluster rules read of a node.
type facts struct {
	model  string
	driver []keyed
	vbios  []keyed
	nicFw  []keyed
	ports  []port
}

// keyed is one versioned part of a node: the class it is compared within
// (a GPU or NIC model), its name on the node, its version.
type keyed struct{ class, part, version string }

// port is one active compute port and the leaf switch it is cabled to.
type port struct {
	subj, leaf string
	rate       uint32
}

func factsOf(n Node) facts {
	inv := n.Inventory
	f := facts{model: inv.GetHost().GetSystemModel()}
	if v := inv.GetHost().GetDriverVersion(); v != "" {
		f.driver = []keyed{{"", "driver", v}}
	}
	for _, g := range inv.GetGpus() {
		if g.GetVbiosVersion() != "" {
			f.vbios = append(f.vbios, keyed{g.GetModel(), gpuName(g), g.GetVbiosVersion()})
		}
	}
	neighbor := map[string]string{}
	for _, fn := range inv.GetFabricNeighbors() {
		neighbor[fmt.Sprintf("%s:%d", fn.GetHca(), fn.GetPort())] = fn.GetSwitchGuid()
	}
	for _, h := range inv.GetHcas() {
		if h.GetFirmwareVersion() != "" {
			f.nicFw = append(f.nicFw, keyed{h.GetHcaType() + "/" + h.GetBoardId(), h.GetName(), h.GetFirmwareVersion()})
		}
		if h.GetRole() == ginv1.HcaRole_HCA_ROLE_STORAGE {
			continue
		}
		for _, p := range h.GetPorts() {
			if p.GetState() != ginv1.PortState_PORT_STATE_ACTIVE || p.GetRateGbps() == 0 {
				continue
			}
			subj := fmt.Sprintf("%s:%d", h.GetName(), p.GetPort())
			leaf := neighbor[subj]
			if leaf == "" {
				leaf = n.Leaf
			}
			if leaf != "" {
				f.ports = append(f.ports, port{subj, leaf, p.GetRateGbps()})
			}
		}
	}
	return f
}

// clusterFindings compares nodes with each other: versions against the
// majority of nodes of the same system model, compute ports against the
// ports on the same leaf switch.
func clusterFindings(as []Assessment, th Thresholds) map[string][]*ginv1.Finding {
	out := map[string][]*ginv1.Finding{}
	add := func(name string, f *ginv1.Finding) { out[name] = append(out[name], f) }

	byModel := map[string][]Assessment{}
	for _, a := range as {
		byModel[a.facts.model] = append(byModel[a.facts.model], a)
	}
	for model, group := range byModel {
		if len(group) < th.MinPeers {
			continue
		}
		if model == "" {
			model = "(unknown model)"
		}
		versionRule(group, th, CheckDriverMismatch, model, "driver", func(f facts) []keyed { return f.driver },
			"NCCL and CUDA behave differently across the job's nodes; a mixed-driver job can fail to initialise or run at the slower node's pace",
			"install the cluster's driver version on this node (or move the majority, deliberately)", add)
		versionRule(group, th, CheckVBIOSMismatch, model, "VBIOS", func(f facts) []keyed { return f.vbios },
			"GPUs of one model on different VBIOS can differ in clocks, power limits and NVLink behaviour",
			"flash the fleet's VBIOS (nvidia-smi -q | grep VBIOS, NVIDIA's firmware update tool)", add)
		versionRule(group, th, CheckNICFwMismatch, model, "NIC firmware", func(f facts) []keyed { return f.nicFw },
			"NICs of one type on different firmware can differ in RDMA features and bugs (adaptive routing, congestion control, GPUDirect)",
			"update the NIC firmware to the fleet's version (mlxfwmanager, mstflint)", add)
	}
	leafRule(as, th, add)
	return out
}

// versionRule finds, per class, the version most nodes of the group run (a
// strict majority of the nodes that report one, at least MinPeers of them)
// and names every part that runs another.
func versionRule(group []Assessment, th Thresholds, check, model, what string, get func(facts) []keyed, impact, fix string, add func(string, *ginv1.Finding)) {
	nodesWith := map[string]map[string]map[string]bool{} // class → version → nodes
	reporting := map[string]map[string]bool{}            // class → nodes
	for _, a := range group {
		for _, k := range get(a.facts) {
			if nodesWith[k.class] == nil {
				nodesWith[k.class] = map[string]map[string]bool{}
				reporting[k.class] = map[string]bool{}
			}
			if nodesWith[k.class][k.version] == nil {
				nodesWith[k.class][k.version] = map[string]bool{}
			}
			nodesWith[k.class][k.version][a.Name] = true
			reporting[k.class][a.Name] = true
		}
	}
	type maj struct {
		version string
		n, of   int
	}
	majority := map[string]maj{}
	for class, vs := range nodesWith {
		if len(reporting[class]) < th.MinPeers {
			continue
		}
		versions := make([]string, 0, len(vs))
		for v := range vs {
			versions = append(versions, v)
		}
		sort.Strings(versions)
		best, bestN := "", 0
		for _, v := range versions {
			if len(vs[v]) > bestN {
				best, bestN = v, len(vs[v])
			}
		}
		if 2*bestN > len(reporting[class]) {
			majority[class] = maj{best, bestN, len(reporting[class])}
		}
	}
	for _, a := range group {
		reported := map[string]bool{}
		for _, k := range get(a.facts) {
			m, ok := majority[k.class]
			if !ok || k.version == m.version || reported[k.class+"\x00"+k.version] {
				continue
			}
			reported[k.class+"\x00"+k.version] = true
			cls := ""
			if k.class != "" {
				cls = " (" + k.class + ")"
			}
			add(a.Name, finding(th, check, ginv1.Verdict_VERDICT_WARN, k.part,
				fmt.Sprintf("%s of %s%s is %s; %d of %d %s nodes run %s", what, k.part, cls, k.version, m.n, m.of, model, m.version),
				impact, fix))
		}
	}
}

// leafRule names compute ports that run slower than the usual rate of the
// active compute ports on the same leaf switch (a strict majority's rate).
func leafRule(as []Assessment, th Thresholds, add func(string, *ginv1.Finding)) {
	type owned struct {
		node string
		port
	}
	byLeaf := map[string][]owned{}
	for _, a := range as {
		for _, p := range a.facts.ports {
			byLeaf[p.leaf] = append(byLeaf[p.leaf], owned{a.Name, p})
		}
	}
	for leaf, ps := range byLeaf {
		if len(ps) < th.MinPeers {
			continue
		}
		count := map[uint32]int{}
		for _, p := range ps {
			count[p.rate]++
		}
		usual, usualN := uint32(0), 0
		for r, c := range count {
			if c > usualN || (c == usualN && r > usual) {
				usual, usualN = r, c
			}
		}
		if 2*usualN <= len(ps) {
			continue // no usual rate on a mixed leaf: nothing to single out
		}
		for _, p := range ps {
			if p.rate >= usual {
				continue
			}
			add(p.node, finding(th, CheckNICSlowerOnLeaf, ginv1.Verdict_VERDICT_WARN, p.subj,
				fmt.Sprintf("port %s runs at %d Gb/s; %d of %d compute ports on leaf %s run at %d Gb/s", p.subj, p.rate, usualN, len(ps), leaf, usual),
				fmt.Sprintf("every job using this NIC is limited to %.0f GB/s on it instead of %.0f: the slowest rail sets the ring's pace", float64(p.rate)/8, float64(usual)/8),
				"check the cable and transceiver and the switch port's configured speed (ibportstate, mlxlink); a port that auto-negotiated down usually has a bad cable"))
		}
	}
}
