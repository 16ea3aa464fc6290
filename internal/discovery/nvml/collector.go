//go:build cgo

package nvml

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery"
)

// Collector reads GPUs, NVLinks and NVSwitches through NVML. It is safe for
// concurrent use (NVML itself is thread-safe).
type Collector struct {
	lib nvml.Interface
	// real is true when lib is go-nvml's own library (New): only then may
	// the versioned handler APIs (GetGpuFabricInfoV, GetTemperatureV) be
	// called, since they hold a real device handle and cannot be mocked.
	real bool

	mu   sync.Mutex
	syms map[string]bool // LookupSymbol results, by symbol name
	xid  xidState        // guarded by mu
	now  func() time.Time

	closeOnce sync.Once
	closeErr  error
}

// New loads libnvidia-ml.so.1 and initialises NVML. It returns ErrNoDriver
// when the library is not found. Close the collector to shut NVML down.
func New() (*Collector, error) {
	lib := nvml.New()
	if err := initLib(lib); err != nil {
		return nil, err
	}
	c := NewWithInterface(lib)
	c.real = true
	return c, nil
}

// NewWithInterface returns a collector over lib, which the caller has
// already initialised (lib.Init() returned SUCCESS); Close calls
// lib.Shutdown(). Tests pass a go-nvml mock.
func NewWithInterface(lib nvml.Interface) *Collector {
	return &Collector{lib: lib, syms: map[string]bool{}, now: time.Now}
}

// initLib initialises lib, mapping a missing libnvidia-ml.so.1 to ErrNoDriver.
func initLib(lib nvml.Interface) error {
	switch ret := lib.Init(); ret {
	case nvml.SUCCESS:
		return nil
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return ErrNoDriver
	default:
		return fmt.Errorf("nvml: init: %w", ret)
	}
}

// Close shuts NVML down. Calls after the first return the first result.
func (c *Collector) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		if c.xid.set != nil {
			c.xid.set.Free()
		}
		c.mu.Unlock()
		if ret := c.lib.Shutdown(); ret != nvml.SUCCESS {
			c.closeErr = fmt.Errorf("nvml: shutdown: %w", ret)
		}
	})
	return c.closeErr
}

// has reports whether the driver's libnvidia-ml exports sym. Calling a
// binding whose symbol is missing aborts the process, so every function
// newer than the oldest supported driver is checked here first.
func (c *Collector) has(sym string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok, seen := c.syms[sym]; seen {
		return ok
	}
	ext := c.lib.Extensions()
	ok := ext != nil && ext.LookupSymbol(sym) == nil
	c.syms[sym] = ok
	return ok
}

// unsupported reports whether ret means "this driver or GPU does not
// report that": not an error.
func unsupported(ret nvml.Return) bool {
	return ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_FUNCTION_NOT_FOUND
}

// errList collects ItemErrors.
type errList []discovery.ItemError

func (e *errList) add(item string, err error) {
	*e = append(*e, discovery.ItemError{Source: source, Item: item, Err: err})
}

func gpuItem(i int) string                 { return fmt.Sprintf("GPU %d", i) }
func linkItem(i, l int) string             { return fmt.Sprintf("GPU %d NVLink %d", i, l) }
func what(s string, ret nvml.Return) error { return fmt.Errorf("%s: %w", s, ret) }

// devices returns the handles of all GPUs, nil where a handle failed.
func (c *Collector) devices(errs *errList) []nvml.Device {
	n, ret := c.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		errs.add("device count", ret)
		return nil
	}
	devs := make([]nvml.Device, n)
	for i := range devs {
		d, ret := c.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			errs.add(gpuItem(i), what("handle", ret))
			continue
		}
		devs[i] = d
	}
	return devs
}

// Inventory reads every GPU with its NVLinks, and the NVSwitches the links
// reach. A failure on one GPU or link is reported and the rest still comes out.
func (c *Collector) Inventory(ctx context.Context) (Result, []discovery.ItemError) {
	var res Result
	var errs errList
	if v, ret := c.lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		res.DriverVersion = v
	} else if !unsupported(ret) {
		errs.add("driver version", ret)
	}
	if v, ret := c.lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
		res.CUDADriverVersion = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	} else if !unsupported(ret) {
		errs.add("CUDA driver version", ret)
	}
	switchLinks := map[string]uint32{}
	devs := c.devices(&errs)
	byDev := map[nvml.Device]*ginv1.Gpu{}
	for i, dev := range devs {
		if err := ctx.Err(); err != nil {
			errs.add("inventory", err)
			break
		}
		if dev == nil {
			continue
		}
		g := c.gpu(i, dev, &errs)
		if g == nil {
			continue
		}
		res.GPUs = append(res.GPUs, g)
		byDev[dev] = g
		for _, l := range g.Nvlinks {
			if l.RemoteType == ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_SWITCH && l.RemotePciBusId != "" {
				switchLinks[l.RemotePciBusId]++
			}
		}
	}
	c.drainXIDs(devs, byDev, &errs)
	for id, n := range switchLinks {
		res.NVSwitches = append(res.NVSwitches, &ginv1.NvSwitch{Id: id, PciBusId: id, LinkCount: n})
	}
	sort.Slice(res.NVSwitches, func(a, b int) bool { return res.NVSwitches[a].PciBusId < res.NVSwitches[b].PciBusId })
	return res, errs
}

