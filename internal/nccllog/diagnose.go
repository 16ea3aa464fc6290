package nccllog

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/health"
)

// Severities of a finding.
const (
	SeverityFail = "fail" // the job runs far below what the hardware gives, or breaks
	SeverityWarn = "warn" // slower than it could be, or GIN cannot confirm the cause
	SeverityInfo = "info"
)

// Check names: the failure modes Diagnose recognises.
const (
	CheckVersionMismatch = "nccl-version-mismatch"
	CheckIBDisabled      = "ib-disabled-by-env"
	CheckIBNoDevice      = "ib-no-device"
	CheckIBHCAFilter     = "ib-hca-filter"
	CheckSocketFallback  = "socket-fallback"
	CheckMixedTransports = "mixed-transports"
	CheckP2PViaSHM       = "p2p-via-shm"
	CheckP2PRestricted   = "p2p-restricted-by-env"
	CheckNVLSDisabled    = "nvls-disabled-by-env"
	CheckGIDIndex        = "roce-gid-index"
	CheckFartherNIC      = "farther-nic"
)

// Finding is one diagnosed problem.
type Finding struct {
	Check    string `json:"check"`
	Severity string `json:"severity"`
	// Host is the node it is about ("" for the whole job).
	Host string `json:"host"`
	// Title names the failure mode as users report it.
	Title string `json:"title"`
	// Detail is what the log says joined with what GIN sees.
	Detail string `json:"detail"`
	// Lines are the log lines it rests on (at most MaxEvidence).
	Lines []Line `json:"lines"`
	Fix   string `json:"fix"`
}

// Report is a diagnosis.
type Report struct {
	Lines     int      `json:"lines"`
	NCCLLines int      `json:"nccl_lines"`
	Processes int      `json:"processes"`
	Hosts     []string `json:"hosts"`
	// Versions and Networks are the distinct values the processes logged.
	Versions []string `json:"versions"`
	Networks []string `json:"networks"`
	// Unmatched are hosts of the log GIN has no node for.
	Unmatched []string  `json:"unmatched"`
	Findings  []Finding `json:"findings"`
}

// Topology is GIN's view of the job's nodes: a log host is matched to a
// node by its name, its hostname, or their first DNS label.
type Topology map[string]*ginv1.NodeInventory

func (t Topology) node(host string) *ginv1.NodeInventory {
	if inv, ok := t[host]; ok {
		return inv
	}
	short := func(s string) string { s, _, _ = strings.Cut(s, "."); return s }
	for name, inv := range t {
		if short(name) == short(host) || inv.GetHost().GetHostname() == host || short(inv.GetHost().GetHostname()) == short(host) {
			return inv
		}
	}
	return nil
}

// activeIB lists the node's active compute ports on InfiniBand or RoCE.
func activeIB(inv *ginv1.NodeInventory) (names []string) {
	for _, h := range inv.GetHcas() {
		if h.GetRole() == ginv1.HcaRole_HCA_ROLE_STORAGE {
			continue
		}
		for _, p := range h.GetPorts() {
			if p.GetState() == ginv1.PortState_PORT_STATE_ACTIVE {
				names = append(names, fmt.Sprintf("%s:%d", h.GetName(), p.GetPort()))
			}
		}
	}
	return names
}

