//go:build cgo

package nvml

import (
	"context"
	"fmt"
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gin-topology/gin/internal/discovery"
)

// linkFields are the per-link field ids read on every scrape, in the order
// Counters decodes them.
var linkFields = []uint32{
	nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, // KiB
	nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, // KiB
	nvml.FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS,
	nvml.FI_DEV_NVLINK_COUNT_EFFECTIVE_ERRORS,
	nvml.FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS,
}

// Counters reads every NVLink's error and throughput counters and every
// GPU's temperature. A counter the driver does not report is a nil pointer.
//
// Error counters come from GetNvLinkErrorCounter (DL CRC flit, CRC data,
// replay, recovery). Blackwell and newer do not support those; there the
// field-value counters FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS, _EFFECTIVE_ERRORS
// and _LINK_RECOVERY_EVENTS (which stands in for recovery) are reported.
// Throughput is FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX, converted to bytes.
func (c *Collector) Counters(ctx context.Context) ([]discovery.NVLinkCounters, []discovery.GPUSample, []discovery.ItemError) {
	var errs errList
	var links []discovery.NVLinkCounters
	var samples []discovery.GPUSample
	for i, dev := range c.devices(&errs) {
		if err := ctx.Err(); err != nil {
			errs.add("counters", err)
			break
		}
		if dev == nil {
			continue
		}
		item := gpuItem(i)
		uuid, ret := dev.GetUUID()
		if ret != nvml.SUCCESS {
			errs.add(item, what("UUID", ret))
			continue
		}
		s := discovery.GPUSample{Index: i, UUID: uuid}
		if p, ret := dev.GetPciInfo(); ret == nvml.SUCCESS {
			s.PCIBusID = busID(p)
		} else {
			errs.add(item, what("PCI info", ret))
		}
		if v, ret := dev.GetName(); ret == nvml.SUCCESS {
			s.Model = v
		} else if !unsupported(ret) {
			errs.add(item, what("name", ret))
		}
		s.TemperatureC = c.temperature(i, dev, &errs)
		samples = append(samples, s)
		links = append(links, c.linkCounters(i, dev, s, &errs)...)
	}
	return links, samples, errs
}

// temperature reads the GPU core temperature: GetTemperatureV (real
// library, newer drivers) or GetTemperature(TEMPERATURE_GPU).
func (c *Collector) temperature(i int, dev nvml.Device, errs *errList) *uint32 {
	var t uint32
	var ret nvml.Return
	if c.real && c.has("nvmlDeviceGetTemperatureV") {
		var v nvml.Temperature
		v, ret = dev.GetTemperatureV().V1()
		t = uint32(max(v.Temperature, 0))
	} else {
		t, ret = dev.GetTemperature(nvml.TEMPERATURE_GPU)
	}
	if ret != nvml.SUCCESS {
		if !unsupported(ret) {
			errs.add(gpuItem(i), what("temperature", ret))
		}
		return nil
	}
	return &t
}

// linkCounters reads the counters of every NVLink of GPU i.
func (c *Collector) linkCounters(i int, dev nvml.Device, s discovery.GPUSample, errs *errList) []discovery.NVLinkCounters {
	ls := c.links(i, dev, errs)
	if len(ls) == 0 {
		return nil
	}
	out := make([]discovery.NVLinkCounters, len(ls))
	for k, lk := range ls {
		l := lk.index
		lc := discovery.NVLinkCounters{GPUIndex: i, UUID: s.UUID, PCIBusID: s.PCIBusID, Link: l}
		for _, ec := range []struct {
			dst  **uint64
			ctr  nvml.NvLinkErrorCounter
			name string
		}{
			{&lc.CRCFlit, nvml.NVLINK_ERROR_DL_CRC_FLIT, "CRC flit"},
			{&lc.CRCData, nvml.NVLINK_ERROR_DL_CRC_DATA, "CRC data"},
			{&lc.Replay, nvml.NVLINK_ERROR_DL_REPLAY, "replay"},
			{&lc.Recovery, nvml.NVLINK_ERROR_DL_RECOVERY, "recovery"},
		} {
			v, ret := dev.GetNvLinkErrorCounter(l, ec.ctr)
			switch {
			case ret == nvml.SUCCESS:
				*ec.dst = &v
			case unsupported(ret) || ret == nvml.ERROR_INVALID_ARGUMENT:
			default:
				errs.add(linkItem(i, l), what(ec.name+" error counter", ret))
			}
		}
		out[k] = lc
	}

	// One batched field-value call for all links.
	fv := make([]nvml.FieldValue, 0, len(ls)*len(linkFields))
	for _, lk := range ls {
		for _, id := range linkFields {
			fv = append(fv, nvml.FieldValue{FieldId: id, ScopeId: uint32(lk.index)})
		}
	}
	ret := dev.GetFieldValues(fv)
	if ret != nvml.SUCCESS {
		if !unsupported(ret) {
			errs.add(gpuItem(i), what("NVLink field values", ret))
		}
		return out
	}
	for k := range out {
		lc := &out[k]
		vals := fv[k*len(linkFields) : (k+1)*len(linkFields)]
		get := func(f nvml.FieldValue) *uint64 {
			switch r := nvml.Return(f.NvmlReturn); r {
			case nvml.SUCCESS:
				if v, ok := fieldUint(f); ok {
					return &v
				}
				errs.add(linkItem(i, lc.Link), fmt.Errorf("field %d: value type %d not decodable", f.FieldId, f.ValueType))
			case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND, nvml.ERROR_INVALID_ARGUMENT:
				// Not reported by this GPU or driver (an unknown field id is INVALID_ARGUMENT).
			default:
				errs.add(linkItem(i, lc.Link), what(fmt.Sprintf("field %d", f.FieldId), r))
			}
			return nil
		}
		lc.TxBytes = kibToBytes(get(vals[0]))
		lc.RxBytes = kibToBytes(get(vals[1]))
		lc.SymbolErrors = get(vals[2])
		lc.EffectiveErrors = get(vals[3])
		if rec := get(vals[4]); lc.Recovery == nil {
			lc.Recovery = rec
		}
	}
	return out
}

// kibToBytes converts a KiB counter to bytes (saturating).
func kibToBytes(p *uint64) *uint64 {
	if p == nil {
		return nil
	}
	v := *p
	if v > math.MaxUint64/1024 {
		v = math.MaxUint64
	} else {
		v *= 1024
	}
	return &v
}
