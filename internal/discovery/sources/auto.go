package sources

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery"
	"github.com/gin-topology/gin/internal/discovery/fabricscan"
	"github.com/gin-topology/gin/internal/discovery/nvml"
	"github.com/gin-topology/gin/internal/discovery/rdmanl"
	"github.com/gin-topology/gin/internal/discovery/sysfs"
)

// ErrNoHardwareDiscovery is returned by Open("auto") on a node with neither
// an NVIDIA driver nor RDMA devices.
var ErrNoHardwareDiscovery = errors.New("no hardware to discover on this node: no NVIDIA driver (libnvidia-ml.so.1 not found) and no RDMA devices in /sys/class/infiniband; use --source sim:<profile> or file:<path>")

// AutoOptions configure the real-hardware source.
type AutoOptions struct {
	// SysRoot, ProcRoot and EtcRoot default to /sys, /proc and /etc.
	SysRoot, ProcRoot, EtcRoot string
	// ComputeHCAs and StorageHCAs name HCAs (by device name or node GUID)
	// whose role is forced; see sysfs.Roles.
	ComputeHCAs, StorageHCAs []string
	// LLDPCommand, when non-empty and installed, is run to learn Ethernet
	// neighbours ("lldpcli -f json show neighbors details").
	LLDPCommand string
	Logger      *slog.Logger
}

// gpuCollector is what auto needs from the NVML collector.
type gpuCollector interface {
	Inventory(ctx context.Context) (nvml.Result, []discovery.ItemError)
	Counters(ctx context.Context) ([]discovery.NVLinkCounters, []discovery.GPUSample, []discovery.ItemError)
}

// autoSource is this node's real hardware: GPUs and NVLinks from NVML, the
// PCIe tree, HCAs, port counters and host facts from sysfs, QPs from RDMA
// netlink, Ethernet neighbours from lldpd.
type autoSource struct {
	node string
	opts AutoOptions
	gpus gpuCollector // nil on a node without an NVIDIA driver
	log  *slog.Logger
	// lookup finds a netdev's addresses (injectable for tests).
	lookup sysfs.AddrLookup
	// dumpQPs reads the RDMA netlink QP dump (injectable for tests).
	dumpQPs func(ctx context.Context) ([][]byte, error)

	mu       sync.Mutex
	lastErrs []discovery.ItemError
}

// openAuto opens the real-hardware source; requireGPUs (--source nvml)
// fails when NVML cannot be used instead of reporting RDMA devices only.
func openAuto(opts Options, requireGPUs bool) (discovery.Source, error) {
	a := newAuto(opts.NodeName, opts.Auto)
	c, err := nvml.New()
	switch {
	case err == nil:
		a.gpus = c
	case requireGPUs:
		return nil, fmt.Errorf("--source nvml: %w", err)
	case errors.Is(err, nvml.ErrNoDriver), errors.Is(err, nvml.ErrNoNVML):
		hcas, _ := sysfs.HCAsWithLookup(a.opts.SysRoot, nil)
		if len(hcas) == 0 {
			if errors.Is(err, nvml.ErrNoNVML) {
				return nil, fmt.Errorf("%w (this gin-agent was built without cgo, so without NVML)", ErrNoHardwareDiscovery)
			}
			return nil, ErrNoHardwareDiscovery
		}
		a.log.Warn("no NVIDIA driver on this node; reporting RDMA devices only", "err", err)
	default:
		return nil, fmt.Errorf("auto: NVML: %w", err)
	}
	return a, nil
}

