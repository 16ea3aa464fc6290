//go:build cgo

package nvml

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
)

// fieldKey addresses one field value: field id and scope (link).
type fieldKey struct{ id, scope uint32 }

// fixture is a go-nvml mock library whose GPUs, NVLinks and counters are
// those of a simulated node. Every function the collector calls is filled
// (an unfilled mock function panics); tests replace single functions.
type fixture struct {
	lib     *mock.Interface
	ext     *mock.ExtendedInterface
	devs    []*mock.Device
	inv     *ginv1.NodeInventory
	missing map[string]bool       // symbols the "driver" lacks
	fields  []map[fieldKey]uint64 // per GPU: supported field values
	// events is the XID event queue the mock event set hands out.
	events *mock.EventSet
	queue  []nvml.EventData
	// registered counts RegisterEvents calls per GPU index.
	registered map[int]int
}

// archCode maps the sim's architecture names back to NVML codes.
var archCode = map[string]nvml.DeviceArchitecture{
	"Ampere": nvml.DEVICE_ARCH_AMPERE, "Ada Lovelace": nvml.DEVICE_ARCH_ADA,
	"Hopper": nvml.DEVICE_ARCH_HOPPER, "Blackwell": nvml.DEVICE_ARCH_BLACKWELL,
}

// versionCode maps an NVLink generation to NVML's nvmlNvlinkVersion_t code.
var versionCode = map[uint32]uint32{1: 1, 2: 2, 3: 4, 4: 6, 5: 7}

// nvmlBusID is the NVML form of a sysfs bus id: "00000000:07:00.0".
func nvmlBusID(t testing.TB, s string) nvml.PciInfo {
	var p nvml.PciInfo
	if s == "" {
		return p
	}
	var d, b, v, f uint32
	if _, err := fmt.Sscanf(s, "%x:%x:%x.%x", &d, &b, &v, &f); err != nil {
		t.Fatalf("bus id %q: %v", s, err)
	}
	p.Domain, p.Bus, p.Device = d, b, v
	for i, c := range fmt.Sprintf("%08X:%02X:%02X.%X", d, b, v, f) {
		p.BusId[i] = int8(c)
	}
	return p
}

func u64(v uint64) nvml.FieldValue {
	f := nvml.FieldValue{ValueType: uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)}
	binary.LittleEndian.PutUint64(f.Value[:], v)
	return f
}