// Diagnose names the failure modes in log, using topo (nil or partial:
// findings that need GIN's view are then warnings saying so).
func Diagnose(log *Log, topo Topology) *Report {
	r := &Report{Lines: log.Lines, NCCLLines: log.NCCLLines, Processes: len(log.Procs)}
	hosts, versions, networks := map[string]bool{}, map[string][]*Proc{}, map[string][]*Proc{}
	for _, p := range log.Procs {
		hosts[p.Host] = true
		if p.Version != "" {
			versions[p.Version] = append(versions[p.Version], p)
		}
		if n := network(p); n != "" {
			networks[n] = append(networks[n], p)
		}
	}
	r.Hosts, r.Versions, r.Networks = keysOf(hosts), keysOf(versions), keysOf(networks)
	for _, h := range r.Hosts {
		if topo.node(h) == nil {
			r.Unmatched = append(r.Unmatched, h)
		}
	}
	add := func(f Finding) {
		if len(f.Lines) > MaxEvidence {
			f.Lines = f.Lines[:MaxEvidence]
		}
		r.Findings = append(r.Findings, f)
	}

	bare := map[string]Line{}
	for _, u := range log.Unattributed {
		if _, ok := versions[u.Version]; !ok {
			if _, ok := bare[u.Version]; !ok {
				bare[u.Version] = u.Line
			}
		}
	}
	if len(bare) > 0 {
		r.Versions = append(r.Versions, keysOf(bare)...)
		sort.Strings(r.Versions)
	}
	if len(versions)+len(bare) > 1 {
		var lines []Line
		var parts []string
		for _, v := range r.Versions {
			lines = append(lines, versions[v][0].VersionLine)
			parts = append(parts, fmt.Sprintf("%s on %d process(es) (%s)", v, len(versions[v]), procHosts(versions[v])))
		}
		for _, v := range keysOf(bare) {
			lines = append(lines, bare[v])
			parts = append(parts, v+" (printed without a host prefix)")
		}
		add(Finding{Check: CheckVersionMismatch, Severity: SeverityFail, Title: "ranks run different NCCL versions",
			Detail: "the job's processes loaded different NCCL libraries: " + strings.Join(parts, "; "),
			Lines:  lines,
			Fix:    "run every rank with the same NCCL (one container image or module; check LD_LIBRARY_PATH and the framework's bundled libnccl); mixed versions can hang or fail at init"})
	}
	if _, sock := networks["Socket"]; sock && len(networks) > 1 {
		var lines []Line
		var parts []string
		for _, n := range r.Networks {
			lines = append(lines, netEvidence(networks[n][0]))
			parts = append(parts, fmt.Sprintf("%s on %s", n, procHosts(networks[n])))
		}
		add(Finding{Check: CheckMixedTransports, Severity: SeverityFail, Title: "some ranks use NET/Socket, others NET/IB",
			Detail: "processes of one job chose different networks (" + strings.Join(parts, "; ") + "): the socket ranks set the pace of every collective",
			Lines:  nonEmpty(lines),
			Fix:    "make the socket ranks' nodes see their HCAs (see the per-node findings); the same environment and image on every node"})
	}
	for _, h := range r.Hosts {
		diagnoseHost(log, topo, h, add)
	}
	diagnoseChannels(log, topo, add)
	sort.SliceStable(r.Findings, func(i, j int) bool { return rank(r.Findings[i].Severity) > rank(r.Findings[j].Severity) })
	return r
}

func rank(sev string) int {
	switch sev {
	case SeverityFail:
		return 2
	case SeverityWarn:
		return 1
	}
	return 0
}

// network is a process's network: "Using network X", else what its
// channels went through.
func network(p *Proc) string {
	if p.Network != "" {
		return p.Network
	}
	for _, c := range p.Channels {
		if t, ok := strings.CutPrefix(c.Transport, "NET/"); ok {
			n, _, _ := strings.Cut(t, "/")
			return n
		}
	}
	return ""
}