func newAuto(node string, o AutoOptions) *autoSource {
	if o.SysRoot == "" {
		o.SysRoot = "/sys"
	}
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.EtcRoot == "" {
		o.EtcRoot = "/etc"
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &autoSource{node: node, opts: o, log: log, lookup: sysfs.DefaultAddrLookup, dumpQPs: rdmanl.DumpQPs}
}

func (a *autoSource) Name() string { return "auto" }

// Collect implements discovery.Source. Items that cannot be read are logged
// and counted (see Counters); they never fail the collection.
func (a *autoSource) Collect(ctx context.Context) (*ginv1.NodeInventory, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var errs []discovery.ItemError
	host, e := sysfs.Host(a.opts.SysRoot, a.opts.ProcRoot, a.opts.EtcRoot)
	errs = append(errs, e...)
	if host == nil {
		host = &ginv1.Host{}
	}
	inv := &ginv1.NodeInventory{NodeName: a.node, Host: host, Source: "auto", CollectedAt: timestamppb.Now()}

	if a.gpus != nil {
		res, e := a.gpus.Inventory(ctx)
		errs = append(errs, e...)
		inv.Gpus, inv.Nvswitches = res.GPUs, res.NVSwitches
		host.DriverVersion, host.CudaDriverVersion = res.DriverVersion, res.CUDADriverVersion
	}
	hcas, e := sysfs.HCAsWithLookup(a.opts.SysRoot, a.lookup)
	errs = append(errs, e...)
	sysfs.Roles(hcas, a.opts.ComputeHCAs, a.opts.StorageHCAs)
	inv.Hcas = hcas

	var busIDs []string
	for _, g := range inv.Gpus {
		busIDs = append(busIDs, g.GetPciBusId())
	}
	for _, s := range inv.Nvswitches {
		if s.GetPciBusId() != "" {
			busIDs = append(busIDs, s.GetPciBusId())
		}
	}
	for _, h := range hcas {
		busIDs = append(busIDs, h.GetPciBusId())
	}
	bridges, devices, e := sysfs.PCIeTree(a.opts.SysRoot, busIDs)
	errs = append(errs, e...)
	inv.PcieBridges = bridges
	for _, g := range inv.Gpus {
		if d, ok := devices[g.GetPciBusId()]; ok {
			g.PcieParentId, g.PcieLink = d.ParentID, d.Link
			if g.GetNumaNode() < 0 {
				g.NumaNode = d.NUMANode
			}
		}
	}
	sysfs.AttachPCIe(hcas, devices)
	errs = append(errs, sysfs.AttachACS(a.opts.SysRoot, bridges)...)
	iommu, e := sysfs.IOMMU(a.opts.SysRoot, a.opts.ProcRoot, busIDs)
	errs = append(errs, e...)
	host.Iommu = iommu
	if a.gpus != nil {
		host.GpudirectRdma = sysfs.GPUDirectRDMA(a.opts.SysRoot, a.opts.ProcRoot, host.GetKernelVersion())
	}

	if len(hcas) > 0 {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		msgs, err := a.dumpQPs(qctx)
		cancel()
		switch {
		case err == nil:
			qps, perr := rdmanl.ParseQPDump(msgs)
			if perr != nil {
				errs = append(errs, discovery.ItemError{Source: "netlink", Item: "RDMA QP dump", Err: perr})
			}
			inv.QpSummaries = qps
		case errors.Is(err, rdmanl.ErrNoRDMA):
		default:
			errs = append(errs, discovery.ItemError{Source: "netlink", Item: "RDMA QP dump", Err: err})
		}
	}
	inv.FabricNeighbors = append(inv.FabricNeighbors, a.lldp(ctx, hcas, &errs)...)

	a.mu.Lock()
	changed := len(errs) != len(a.lastErrs)
	a.lastErrs = errs
	a.mu.Unlock()
	if changed {
		for _, e := range errs {
			a.log.Warn("discovery item unreadable", "source", e.Source, "item", e.Item, "err", e.Err)
		}
	}
	return inv, nil
}

// lldp learns Ethernet neighbours of the HCAs' netdevs from lldpd, when the
// command is configured and installed.
func (a *autoSource) lldp(ctx context.Context, hcas []*ginv1.Hca, errs *[]discovery.ItemError) []*ginv1.FabricNeighbor {
	if a.opts.LLDPCommand == "" {
		return nil
	}
	args := splitCommand(a.opts.LLDPCommand)
	if _, err := exec.LookPath(args[0]); err != nil {
		return nil // lldpd not installed: not an error on IB-only nodes
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, args[0], args[1:]...).Output()
	if err != nil {
		*errs = append(*errs, discovery.ItemError{Source: "lldp", Item: a.opts.LLDPCommand, Err: err})
		return nil
	}
	byIf := map[string]struct {
		hca  string
		port uint32
	}{}
	for _, h := range hcas {
		for _, p := range h.GetPorts() {
			if nd := p.GetNetdev().GetName(); nd != "" {
				byIf[nd] = struct {
					hca  string
					port uint32
				}{h.GetName(), p.GetPort()}
			}
		}
	}
	ns, err := fabricscan.ParseLLDPCLIJSON(out, func(ifname string) (string, uint32, bool) {
		v, ok := byIf[ifname]
		return v.hca, v.port, ok
	})
	if err != nil {
		*errs = append(*errs, discovery.ItemError{Source: "lldp", Item: a.opts.LLDPCommand, Err: err})
		return nil
	}
	return ns
}

// Counters implements discovery.CounterSource.
func (a *autoSource) Counters(ctx context.Context) discovery.Counters {
	var c discovery.Counters
	if a.gpus != nil {
		nv, gs, e := a.gpus.Counters(ctx)
		c.NVLinks, c.GPUs, c.Errors = nv, gs, append(c.Errors, e...)
	}
	ports, e := sysfs.PortCounters(a.opts.SysRoot)
	c.Ports, c.Errors = ports, append(c.Errors, e...)
	a.mu.Lock()
	c.Errors = append(c.Errors, a.lastErrs...)
	a.mu.Unlock()
	return c
}
