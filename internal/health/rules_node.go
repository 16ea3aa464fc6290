package health

import (
	"fmt"
	"slices"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// rule is one node rule.
type rule func(n Node, th Thresholds) []*ginv1.Finding

var nodeRules = []rule{
	ruleNodeDown, ruleNVLinks, rulePorts, rulePCIe, ruleACS, ruleIOMMU,
	ruleGPUDirect, ruleGPUErrors, ruleFabric,
}

func nodeFindings(n Node, th Thresholds) []*ginv1.Finding {
	var out []*ginv1.Finding
	for _, r := range nodeRules {
		out = append(out, r(n, th)...)
	}
	return out
}

func finding(th Thresholds, check string, want ginv1.Verdict, subject, seen, impact, fix string) *ginv1.Finding {
	return &ginv1.Finding{Check: check, Severity: th.severity(check, want), Subject: subject, Seen: seen, Impact: impact, Fix: fix}
}

func gpuName(g *ginv1.Gpu) string { return fmt.Sprintf("GPU%d", g.GetIndex()) }

func ruleNodeDown(n Node, th Thresholds) []*ginv1.Finding {
	if n.State != ginv1.NodeState_NODE_STATE_DOWN {
		return nil
	}
	return []*ginv1.Finding{finding(th, CheckNodeDown, ginv1.Verdict_VERDICT_FAIL, "",
		"gin-agent has missed its heartbeats; the master marked the node DOWN",
		"GIN cannot see this node's links: a fault since the last report is invisible",
		"check gin-agent on the node (systemctl status gin-agent) and its network path to the masters")}
}

func ruleNVLinks(n Node, th Thresholds) []*ginv1.Finding {
	var out []*ginv1.Finding
	for _, g := range n.Inventory.GetGpus() {
		total, down := len(g.GetNvlinks()), 0
		for _, l := range g.GetNvlinks() {
			if l.GetState() == ginv1.LinkState_LINK_STATE_DOWN {
				down++
			}
		}
		for _, l := range g.GetNvlinks() {
			subj := fmt.Sprintf("%s/nvlink%d", gpuName(g), l.GetIndex())
			switch {
			case l.GetState() == ginv1.LinkState_LINK_STATE_DOWN:
				bw := float64(l.GetBandwidthMbPerS()) / 1000
				out = append(out, finding(th, CheckNVLinkDown, ginv1.Verdict_VERDICT_FAIL, subj,
					fmt.Sprintf("NVLink %d of %s is down (%d of %d links down)", l.GetIndex(), gpuName(g), down, total),
					fmt.Sprintf("%s lost %.0f GB/s of NVLink bandwidth per direction; NCCL rings and NVLS through it slow every GPU of the job to its pace, and a link dropping mid-job hangs collectives", gpuName(g), bw*float64(down)),
					"drain the node, reset the GPU or reboot (nvidia-smi -r), check the NVLink/NVSwitch XIDs in the kernel log; reseat or replace the baseboard if the link stays down"))
			case l.GetHealth() == ginv1.LinkHealth_LINK_HEALTH_FAILED || l.GetHealth() == ginv1.LinkHealth_LINK_HEALTH_DEGRADED:
				want := ginv1.Verdict_VERDICT_WARN
				if l.GetHealth() == ginv1.LinkHealth_LINK_HEALTH_FAILED {
					want = ginv1.Verdict_VERDICT_FAIL
				}
				out = append(out, finding(th, CheckNVLinkErrors, want, subj,
					fmt.Sprintf("NVLink %d of %s is up with an error rate above the agent's threshold (%s)", l.GetIndex(), gpuName(g), strings.ToLower(strings.TrimPrefix(l.GetHealth().String(), "LINK_HEALTH_"))),
					"replays and recoveries cost bandwidth and precede a link going down",
					"watch gin_nvlink_errors_total; reset the GPU at the next drain, replace the part if the rate stays"))
			}
		}
	}
	return out
}

func rulePorts(n Node, th Thresholds) []*ginv1.Finding {
	var out []*ginv1.Finding
	for _, h := range n.Inventory.GetHcas() {
		compute := h.GetRole() != ginv1.HcaRole_HCA_ROLE_STORAGE
		for _, p := range h.GetPorts() {
			subj := fmt.Sprintf("%s:%d", h.GetName(), p.GetPort())
			if p.GetState() != ginv1.PortState_PORT_STATE_ACTIVE {
				want := ginv1.Verdict_VERDICT_FAIL
				impact := "NCCL spreads the job's inter-node traffic over the remaining NICs (or falls back to sockets): the job's network bandwidth drops by this port's share"
				if !compute {
					want = ginv1.Verdict_VERDICT_WARN
					impact = "a storage or management port: jobs' checkpoint and data I/O lose this path"
				}
				out = append(out, finding(th, CheckPortDown, want, subj,
					fmt.Sprintf("port %s is %s (physical %s)", subj, portWord(p.GetState().String(), "PORT_STATE_"), portWord(p.GetPhysState().String(), "PORT_PHYS_STATE_")),
					impact,
					"check the cable and the switch port (ibstat, ibportstate); an INIT port waits for the subnet manager"))
				continue
			}
			if hl := p.GetHealth(); hl == ginv1.LinkHealth_LINK_HEALTH_DEGRADED || hl == ginv1.LinkHealth_LINK_HEALTH_FAILED {
				want := ginv1.Verdict_VERDICT_WARN
				if hl == ginv1.LinkHealth_LINK_HEALTH_FAILED {
					want = ginv1.Verdict_VERDICT_FAIL
				}
				out = append(out, finding(th, CheckPortErrors, want, subj,
					fmt.Sprintf("port %s is active with an error rate above the agent's threshold", subj),
					"symbol errors and link downed events mean retransmissions: collectives over this NIC slow down or time out",
					"check the cable and transceiver (mlxlink -d <dev> -m), replace what the counters point at"))
			}
		}
	}
	return out
}

func portWord(s, prefix string) string { return strings.ToLower(strings.TrimPrefix(s, prefix)) }

// rulePCIe compares each GPU's, NIC's and bridge's negotiated link with its
// capability. A narrower link is a fault (lanes do not come back by
// themselves); a slower NIC or bridge link is a warning; a slower GPU link
// alone is left out, since GPUs drop the link speed when idle to save power.
func rulePCIe(n Node, th Thresholds) []*ginv1.Finding {
	var out []*ginv1.Finding
	check := func(subject, what string, l *ginv1.PcieLink, gpu bool) {
		if l == nil || l.GetMaxWidth() == 0 && l.GetMaxGeneration() == 0 {
			return
		}
		cur := linkGBps(l.GetGeneration(), l.GetWidth())
		capable := linkGBps(max(l.GetMaxGeneration(), l.GetGeneration()), max(l.GetMaxWidth(), l.GetWidth()))
		seen := fmt.Sprintf("%s link is PCIe %s, capable of %s", what, linkText(l.GetGeneration(), l.GetWidth()), linkText(l.GetMaxGeneration(), l.GetMaxWidth()))
		fix := "reseat the card or riser, check the slot's BIOS settings (link speed, bifurcation); a link that retrains at the next reboot was marginal"
		switch {
		case l.GetMaxWidth() > 0 && l.GetWidth() > 0 && l.GetWidth() < l.GetMaxWidth():
			out = append(out, finding(th, CheckPCIeWidth, ginv1.Verdict_VERDICT_FAIL, subject, seen,
				fmt.Sprintf("traffic through it is limited to %.0f GB/s per direction instead of %.0f: ring bandwidth of every job using it is capped there", cur, capable), fix))
		case !gpu && l.GetMaxGeneration() > 0 && l.GetGeneration() > 0 && l.GetGeneration() < l.GetMaxGeneration():
			out = append(out, finding(th, CheckPCIeSpeed, ginv1.Verdict_VERDICT_WARN, subject, seen,
				fmt.Sprintf("traffic through it is limited to %.0f GB/s per direction instead of %.0f", cur, capable), fix))
		}
	}
	for _, g := range n.Inventory.GetGpus() {
		check(gpuName(g), gpuName(g)+"'s", g.GetPcieLink(), true)
	}
	for _, h := range n.Inventory.GetHcas() {
		check(h.GetName(), h.GetName()+"'s", h.GetPcieLink(), false)
	}
	for _, b := range n.Inventory.GetPcieBridges() {
		check(b.GetId(), "bridge "+b.GetId()+"'s", b.GetLink(), false)
	}
	return out
}

// nearestNIC is the compute HCA whose PCIe path from the GPU is shortest,
// with that path; nil when the node has none.
func nearestNIC(t pcieTree, g *ginv1.Gpu, hcas []*ginv1.Hca) (*ginv1.Hca, []*ginv1.PcieBridge, bool) {
	var best *ginv1.Hca
	var bestPath []*ginv1.PcieBridge
	bestSwitch := false
	for _, h := range hcas {
		if h.GetRole() == ginv1.HcaRole_HCA_ROLE_STORAGE || h.GetPcieParentId() == "" {
			continue
		}
		p, sw := t.between(g.GetPcieParentId(), h.GetPcieParentId())
		if p == nil && !sw {
			continue
		}
		if best == nil || (sw && !bestSwitch) || (sw == bestSwitch && len(p) < len(bestPath)) {
			best, bestPath, bestSwitch = h, p, sw
		}
	}
	return best, bestPath, bestSwitch
}

// ruleACS names the bridges between a GPU and its nearest NIC, under a
// common PCIe switch, whose ACS redirects peer-to-peer traffic to the root
// complex. (Where the path crosses the CPU anyway, ACS changes nothing.)
func ruleACS(n Node, th Thresholds) []*ginv1.Finding {
	t := treeOf(n.Inventory)
	reported := map[string]bool{}
	var out []*ginv1.Finding
	for _, g := range n.Inventory.GetGpus() {
		nic, path, underSwitch := nearestNIC(t, g, n.Inventory.GetHcas())
		if nic == nil || !underSwitch {
			continue
		}
		for _, b := range path {
			acs := b.GetAcs()
			if acs == nil || !acsRedirects(acs.GetControl()) || reported[b.GetId()] {
				continue
			}
			reported[b.GetId()] = true
			out = append(out, finding(th, CheckACS, ginv1.Verdict_VERDICT_WARN, b.GetId(),
				fmt.Sprintf("bridge %s between %s and its nearest NIC %s has ACSCtl: %s", b.GetId(), gpuName(g), nic.GetName(), acsText(acs.GetControl())),
				"GPUDirect RDMA and GPU peer-to-peer under this switch are redirected through the CPU's root complex: lower bandwidth, and NCCL can hang (NCCL troubleshooting: PCI Access Control Services)",
				"disable ACS on the switch ports (BIOS, or setpci -s "+b.GetId()+" ECAP_ACS+0x6.w=0000 at boot) unless the node runs VMs that need the isolation"))
		}
	}
	return out
}

func ruleIOMMU(n Node, th Thresholds) []*ginv1.Finding {
	io := n.Inventory.GetHost().GetIommu()
	if io.GetMode() != ginv1.IommuMode_IOMMU_MODE_TRANSLATED || len(n.Inventory.GetGpus()) == 0 {
		return nil
	}
	seen := "the IOMMU translates the DMA of the node's GPUs or NICs (group type DMA)"
	if io.GetCmdline() != "" {
		seen += "; kernel command line: " + io.GetCmdline()
	}
	return []*ginv1.Finding{finding(th, CheckIOMMU, ginv1.Verdict_VERDICT_WARN, "iommu", seen,
		"GPU peer-to-peer over PCIe and GPUDirect RDMA go through IOMMU translation: NCCL P2P can fail or hang and RDMA bandwidth drops",
		"boot with iommu=pt (and intel_iommu=on or amd_iommu=on if the IOMMU is needed at all)")}
}

func ruleGPUDirect(n Node, th Thresholds) []*ginv1.Finding {
	g := n.Inventory.GetHost().GetGpudirectRdma()
	if g == nil || g.GetPeermemLoaded() || g.GetDmabuf() || len(n.Inventory.GetGpus()) == 0 {
		return nil
	}
	compute := false
	for _, h := range n.Inventory.GetHcas() {
		if h.GetRole() != ginv1.HcaRole_HCA_ROLE_STORAGE {
			compute = true
		}
	}
	if !compute {
		return nil
	}
	return []*ginv1.Finding{finding(th, CheckGPUDirect, ginv1.Verdict_VERDICT_WARN, "gpudirect",
		"neither nvidia_peermem is loaded nor dma-buf available (kernel >= 5.12 with the open GPU kernel modules)",
		"NCCL cannot use GPUDirect RDMA: inter-node traffic is staged through host memory (no GDRDMA in NCCL's channel lines), costing bandwidth and CPU",
		"modprobe nvidia_peermem (and add it to /etc/modules-load.d), or use the open kernel modules on a kernel >= 5.12")}
}

func ruleGPUErrors(n Node, th Thresholds) []*ginv1.Finding {
	var out []*ginv1.Finding
	for _, g := range n.Inventory.GetGpus() {
		h := g.GetHealth()
		if h == nil {
			continue
		}
		name := gpuName(g)
		for _, x := range h.GetXids() {
			if slices.Contains(th.IgnoredXIDs, x.GetXid()) {
				continue
			}
			want := ginv1.Verdict_VERDICT_WARN
			if slices.Contains(th.FatalXIDs, x.GetXid()) {
				want = ginv1.Verdict_VERDICT_FAIL
			}
			seen := fmt.Sprintf("%s reported XID %d", name, x.GetXid())
			if t := x.GetFirstSeen(); t != nil {
				seen += " at " + t.AsTime().UTC().Format("2006-01-02T15:04:05Z")
			}
			out = append(out, finding(th, CheckXID, want, fmt.Sprintf("%s/xid%d", name, x.GetXid()), seen,
				"an XID is the driver reporting a GPU fault; jobs on this GPU can crash, hang or compute on corrupted memory",
				"look the XID up in NVIDIA's XID catalog; reset the GPU (nvidia-smi -r) or reboot, and after a reboot the list starts empty"))
		}
		if h.GetEccUncorrectedVolatile() > 0 {
			out = append(out, finding(th, CheckECC, ginv1.Verdict_VERDICT_FAIL, name,
				fmt.Sprintf("%s has %d uncorrected ECC errors since the driver loaded", name, h.GetEccUncorrectedVolatile()),
				"an uncorrected error kills the process using the memory and the page stays suspect until the GPU is reset",
				"reset the GPU to remap the row or retire the page; a GPU that keeps failing needs service"))
		}
		switch {
		case h.GetRowRemapFailed():
			out = append(out, finding(th, CheckRowRemap, ginv1.Verdict_VERDICT_FAIL, name,
				fmt.Sprintf("%s: a row remapping failed (%d rows remapped for uncorrectable errors)", name, h.GetRemappedRowsUncorrectable()),
				"the GPU has no spare rows left where it needed one: memory errors will recur",
				"take the GPU out of service and open an RMA"))
		case h.GetRowRemapPending():
			out = append(out, finding(th, CheckRowRemap, ginv1.Verdict_VERDICT_WARN, name,
				fmt.Sprintf("%s: a row remapping waits for a GPU reset", name),
				"until the reset, the bad row is still in use",
				"drain the node and reset the GPU (nvidia-smi -r) or reboot"))
		}
		if r := h.GetClockEventReasons(); r != 0 {
			out = append(out, finding(th, CheckThrottle, ginv1.Verdict_VERDICT_WARN, name,
				fmt.Sprintf("%s clocks held down: %s", name, throttleText(r)),
				"a throttled GPU runs its kernels slower and every collective of the job waits for it",
				"check cooling (fans, inlet temperature, nvidia-smi -q -d TEMPERATURE) and the power supply; HW slowdown or power brake with normal temperatures points at the PSU or the board"))
		}
	}
	return out
}

// Clock event reasons (nvml.h nvmlClocksEventReason*).
func throttleText(r uint64) string {
	var parts []string
	for _, b := range []struct {
		bit  uint64
		name string
	}{{0x8, "HW slowdown"}, {0x20, "SW thermal slowdown"}, {0x40, "HW thermal slowdown"}, {0x80, "HW power brake"}} {
		if r&b.bit != 0 {
			parts = append(parts, b.name)
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf("reasons 0x%x", r)
	}
	return strings.Join(parts, ", ")
}

// Fabric health mask fields (nvml.h NVML_GPU_FABRIC_HEALTH_MASK_*): each a
// small field whose value 0 is "not supported".
type maskField struct {
	shift, width uint32
	name         string
	bad          func(v uint32) (ginv1.Verdict, bool)
}

var fabricMask = []maskField{
	{0, 3, "degraded bandwidth", func(v uint32) (ginv1.Verdict, bool) { return ginv1.Verdict_VERDICT_WARN, v == 1 }},
	{2, 3, "route recovery in progress", func(v uint32) (ginv1.Verdict, bool) { return ginv1.Verdict_VERDICT_WARN, v == 1 }},
	{4, 3, "route unhealthy", func(v uint32) (ginv1.Verdict, bool) { return ginv1.Verdict_VERDICT_FAIL, v == 1 }},
	{6, 3, "access timeout recovery", func(v uint32) (ginv1.Verdict, bool) { return ginv1.Verdict_VERDICT_WARN, v == 1 }},
	{8, 15, "incorrect configuration", func(v uint32) (ginv1.Verdict, bool) { return ginv1.Verdict_VERDICT_FAIL, v > 1 }},
	{12, 3, "no partition assigned", func(v uint32) (ginv1.Verdict, bool) { return ginv1.Verdict_VERDICT_FAIL, v == 2 }},
	{14, 3, "fabric manager disconnected", func(v uint32) (ginv1.Verdict, bool) { return ginv1.Verdict_VERDICT_FAIL, v == 2 }},
}

func ruleFabric(n Node, th Thresholds) []*ginv1.Finding {
	var out []*ginv1.Finding
	for _, g := range n.Inventory.GetGpus() {
		f := g.GetFabric()
		if f == nil {
			continue
		}
		name := gpuName(g)
		if s := f.GetState(); s != ginv1.FabricState_FABRIC_STATE_COMPLETED && s != ginv1.FabricState_FABRIC_STATE_NOT_SUPPORTED && s != ginv1.FabricState_FABRIC_STATE_UNSPECIFIED {
			out = append(out, finding(th, CheckFabric, ginv1.Verdict_VERDICT_FAIL, name,
				fmt.Sprintf("%s's MNNVL fabric registration is %s", name, portWord(s.String(), "FABRIC_STATE_")),
				"the GPU is not part of its NVLink domain: multi-node NVLink jobs cannot use it (NCCL falls back to the network or fails with Insufficient Resources)",
				"check nvidia-imex and the fabric manager on the NVLink switches; restart nvidia-imex on the node"))
			continue
		}
		worst, problems := ginv1.Verdict_VERDICT_PASS, []string{}
		for _, m := range fabricMask {
			v := (f.GetHealthMask() >> m.shift) & m.width
			if sev, bad := m.bad(v); bad {
				problems = append(problems, m.name)
				worst = max(worst, sev)
			}
		}
		if len(problems) > 0 {
			out = append(out, finding(th, CheckFabric, worst, name,
				fmt.Sprintf("%s's MNNVL fabric health mask 0x%x: %s", name, f.GetHealthMask(), strings.Join(problems, ", ")),
				"multi-node NVLink traffic of this GPU is slowed or cut",
				"check the NVLink switch trays and nvidia-imex (nvidia-smi -q | grep -A8 Fabric)"))
		}
	}
	return out
}