// gpu reads GPU i; nil when not even its UUID can be read.
func (c *Collector) gpu(i int, dev nvml.Device, errs *errList) *ginv1.Gpu {
	item := gpuItem(i)
	uuid, ret := dev.GetUUID()
	if ret != nvml.SUCCESS {
		errs.add(item, what("UUID", ret))
		return nil
	}
	g := &ginv1.Gpu{Uuid: uuid, Index: uint32(i), NumaNode: -1}
	if v, ret := dev.GetName(); ret == nvml.SUCCESS {
		g.Model = v
	} else if !unsupported(ret) {
		errs.add(item, what("name", ret))
	}
	// GeForce boards have no serial: NOT_SUPPORTED, left empty.
	if v, ret := dev.GetSerial(); ret == nvml.SUCCESS {
		g.Serial = v
	} else if !unsupported(ret) {
		errs.add(item, what("serial", ret))
	}
	if p, ret := dev.GetPciInfo(); ret == nvml.SUCCESS {
		g.PciBusId = busID(p)
	} else {
		errs.add(item, what("PCI info", ret))
	}
	if ma, mi, ret := dev.GetCudaComputeCapability(); ret == nvml.SUCCESS {
		g.ComputeCapabilityMajor, g.ComputeCapabilityMinor = uint32(ma), uint32(mi)
	} else if !unsupported(ret) {
		errs.add(item, what("compute capability", ret))
	}
	// Only where the GPU is itself a NUMA node (Grace Hopper/Blackwell C2C);
	// NOT_SUPPORTED on x86, where sysfs fills the attached node.
	if c.has("nvmlDeviceGetNumaNodeId") {
		if v, ret := dev.GetNumaNodeId(); ret == nvml.SUCCESS && v >= 0 {
			g.NumaNode = int32(v)
		} else if ret != nvml.SUCCESS && !unsupported(ret) {
			errs.add(item, what("NUMA node", ret))
		}
	}
	if m, ret := dev.GetMemoryInfo(); ret == nvml.SUCCESS {
		g.MemoryBytes = m.Total
	} else if !unsupported(ret) {
		errs.add(item, what("memory info", ret))
	}
	if c.has("nvmlDeviceGetArchitecture") {
		if a, ret := dev.GetArchitecture(); ret == nvml.SUCCESS {
			g.Architecture = archName(a)
		} else if !unsupported(ret) {
			errs.add(item, what("architecture", ret))
		}
	}
	g.Fabric = c.fabric(i, dev, errs)
	g.Nvlinks = c.nvlinks(i, dev, errs)
	g.C2C = c2c(i, dev, errs)
	c.health(i, dev, g, errs)
	return g
}

// maxC2CLinks bounds the C2C links read per GPU (Grace parts have ~10).
const maxC2CLinks = 64

