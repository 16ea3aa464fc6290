//go:build cgo

package nvml

import (
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"google.golang.org/protobuf/types/known/timestamppb"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// MaxXIDsPerGPU bounds the distinct XID codes kept per GPU (the master
// refuses more, internal/inventory.MaxXIDsPerGPU).
const MaxXIDsPerGPU = 32

// maxEventsPerDrain bounds the events read from the set in one inventory:
// an XID storm cannot hold the collection up.
const maxEventsPerDrain = 4096

// throttleFaults are the clock event reasons that slow a loaded GPU against
// the operator's will (nvml.h: HW slowdown, SW and HW thermal slowdown, HW
// power brake). Idle, application clocks, SW power cap and sync boost come
// and go with the load and would change the inventory at every collection.
const throttleFaults = nvml.ClocksThrottleReasonHwSlowdown | nvml.ClocksEventReasonSwThermalSlowdown |
	nvml.ClocksThrottleReasonHwThermalSlowdown | nvml.ClocksThrottleReasonHwPowerBrakeSlowdown

// xidState is the collector's memory of XID events: NVML hands each event
// out once, while the inventory must keep reporting it.
type xidState struct {
	set     nvml.EventSet // nil until created; noSet after a failure
	failed  bool
	devices map[nvml.Device]bool // registered
	seen    map[string][]*ginv1.XidEvent
}

// health reads the GPU's VBIOS, throttle, ECC and row-remap state. XIDs are
// added by drainXIDs.
func (c *Collector) health(i int, dev nvml.Device, g *ginv1.Gpu, errs *errList) {
	item := gpuItem(i)
	if v, ret := dev.GetVbiosVersion(); ret == nvml.SUCCESS {
		g.VbiosVersion = v
	} else if !unsupported(ret) {
		errs.add(item, what("VBIOS version", ret))
	}
	h := &ginv1.GpuHealth{}
	got := false
	if c.has("nvmlDeviceGetCurrentClocksEventReasons") {
		if r, ret := dev.GetCurrentClocksEventReasons(); ret == nvml.SUCCESS {
			h.ClockEventReasons, got = r&throttleFaults, true
		} else if !unsupported(ret) {
			errs.add(item, what("clock event reasons", ret))
		}
	}
	if n, ret := dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); ret == nvml.SUCCESS {
		h.EccUncorrectedVolatile, got = n, true
	} else if !unsupported(ret) {
		errs.add(item, what("uncorrected ECC errors", ret))
	}
	// Row remapping exists on A100 and later; older GPUs retire pages.
	if c.has("nvmlDeviceGetRemappedRows") {
		if corr, unc, pending, failed, ret := dev.GetRemappedRows(); ret == nvml.SUCCESS {
			h.RemappedRowsCorrectable, h.RemappedRowsUncorrectable = uint32(max(corr, 0)), uint32(max(unc, 0))
			h.RowRemapPending, h.RowRemapFailed, got = pending, failed, true
		} else if !unsupported(ret) {
			errs.add(item, what("remapped rows", ret))
		}
	}
	if got {
		g.Health = h
	}
}

// drainXIDs registers the GPUs for XID events (once per device), reads every
// event NVML has queued without waiting, and attaches to each GPU the XID
// codes seen since the collector started. A driver without events (or a
// failed set) leaves the GPUs without XIDs and reports it once.
func (c *Collector) drainXIDs(devs []nvml.Device, gpus map[nvml.Device]*ginv1.Gpu, errs *errList) {
	c.mu.Lock()
	defer c.mu.Unlock()
	x := &c.xid
	if x.failed {
		c.attachXIDs(gpus)
		return
	}
	if x.set == nil {
		set, ret := c.lib.EventSetCreate()
		if ret != nvml.SUCCESS {
			x.failed = true
			if !unsupported(ret) {
				errs.add("XID events", what("event set", ret))
			}
			return
		}
		x.set, x.devices, x.seen = set, map[nvml.Device]bool{}, map[string][]*ginv1.XidEvent{}
	}
	for _, d := range devs {
		if d == nil || x.devices[d] {
			continue
		}
		types, ret := d.GetSupportedEventTypes()
		if ret != nvml.SUCCESS || types&nvml.EventTypeXidCriticalError == 0 {
			x.devices[d] = true // nothing to register; do not ask again
			continue
		}
		if ret := d.RegisterEvents(nvml.EventTypeXidCriticalError, x.set); ret != nvml.SUCCESS {
			if !unsupported(ret) {
				errs.add("XID events", what("register", ret))
			}
			continue // retried at the next collection
		}
		x.devices[d] = true
	}
	now := c.now()
	for range maxEventsPerDrain {
		ev, ret := x.set.Wait(0)
		if ret != nvml.SUCCESS {
			if ret != nvml.ERROR_TIMEOUT {
				errs.add("XID events", what("wait", ret))
			}
			break
		}
		if ev.EventType&nvml.EventTypeXidCriticalError == 0 || ev.Device == nil {
			continue
		}
		uuid, ret := ev.Device.GetUUID()
		if ret != nvml.SUCCESS {
			continue
		}
		c.recordXID(uuid, uint32(ev.EventData), now)
	}
	c.attachXIDs(gpus)
}

// recordXID keeps an XID code once per GPU, at most MaxXIDsPerGPU codes.
func (c *Collector) recordXID(uuid string, xid uint32, at time.Time) {
	list := c.xid.seen[uuid]
	for _, e := range list {
		if e.Xid == xid {
			return
		}
	}
	if len(list) >= MaxXIDsPerGPU {
		return
	}
	c.xid.seen[uuid] = append(list, &ginv1.XidEvent{Xid: xid, FirstSeen: timestamppb.New(at)})
}

func (c *Collector) attachXIDs(gpus map[nvml.Device]*ginv1.Gpu) {
	for _, g := range gpus {
		list := c.xid.seen[g.GetUuid()]
		if len(list) == 0 {
			continue
		}
		if g.Health == nil {
			g.Health = &ginv1.GpuHealth{}
		}
		g.Health.Xids = append([]*ginv1.XidEvent(nil), list...)
	}
}