// diagnoseHost applies the per-node rules to the processes on host.
func diagnoseHost(log *Log, topo Topology, host string, add func(Finding)) {
	var ps []*Proc
	for _, p := range log.Procs {
		if p.Host == host {
			ps = append(ps, p)
		}
	}
	inv := topo.node(host)
	active := activeIB(inv)
	seen := fmt.Sprintf("GIN sees %d active compute port(s) on %s: %s", len(active), host, strings.Join(active, ", "))
	if inv == nil {
		seen = "GIN has no node " + host + " to compare with"
	}
	// The first process that shows a symptom stands for the host.
	first := func(pred func(*Proc) bool) *Proc {
		for _, p := range ps {
			if pred(p) {
				return p
			}
		}
		return nil
	}
	sev := func(confirmed bool) string {
		if confirmed {
			return SeverityFail
		}
		return SeverityWarn
	}
	socket := first(func(p *Proc) bool { return network(p) == "Socket" })
	explained := false
	if p := first(func(p *Proc) bool { return p.Env["NCCL_IB_DISABLE"].Value == "1" }); p != nil {
		explained = socket != nil
		lines := []Line{p.Env["NCCL_IB_DISABLE"].Line}
		if socket != nil {
			lines = append(lines, netEvidence(socket))
		}
		add(Finding{Check: CheckIBDisabled, Severity: sev(len(active) > 0), Host: host,
			Title:  "NCCL_IB_DISABLE=1 forces sockets while InfiniBand is up",
			Detail: "NCCL took NCCL_IB_DISABLE=1 from the environment and uses sockets; " + seen,
			Lines:  nonEmpty(lines),
			Fix:    "unset NCCL_IB_DISABLE (it is often left in a job script or container from a debugging session); sockets run at a fraction of IB bandwidth"})
	}
	if p := first(func(p *Proc) bool { return p.IBNoDevice.N > 0 }); p != nil && !explained {
		explained = true
		detail := "NCCL's IB transport found no device; " + seen
		fix := "the fabric is fine when GIN sees the ports active: the process cannot reach them. In a container mount /dev/infiniband (or use an RDMA device plugin / --device), install rdma-core/libibverbs with the provider (libmlx5) in the image, and do not drop IPC_LOCK; outside one, check that libibverbs.so.1 is found"
		if inv != nil && len(active) == 0 {
			detail = "NCCL's IB transport found no device, and GIN sees no active compute port on " + host + " either"
			fix = "bring the node's IB ports up (ginctl check --nodes " + host + " says which are down)"
		}
		add(Finding{Check: CheckIBNoDevice, Severity: sev(len(active) > 0), Host: host,
			Title: `"NET/IB : No device found" on a node whose ports are active`, Detail: detail,
			Lines: nonEmpty([]Line{p.IBNoDevice, netLine(socket)}), Fix: fix})
	}
	if p := first(func(p *Proc) bool { _, ok := p.Env["NCCL_IB_HCA"]; return ok }); p != nil && inv != nil {
		e := p.Env["NCCL_IB_HCA"]
		var missing []string
		for _, want := range hcaFilter(e.Value) {
			if !hasHCA(inv, want) {
				missing = append(missing, want)
			}
		}
		if len(missing) > 0 {
			explained = explained || socket != nil
			add(Finding{Check: CheckIBHCAFilter, Severity: SeverityFail, Host: host,
				Title:  "NCCL_IB_HCA names HCAs the node does not have",
				Detail: fmt.Sprintf("NCCL_IB_HCA=%s, but %s has no %s; its compute HCAs: %s", e.Value, host, strings.Join(missing, ", "), strings.Join(active, ", ")),
				Lines:  nonEmpty([]Line{e.Line, netLine(socket)}),
				Fix:    "set NCCL_IB_HCA to the node's compute HCAs (or leave it unset: NCCL picks them itself)"})
		}
	}
	if socket != nil && !explained {
		detail := "NCCL uses sockets"
		if e, ok := socket.Env["NCCL_SOCKET_IFNAME"]; ok {
			detail += " over NCCL_SOCKET_IFNAME=" + e.Value
		}
		add(Finding{Check: CheckSocketFallback, Severity: sev(len(active) > 0), Host: host,
			Title:  "NCCL fell back to NET/Socket while InfiniBand is up",
			Detail: detail + "; " + seen,
			Lines:  nonEmpty([]Line{netEvidence(socket), socket.Env["NCCL_SOCKET_IFNAME"].Line}),
			Fix:    "check the NET/IB lines above it (NCCL_DEBUG_SUBSYS=INIT,NET): a plugin that failed to load, missing libibverbs, or NCCL_NET set to Socket"})
	}
	if inv == nil {
		return
	}
	if p := first(func(p *Proc) bool {
		v, ok := p.Env["NCCL_P2P_DISABLE"]
		l, okL := p.Env["NCCL_P2P_LEVEL"]
		return (ok && v.Value == "1") || (okL && (l.Value == "LOC" || l.Value == "0"))
	}); p != nil && hasNVLink(inv) {
		e, ok := p.Env["NCCL_P2P_DISABLE"]
		if !ok || e.Value != "1" {
			e = p.Env["NCCL_P2P_LEVEL"]
		}
		add(Finding{Check: CheckP2PRestricted, Severity: SeverityWarn, Host: host,
			Title:  "P2P disabled by the environment on a node with NVLink",
			Detail: fmt.Sprintf("%s; GIN sees %d NVLinks up on %s", strings.TrimSpace(lineMsg(e.Line.Text)), nvlinksUp(inv), host),
			Lines:  []Line{e.Line},
			Fix:    "unset NCCL_P2P_DISABLE / NCCL_P2P_LEVEL: NVLink is only used through P2P; if P2P hangs without it, fix ACS/IOMMU (ginctl check) instead"})
	}
	if p := first(func(p *Proc) bool { return p.Env["NCCL_NVLS_ENABLE"].Value == "0" }); p != nil && len(inv.GetNvswitches()) > 0 {
		add(Finding{Check: CheckNVLSDisabled, Severity: SeverityWarn, Host: host,
			Title:  "NVLS disabled by the environment on an NVSwitch node",
			Detail: fmt.Sprintf("NCCL_NVLS_ENABLE=0 while %s has %d NVSwitches: all-reduce loses NVLink SHARP", host, len(inv.GetNvswitches())),
			Lines:  []Line{p.Env["NCCL_NVLS_ENABLE"].Line},
			Fix:    "unset NCCL_NVLS_ENABLE unless NVLS was disabled on purpose (it costs memory per communicator)"})
	}
	if p := first(func(p *Proc) bool { _, ok := p.Env["NCCL_IB_GID_INDEX"]; return ok }); p != nil {
		gidIndex(p, inv, host, add)
	}
}