// c2c reads the GPU's chip-to-chip links to its CPU (NVLink-C2C on Grace
// Hopper and Grace Blackwell) as NCCL does: FI_DEV_C2C_LINK_COUNT, then per
// link FI_DEV_C2C_LINK_GET_STATUS (1 = up) and FI_DEV_C2C_LINK_GET_MAX_BW
// (MB/s). nil where the GPU has none (x86 GPUs answer NOT_SUPPORTED or 0)
// or no link is up; the bandwidth is the slowest up link's.
func c2c(i int, dev nvml.Device, errs *errList) *ginv1.C2CLink {
	fv := []nvml.FieldValue{{FieldId: nvml.FI_DEV_C2C_LINK_COUNT}}
	if ret := dev.GetFieldValues(fv); ret != nvml.SUCCESS || nvml.Return(fv[0].NvmlReturn) != nvml.SUCCESS {
		return nil
	}
	n, ok := fieldUint(fv[0])
	if !ok || n == 0 {
		return nil
	}
	if n > maxC2CLinks {
		errs.add(gpuItem(i), fmt.Errorf("C2C link count %d, at most %d", n, maxC2CLinks))
		return nil
	}
	vals := make([]nvml.FieldValue, 0, 2*n)
	for l := range uint32(n) {
		vals = append(vals,
			nvml.FieldValue{FieldId: nvml.FI_DEV_C2C_LINK_GET_STATUS, ScopeId: l},
			nvml.FieldValue{FieldId: nvml.FI_DEV_C2C_LINK_GET_MAX_BW, ScopeId: l})
	}
	if ret := dev.GetFieldValues(vals); ret != nvml.SUCCESS {
		errs.add(gpuItem(i), what("C2C links", ret))
		return nil
	}
	out := &ginv1.C2CLink{}
	for k := 0; k < len(vals); k += 2 {
		st, okS := fieldUint(vals[k])
		bw, okB := fieldUint(vals[k+1])
		if nvml.Return(vals[k].NvmlReturn) != nvml.SUCCESS || nvml.Return(vals[k+1].NvmlReturn) != nvml.SUCCESS ||
			!okS || !okB || st != 1 || bw == 0 {
			continue
		}
		out.LinksUp++
		if out.LinkMbPerS == 0 || bw < out.LinkMbPerS {
			out.LinkMbPerS = bw
		}
	}
	if out.LinksUp == 0 {
		return nil
	}
	return out
}

// archName is the marketing name of an NVML architecture ("" if unknown).
func archName(a nvml.DeviceArchitecture) string {
	switch a {
	case nvml.DEVICE_ARCH_KEPLER:
		return "Kepler"
	case nvml.DEVICE_ARCH_MAXWELL:
		return "Maxwell"
	case nvml.DEVICE_ARCH_PASCAL:
		return "Pascal"
	case nvml.DEVICE_ARCH_VOLTA:
		return "Volta"
	case nvml.DEVICE_ARCH_TURING:
		return "Turing"
	case nvml.DEVICE_ARCH_AMPERE:
		return "Ampere"
	case nvml.DEVICE_ARCH_ADA:
		return "Ada Lovelace"
	case nvml.DEVICE_ARCH_HOPPER:
		return "Hopper"
	case nvml.DEVICE_ARCH_BLACKWELL:
		return "Blackwell"
	case nvml.DEVICE_ARCH_RUBIN:
		return "Rubin"
	}
	return ""
}