// newFixture builds the mock library for a sim profile.
func newFixture(t testing.TB, profile string) *fixture {
	t.Helper()
	src, err := sim.NewSource(profile, sim.NodeOptions{NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := src.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixture{inv: inv, missing: map[string]bool{}, registered: map[int]int{}}
	fx.ext = &mock.ExtendedInterface{LookupSymbolFunc: func(s string) error {
		if fx.missing[s] {
			return fmt.Errorf("undefined symbol: %s", s)
		}
		return nil
	}}
	index := map[nvml.Device]int{}
	for i, g := range inv.Gpus {
		d := fx.newDevice(t, i, g)
		index[d] = i
		fx.devs = append(fx.devs, d)
	}
	// Topology and P2P need the peer's index.
	for i, d := range fx.devs {
		g := inv.Gpus[i]
		d.GetTopologyCommonAncestorFunc = func(o nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
			p := inv.Gpus[index[o]]
			switch {
			case p.PcieParentId == g.PcieParentId:
				return nvml.TOPOLOGY_SINGLE, nvml.SUCCESS
			case p.NumaNode == g.NumaNode:
				return nvml.TOPOLOGY_NODE, nvml.SUCCESS
			}
			return nvml.TOPOLOGY_SYSTEM, nvml.SUCCESS
		}
		d.GetP2PStatusFunc = func(o nvml.Device, c nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
			p := inv.Gpus[index[o]]
			if c != nvml.P2P_CAPS_INDEX_NVLINK {
				return nvml.P2P_STATUS_OK, nvml.SUCCESS
			}
			for _, l := range g.Nvlinks {
				if l.RemoteType == ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_SWITCH ||
					l.RemotePciBusId == p.PciBusId {
					return nvml.P2P_STATUS_OK, nvml.SUCCESS
				}
			}
			return nvml.P2P_STATUS_NOT_SUPPORTED, nvml.SUCCESS
		}
	}
	fx.events = &mock.EventSet{
		WaitFunc: func(uint32) (nvml.EventData, nvml.Return) {
			if len(fx.queue) == 0 {
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
			ev := fx.queue[0]
			fx.queue = fx.queue[1:]
			return ev, nvml.SUCCESS
		},
		FreeFunc: func() nvml.Return { return nvml.SUCCESS },
	}
	fx.lib = &mock.Interface{
		EventSetCreateFunc:             func() (nvml.EventSet, nvml.Return) { return fx.events, nvml.SUCCESS },
		InitFunc:                       func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:                   func() nvml.Return { return nvml.SUCCESS },
		ExtensionsFunc:                 func() nvml.ExtendedInterface { return fx.ext },
		SystemGetDriverVersionFunc:     func() (string, nvml.Return) { return "550.54.15", nvml.SUCCESS },
		SystemGetCudaDriverVersionFunc: func() (int, nvml.Return) { return 12040, nvml.SUCCESS },
		DeviceGetCountFunc:             func() (int, nvml.Return) { return len(fx.devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(n int) (nvml.Device, nvml.Return) {
			if n < 0 || n >= len(fx.devs) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return fx.devs[n], nvml.SUCCESS
		},
	}
	return fx
}

// counter values the fixture reports, deterministic per GPU/link/counter.
func errCounter(i, l int, c nvml.NvLinkErrorCounter) uint64 {
	return uint64(1000*i + 10*l + int(c))
}
func txKiB(i, l int) uint64 { return uint64(1<<20 + 100*i + l) }
func rxKiB(i, l int) uint64 { return uint64(2<<20 + 100*i + l) }

func (fx *fixture) newDevice(t testing.TB, i int, g *ginv1.Gpu) *mock.Device {
	blackwell := g.Architecture == "Blackwell"
	fields := map[fieldKey]uint64{{nvml.FI_DEV_NVLINK_LINK_COUNT, 0}: uint64(len(g.Nvlinks))}
	for l, nl := range g.Nvlinks {
		s := uint32(l)
		fields[fieldKey{nvml.FI_DEV_NVLINK_REMOTE_NVLINK_ID, s}] = uint64(nl.RemoteLinkIndex)
		fields[fieldKey{nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, s}] = txKiB(i, l)
		fields[fieldKey{nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, s}] = rxKiB(i, l)
		if blackwell {
			fields[fieldKey{nvml.FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS, s}] = uint64(l + 1)
			fields[fieldKey{nvml.FI_DEV_NVLINK_COUNT_EFFECTIVE_ERRORS, s}] = uint64(l + 2)
			fields[fieldKey{nvml.FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS, s}] = uint64(l + 3)
		}
	}
	if c := g.C2C; c != nil {
		// Grace GPU: the links the inventory counts as up, then one down
		// link the collector must not count.
		fields[fieldKey{nvml.FI_DEV_C2C_LINK_COUNT, 0}] = uint64(c.LinksUp) + 1
		for l := range c.LinksUp {
			fields[fieldKey{nvml.FI_DEV_C2C_LINK_GET_STATUS, l}] = 1
			fields[fieldKey{nvml.FI_DEV_C2C_LINK_GET_MAX_BW, l}] = c.LinkMbPerS
		}
		fields[fieldKey{nvml.FI_DEV_C2C_LINK_GET_STATUS, c.LinksUp}] = 0
		fields[fieldKey{nvml.FI_DEV_C2C_LINK_GET_MAX_BW, c.LinksUp}] = c.LinkMbPerS
	}
	fx.fields = append(fx.fields, fields)
	link := func(l int) (*ginv1.NvLink, nvml.Return) {
		if l < 0 || l >= len(g.Nvlinks) {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		return g.Nvlinks[l], nvml.SUCCESS
	}
	fabric := func() (nvml.GpuFabricInfo_v4, nvml.Return) {
		var v nvml.GpuFabricInfo_v4
		if g.Fabric == nil {
			return v, nvml.ERROR_NOT_SUPPORTED
		}
		u, err := hex.DecodeString(strings.ReplaceAll(g.Fabric.ClusterUuid, "-", ""))
		if err != nil || len(u) != 16 {
			t.Fatalf("cluster uuid %q", g.Fabric.ClusterUuid)
		}
		copy(v.ClusterUuid[:], u)
		v.State = uint8(g.Fabric.State) - 1
		v.HealthMask = g.Fabric.HealthMask
		v.Cliques[0] = nvml.GpuFabricClique_v1{Type: 1, Id: 77} // multicast: not the clique id
		v.Cliques[1] = nvml.GpuFabricClique_v1{Type: 0, Id: g.Fabric.CliqueId}
		v.NumCliques = 2
		return v, nvml.SUCCESS
	}
	return &mock.Device{
		GetUUIDFunc: func() (string, nvml.Return) { return g.Uuid, nvml.SUCCESS },
		GetNameFunc: func() (string, nvml.Return) { return g.Model, nvml.SUCCESS },
		GetSerialFunc: func() (string, nvml.Return) {
			if g.Serial == "" {
				return "", nvml.ERROR_NOT_SUPPORTED
			}
			return g.Serial, nvml.SUCCESS
		},
		GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) { return nvmlBusID(t, g.PciBusId), nvml.SUCCESS },
		GetCudaComputeCapabilityFunc: func() (int, int, nvml.Return) {
			return int(g.ComputeCapabilityMajor), int(g.ComputeCapabilityMinor), nvml.SUCCESS
		},
		GetNumaNodeIdFunc:       func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED },
		GetMemoryInfoFunc:       func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: g.MemoryBytes}, nvml.SUCCESS },
		GetArchitectureFunc:     func() (nvml.DeviceArchitecture, nvml.Return) { return archCode[g.Architecture], nvml.SUCCESS },
		GetGpuFabricInfo_v4Func: fabric,
		GetGpuFabricInfoFunc: func() (nvml.GpuFabricInfo, nvml.Return) {
			v, ret := fabric()
			return nvml.GpuFabricInfo{ClusterUuid: v.ClusterUuid, Status: v.Status, CliqueId: g.Fabric.GetCliqueId(), State: v.State}, ret
		},
		GetNvLinkStateFunc: func(l int) (nvml.EnableState, nvml.Return) {
			nl, ret := link(l)
			if ret != nvml.SUCCESS {
				return 0, ret
			}
			if nl.State == ginv1.LinkState_LINK_STATE_UP {
				return nvml.FEATURE_ENABLED, nvml.SUCCESS
			}
			return nvml.FEATURE_DISABLED, nvml.SUCCESS
		},
		GetNvLinkVersionFunc: func(l int) (uint32, nvml.Return) {
			nl, ret := link(l)
			if ret != nvml.SUCCESS {
				return 0, ret
			}
			return versionCode[nl.Version], nvml.SUCCESS
		},
		GetNvLinkRemotePciInfoFunc: func(l int) (nvml.PciInfo, nvml.Return) {
			nl, ret := link(l)
			if ret != nvml.SUCCESS {
				return nvml.PciInfo{}, ret
			}
			return nvmlBusID(t, nl.RemotePciBusId), nvml.SUCCESS
		},
		GetNvLinkRemoteDeviceTypeFunc: func(l int) (nvml.IntNvLinkDeviceType, nvml.Return) {
			nl, ret := link(l)
			if ret != nvml.SUCCESS {
				return 0, ret
			}
			switch nl.RemoteType {
			case ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_GPU:
				return nvml.NVLINK_DEVICE_TYPE_GPU, nvml.SUCCESS
			case ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_SWITCH:
				return nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS
			}
			return nvml.NVLINK_DEVICE_TYPE_UNKNOWN, nvml.SUCCESS
		},
		GetNvLinkErrorCounterFunc: func(l int, c nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
			if _, ret := link(l); ret != nvml.SUCCESS {
				return 0, ret
			}
			if blackwell {
				return 0, nvml.ERROR_NOT_SUPPORTED
			}
			return errCounter(i, l, c), nvml.SUCCESS
		},
		GetFieldValuesFunc: func(vals []nvml.FieldValue) nvml.Return {
			if len(vals) == 0 {
				return nvml.ERROR_INVALID_ARGUMENT
			}
			for k := range vals {
				v, ok := fields[fieldKey{vals[k].FieldId, vals[k].ScopeId}]
				if !ok {
					vals[k].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
					continue
				}
				f := u64(v)
				vals[k].ValueType, vals[k].Value, vals[k].NvmlReturn = f.ValueType, f.Value, uint32(nvml.SUCCESS)
			}
			return nvml.SUCCESS
		},
		GetVbiosVersionFunc: func() (string, nvml.Return) {
			if g.VbiosVersion == "" {
				return "", nvml.ERROR_NOT_SUPPORTED
			}
			return g.VbiosVersion, nvml.SUCCESS
		},
		GetCurrentClocksEventReasonsFunc: func() (uint64, nvml.Return) {
			if g.Health == nil {
				return 0, nvml.ERROR_NOT_SUPPORTED
			}
			// Idle and power-cap bits the collector must mask away.
			return g.Health.ClockEventReasons | nvml.ClocksEventReasonGpuIdle | nvml.ClocksEventReasonSwPowerCap, nvml.SUCCESS
		},
		GetTotalEccErrorsFunc: func(e nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
			if g.Health == nil {
				return 0, nvml.ERROR_NOT_SUPPORTED
			}
			if e != nvml.MEMORY_ERROR_TYPE_UNCORRECTED || c != nvml.VOLATILE_ECC {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return g.Health.EccUncorrectedVolatile, nvml.SUCCESS
		},
		GetRemappedRowsFunc: func() (int, int, bool, bool, nvml.Return) {
			h := g.Health
			if h == nil {
				return 0, 0, false, false, nvml.ERROR_NOT_SUPPORTED
			}
			return int(h.RemappedRowsCorrectable), int(h.RemappedRowsUncorrectable), h.RowRemapPending, h.RowRemapFailed, nvml.SUCCESS
		},
		GetSupportedEventTypesFunc: func() (uint64, nvml.Return) {
			return nvml.EventTypeXidCriticalError | nvml.EventTypeSingleBitEccError, nvml.SUCCESS
		},
		RegisterEventsFunc: func(types uint64, set nvml.EventSet) nvml.Return {
			if types != nvml.EventTypeXidCriticalError || set != fx.events {
				return nvml.ERROR_INVALID_ARGUMENT
			}
			fx.registered[i]++
			return nvml.SUCCESS
		},
		GetTemperatureFunc: func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
			if s != nvml.TEMPERATURE_GPU {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return uint32(30 + i), nvml.SUCCESS
		},
	}
}

// collector returns a collector over the fixture's library.
func (fx *fixture) collector() *Collector { return NewWithInterface(fx.lib) }