// gidIndex checks NCCL_IB_GID_INDEX against the node's RoCE ports: the GID
// at that index should be the IPv4-mapped one (RoCE v2 routable, what
// NCCL picks itself since 2.21) or a global IPv6 one, not link-local.
func gidIndex(p *Proc, inv *ginv1.NodeInventory, host string, add func(Finding)) {
	e := p.Env["NCCL_IB_GID_INDEX"]
	idx, err := strconv.Atoi(e.Value)
	if err != nil || idx < 0 {
		return
	}
	for _, h := range inv.GetHcas() {
		if h.GetRole() == ginv1.HcaRole_HCA_ROLE_STORAGE {
			continue
		}
		for _, pt := range h.GetPorts() {
			if pt.GetLinkLayer() != ginv1.LinkLayer_LINK_LAYER_ETHERNET {
				continue
			}
			gids := pt.GetGids()
			v4 := -1
			for i, g := range gids {
				if strings.HasPrefix(g, "0000:0000:0000:0000:0000:ffff:") {
					v4 = i
					break
				}
			}
			subj := fmt.Sprintf("%s:%d", h.GetName(), pt.GetPort())
			switch {
			case idx >= len(gids):
				add(Finding{Check: CheckGIDIndex, Severity: SeverityFail, Host: host,
					Title:  "NCCL_IB_GID_INDEX points past the port's GID table (RoCE)",
					Detail: fmt.Sprintf("NCCL_IB_GID_INDEX=%d, but %s has %d GIDs", idx, subj, len(gids)),
					Lines:  []Line{e.Line}, Fix: gidFix(v4)})
				return
			case strings.HasPrefix(gids[idx], "fe80:") && v4 >= 0:
				add(Finding{Check: CheckGIDIndex, Severity: SeverityWarn, Host: host,
					Title:  "NCCL_IB_GID_INDEX selects a link-local IPv6 GID on RoCE",
					Detail: fmt.Sprintf("NCCL_IB_GID_INDEX=%d is %s on %s (link-local: not routable across subnets); its IPv4-mapped GID is index %d", idx, gids[idx], subj, v4),
					Lines:  []Line{e.Line}, Fix: gidFix(v4)})
				return
			}
		}
	}
}