// busID returns p's bus id in sysfs form. NVML fills BusId
// ("00000000:07:00.0"); the numeric fields are the fallback.
func busID(p nvml.PciInfo) string {
	b := make([]byte, 0, len(p.BusId))
	for _, c := range p.BusId {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	if len(b) > 0 {
		return NormalizeBusID(string(b))
	}
	if p.Domain == 0 && p.Bus == 0 && p.Device == 0 {
		return ""
	}
	return fmt.Sprintf("%04x:%02x:%02x.0", p.Domain, p.Bus, p.Device)
}

// fabricInfo is what the three fabric-info calls have in common.
type fabricInfo struct {
	clusterUUID [16]uint8
	cliqueID    uint32
	state       uint8
	healthMask  uint32
}

// fabric reads the GPU's MNNVL fabric membership: GetGpuFabricInfo_v4
// (newest drivers), else GetGpuFabricInfoV().V2() (real library only), else
// GetGpuFabricInfo. nil when not supported.
func (c *Collector) fabric(i int, dev nvml.Device, errs *errList) *ginv1.MnnvlFabric {
	var fi fabricInfo
	var ret nvml.Return
	switch {
	case c.has("nvmlDeviceGetGpuFabricInfo_v4"):
		var v nvml.GpuFabricInfo_v4
		v, ret = dev.GetGpuFabricInfo_v4()
		fi = fabricInfo{clusterUUID: v.ClusterUuid, state: v.State, healthMask: v.HealthMask}
		// The legacy clique id is the first unicast-pointer clique.
		for _, cl := range v.Cliques[:min(int(v.NumCliques), len(v.Cliques))] {
			if cl.Type == 0 { // NVML_GPU_FABRIC_CLIQUE_TYPE_UNICAST_POINTER
				fi.cliqueID = cl.Id
				break
			}
		}
	case c.real && c.has("nvmlDeviceGetGpuFabricInfoV"):
		var v nvml.GpuFabricInfo_v2
		v, ret = dev.GetGpuFabricInfoV().V2()
		fi = fabricInfo{clusterUUID: v.ClusterUuid, cliqueID: v.CliqueId, state: v.State, healthMask: v.HealthMask}
	case c.has("nvmlDeviceGetGpuFabricInfo"):
		var v nvml.GpuFabricInfo
		v, ret = dev.GetGpuFabricInfo()
		fi = fabricInfo{clusterUUID: v.ClusterUuid, cliqueID: v.CliqueId, state: v.State}
	default:
		return nil
	}
	if ret != nvml.SUCCESS {
		if !unsupported(ret) {
			errs.add(gpuItem(i), what("fabric info", ret))
		}
		return nil
	}
	var state ginv1.FabricState
	switch fi.state {
	case nvml.GPU_FABRIC_STATE_NOT_SUPPORTED:
		return nil
	case nvml.GPU_FABRIC_STATE_NOT_STARTED:
		state = ginv1.FabricState_FABRIC_STATE_NOT_STARTED
	case nvml.GPU_FABRIC_STATE_IN_PROGRESS:
		state = ginv1.FabricState_FABRIC_STATE_IN_PROGRESS
	case nvml.GPU_FABRIC_STATE_COMPLETED:
		state = ginv1.FabricState_FABRIC_STATE_COMPLETED
	}
	return &ginv1.MnnvlFabric{
		ClusterUuid: formatUUID(fi.clusterUUID),
		CliqueId:    fi.cliqueID,
		State:       state,
		HealthMask:  fi.healthMask,
	}
}

// formatUUID formats 16 bytes as a UUID string; "" for all zeroes.
func formatUUID(u [16]uint8) string {
	if u == [16]uint8{} {
		return ""
	}
	x := hex.EncodeToString(u[:])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// link is one NVLink port found on a GPU.
type link struct {
	index int
	up    bool
}

// links lists the GPU's NVLinks. The count comes from
// FI_DEV_NVLINK_LINK_COUNT; without it links 0..NVLINK_MAX_LINKS-1 are
// probed until one is NOT_SUPPORTED or INVALID_ARGUMENT.
func (c *Collector) links(i int, dev nvml.Device, errs *errList) []link {
	n, probe := nvml.NVLINK_MAX_LINKS, true
	fv := []nvml.FieldValue{{FieldId: nvml.FI_DEV_NVLINK_LINK_COUNT}}
	if ret := dev.GetFieldValues(fv); ret == nvml.SUCCESS && nvml.Return(fv[0].NvmlReturn) == nvml.SUCCESS {
		if v, ok := fieldUint(fv[0]); ok && v <= nvml.NVLINK_MAX_LINKS {
			n, probe = int(v), false
		}
	}
	var out []link
	for l := range n {
		st, ret := dev.GetNvLinkState(l)
		switch {
		case ret == nvml.SUCCESS:
			out = append(out, link{index: l, up: st == nvml.FEATURE_ENABLED})
			continue
		case probe && (ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT):
			return out // past the last link (or no NVLink at all)
		case unsupported(ret):
			continue // counted but not reported: skip it
		}
		errs.add(linkItem(i, l), what("state", ret))
		if ret == nvml.ERROR_GPU_IS_LOST {
			return out
		}
	}
	return out
}

// nvlinks reads the GPU's NVLinks. The agent decides health; it stays
// UNSPECIFIED here.
func (c *Collector) nvlinks(i int, dev nvml.Device, errs *errList) []*ginv1.NvLink {
	links := c.links(i, dev, errs)
	if len(links) == 0 {
		return nil
	}
	hasType := c.has("nvmlDeviceGetNvLinkRemoteDeviceType")
	out := make([]*ginv1.NvLink, 0, len(links))
	for _, lk := range links {
		l := lk.index
		nl := &ginv1.NvLink{Index: uint32(l), State: ginv1.LinkState_LINK_STATE_DOWN}
		if lk.up {
			nl.State = ginv1.LinkState_LINK_STATE_UP
		}
		// The remote end of a link that is down may not be readable: then
		// it is left empty, not reported as an error.
		report := func(s string, ret nvml.Return) {
			if lk.up && !unsupported(ret) {
				errs.add(linkItem(i, l), what(s, ret))
			}
		}
		if v, ret := dev.GetNvLinkVersion(l); ret == nvml.SUCCESS {
			nl.Version = NVLinkGeneration(v)
			nl.BandwidthMbPerS = NVLinkBandwidthMBps(nl.Version)
		} else {
			report("version", ret)
		}
		if p, ret := dev.GetNvLinkRemotePciInfo(l); ret == nvml.SUCCESS {
			nl.RemotePciBusId = busID(p)
		} else {
			report("remote PCI info", ret)
		}
		if hasType {
			if t, ret := dev.GetNvLinkRemoteDeviceType(l); ret == nvml.SUCCESS {
				nl.RemoteType = remoteType(t)
			} else {
				report("remote device type", ret)
			}
		}
		out = append(out, nl)
	}
	// Remote link indices, one batched call; absent when unsupported.
	fv := make([]nvml.FieldValue, len(out))
	for k, nl := range out {
		fv[k] = nvml.FieldValue{FieldId: nvml.FI_DEV_NVLINK_REMOTE_NVLINK_ID, ScopeId: nl.Index}
	}
	if ret := dev.GetFieldValues(fv); ret == nvml.SUCCESS {
		for k := range fv {
			if nvml.Return(fv[k].NvmlReturn) != nvml.SUCCESS {
				continue
			}
			if v, ok := fieldUint(fv[k]); ok && v <= math.MaxUint32 {
				out[k].RemoteLinkIndex = uint32(v)
			}
		}
	}
	return out
}

func remoteType(t nvml.IntNvLinkDeviceType) ginv1.NvLinkRemoteType {
	switch t {
	case nvml.NVLINK_DEVICE_TYPE_GPU:
		return ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_GPU
	case nvml.NVLINK_DEVICE_TYPE_SWITCH:
		return ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_SWITCH
	case nvml.NVLINK_DEVICE_TYPE_IBMNPU:
		return ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_IBMNPU
	}
	return ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_UNSPECIFIED
}

// fieldUint decodes a field value (a C union, little-endian) as a
// non-negative integer.
func fieldUint(f nvml.FieldValue) (uint64, bool) {
	v := f.Value[:]
	switch nvml.ValueType(f.ValueType) {
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return uint64(binary.LittleEndian.Uint32(v)), true
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		return binary.LittleEndian.Uint64(v), true
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		if x := int64(binary.LittleEndian.Uint64(v)); x >= 0 {
			return uint64(x), true
		}
	case nvml.VALUE_TYPE_SIGNED_INT:
		if x := int32(binary.LittleEndian.Uint32(v)); x >= 0 {
			return uint64(x), true
		}
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return uint64(binary.LittleEndian.Uint16(v)), true
	case nvml.VALUE_TYPE_DOUBLE:
		x := math.Float64frombits(binary.LittleEndian.Uint64(v))
		if x >= 0 && x < math.MaxUint64 {
			return uint64(x), true
		}
	}
	return 0, false
}

// P2P reads, for every pair of GPUs, NVML's PCIe common ancestor and the
// NVLink and read P2P status.
func (c *Collector) P2P(ctx context.Context) ([]P2PPair, []discovery.ItemError) {
	var errs errList
	devs := c.devices(&errs)
	var out []P2PPair
	for a := range devs {
		for b := a + 1; b < len(devs); b++ {
			if err := ctx.Err(); err != nil {
				errs.add("p2p", err)
				return out, errs
			}
			if devs[a] == nil || devs[b] == nil {
				continue
			}
			item := fmt.Sprintf("GPU %d GPU %d", a, b)
			p := P2PPair{A: a, B: b}
			if lv, ret := devs[a].GetTopologyCommonAncestor(devs[b]); ret == nvml.SUCCESS {
				p.Level = levelName(lv)
			} else if !unsupported(ret) {
				errs.add(item, what("topology common ancestor", ret))
			}
			p.NVLink = c.p2pOK(devs[a], devs[b], nvml.P2P_CAPS_INDEX_NVLINK, item, &errs)
			p.Read = c.p2pOK(devs[a], devs[b], nvml.P2P_CAPS_INDEX_READ, item, &errs)
			out = append(out, p)
		}
	}
	return out, errs
}

func (c *Collector) p2pOK(a, b nvml.Device, idx nvml.GpuP2PCapsIndex, item string, errs *errList) bool {
	st, ret := a.GetP2PStatus(b, idx)
	if ret != nvml.SUCCESS {
		if !unsupported(ret) {
			errs.add(item, what(fmt.Sprintf("P2P status %d", idx), ret))
		}
		return false
	}
	return st == nvml.P2P_STATUS_OK
}

// levelName names a topology level as nvidia-smi topo -m does.
func levelName(l nvml.GpuTopologyLevel) string {
	switch l {
	case nvml.TOPOLOGY_INTERNAL:
		return "INTERNAL"
	case nvml.TOPOLOGY_SINGLE:
		return "PIX"
	case nvml.TOPOLOGY_MULTIPLE:
		return "PXB"
	case nvml.TOPOLOGY_HOSTBRIDGE:
		return "PHB"
	case nvml.TOPOLOGY_NODE:
		return "NODE"
	case nvml.TOPOLOGY_SYSTEM:
		return "SYS"
	}
	return ""
}