func gidFix(v4 int) string {
	if v4 < 0 {
		return "leave NCCL_IB_GID_INDEX unset (NCCL >= 2.21 picks the RoCE v2 GID itself) or set it to a RoCE v2 GID (show_gids)"
	}
	return fmt.Sprintf("set NCCL_IB_GID_INDEX=%d (the IPv4-mapped RoCE v2 GID) or leave it unset on NCCL >= 2.21", v4)
}

// diagnoseChannels joins channel lines with GIN's GPUs: SHM between two
// GPUs of one node that NVLink connects, and NET through a NIC other than
// the GPU's nearest.
func diagnoseChannels(log *Log, topo Topology, add func(Finding)) {
	type where struct {
		host string
		gpu  *ginv1.Gpu
		inv  *ginv1.NodeInventory
	}
	ranks := map[int]where{}
	for _, p := range log.Procs {
		inv := topo.node(p.Host)
		for _, r := range p.Ranks {
			w := where{host: p.Host, inv: inv}
			for _, g := range inv.GetGpus() {
				if r.BusID != "" && g.GetPciBusId() == r.BusID {
					w.gpu = g
				}
			}
			ranks[r.Rank] = w
		}
	}
	shmDone, nicDone := map[string]bool{}, map[string]bool{}
	for _, p := range log.Procs {
		for _, c := range p.Channels {
			a, b := ranks[c.From], ranks[c.To]
			switch {
			case strings.HasPrefix(c.Transport, "SHM") && a.inv != nil && a.host == b.host && a.gpu != nil && b.gpu != nil:
				if !nvlinked(a.inv, a.gpu, b.gpu) || shmDone[p.Host] {
					continue
				}
				shmDone[p.Host] = true
				cause := "NCCL could not use P2P between them: usually ACS or the IOMMU (ginctl check names them), or P2P disabled in the environment"
				lines := []Line{c.Line}
				if e, ok := p.Env["NCCL_P2P_DISABLE"]; ok {
					cause = "NCCL_P2P_DISABLE is set"
					lines = append(lines, e.Line)
				} else if e, ok := p.Env["NCCL_P2P_LEVEL"]; ok {
					cause = "NCCL_P2P_LEVEL=" + e.Value + " is set"
					lines = append(lines, e.Line)
				}
				add(Finding{Check: CheckP2PViaSHM, Severity: SeverityFail, Host: p.Host,
					Title:  "P2P through host shared memory where NVLink exists",
					Detail: fmt.Sprintf("rank %d (GPU%d) -> rank %d (GPU%d) go via %s although NVLink connects the two GPUs: %s", c.From, a.gpu.GetIndex(), c.To, b.gpu.GetIndex(), c.Transport, cause),
					Lines:  lines,
					Fix:    "unset NCCL_P2P_DISABLE/NCCL_P2P_LEVEL; if P2P then fails, disable ACS and boot with iommu=pt"})
			case strings.HasPrefix(c.Transport, "NET/IB") && a.gpu != nil && a.inv != nil && len(p.IBDevices) > 0:
				// The sending side's GPU: the rank whose process logged it.
				w := a
				if c.Dev >= 0 {
					for _, r := range p.Ranks {
						if r.CUDADev == c.Dev && ranks[r.Rank].gpu != nil {
							w = ranks[r.Rank]
						}
					}
				}
				parts := strings.Split(c.Transport, "/")
				if len(parts) < 3 || w.gpu == nil {
					continue
				}
				idx, err := strconv.Atoi(parts[2])
				if err != nil || idx < 0 || idx >= len(p.IBDevices) {
					continue
				}
				used := p.IBDevices[idx]
				near := health.NearestNIC(w.inv, w.gpu)
				key := p.Host + "/" + w.gpu.GetUuid()
				if near == nil || nicDone[key] || strings.Contains(used, near.GetName()+":") {
					continue
				}
				nicDone[key] = true
				add(Finding{Check: CheckFartherNIC, Severity: SeverityWarn, Host: p.Host,
					Title:  "a channel uses a NIC farther from the GPU than its nearest",
					Detail: fmt.Sprintf("GPU%d's channel goes through %s (NET/IB/%d); GIN's PCIe tree puts %s nearest to it: the traffic crosses the CPU (or the other socket) instead of staying under the PCIe switch", w.gpu.GetIndex(), used, idx, near.GetName()),
					Lines:  []Line{c.Line, p.IBLine},
					Fix:    "check NCCL_IB_HCA and NCCL_CROSS_NIC; a NIC left out by NCCL_IB_HCA or down forces the farther one (ginctl check)"})
			}
		}
	}
}

// nvlinked reports whether NVLink connects GPUs a and b of one node: a
// direct link up between them, or both up to NVSwitches.
func nvlinked(inv *ginv1.NodeInventory, a, b *ginv1.Gpu) bool {
	toSwitch := func(g *ginv1.Gpu) bool {
		for _, l := range g.GetNvlinks() {
			if l.GetState() == ginv1.LinkState_LINK_STATE_UP && l.GetRemoteType() == ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_SWITCH {
				return true
			}
		}
		return false
	}
	for _, l := range a.GetNvlinks() {
		if l.GetState() == ginv1.LinkState_LINK_STATE_UP && l.GetRemotePciBusId() == b.GetPciBusId() {
			return true
		}
	}
	return toSwitch(a) && toSwitch(b)
}

func hasNVLink(inv *ginv1.NodeInventory) bool { return nvlinksUp(inv) > 0 }

func nvlinksUp(inv *ginv1.NodeInventory) int {
	n := 0
	for _, g := range inv.GetGpus() {
		for _, l := range g.GetNvlinks() {
			if l.GetState() == ginv1.LinkState_LINK_STATE_UP {
				n++
			}
		}
	}
	return n
}

// hcaFilter reads NCCL_IB_HCA's device names ("mlx5_0:1,mlx5_1", "^mlx5_4",
// "=mlx5_0"); an exclusion list ("^...") names nothing that must exist.
func hcaFilter(v string) []string {
	if strings.HasPrefix(v, "^") {
		return nil
	}
	v = strings.TrimPrefix(v, "=")
	var out []string
	for _, f := range strings.Split(v, ",") {
		name, _, _ := strings.Cut(strings.TrimSpace(f), ":")
		if name != "" {
			out = append(out, name)
		}
	}
	return out
}

// hasHCA reports whether the node has an HCA of that name (NCCL_IB_HCA
// matches by prefix unless "=" is given; a prefix of any HCA counts).
func hasHCA(inv *ginv1.NodeInventory, name string) bool {
	for _, h := range inv.GetHcas() {
		if strings.HasPrefix(h.GetName(), name) {
			return true
		}
	}
	return false
}

// lineMsg is the message part of an NCCL line.
func lineMsg(text string) string {
	if i := strings.Index(text, "NCCL INFO "); i >= 0 {
		return text[i+len("NCCL INFO "):]
	}
	return text
}

func netLine(p *Proc) Line {
	if p == nil {
		return Line{}
	}
	return netEvidence(p)
}

// netEvidence is the line that shows a process's network: "Using network",
// else its first channel through NET.
func netEvidence(p *Proc) Line {
	if p.NetworkLine.N > 0 {
		return p.NetworkLine
	}
	for _, c := range p.Channels {
		if strings.HasPrefix(c.Transport, "NET/") {
			return c.Line
		}
	}
	return Line{}
}

func nonEmpty(ls []Line) []Line {
	out := ls[:0:0]
	for _, l := range ls {
		if l.N > 0 {
			out = append(out, l)
		}
	}
	return out
}

func procHosts(ps []*Proc) string {
	hs := map[string]bool{}
	for _, p := range ps {
		hs[p.Host] = true
	}
	k := keysOf(hs)
	if len(k) > 4 {
		return strings.Join(k[:4], ", ") + fmt.Sprintf(" and %d more", len(k)-4)
	}
	return strings.Join(k, ", ")
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
