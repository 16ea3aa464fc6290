//go:build cgo

package nvml

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery"
)

// expected is the sim inventory's GPU section as NVML alone can report it:
// no PCIe parent/link or NUMA node (sysfs fills those), link health left to
// the agent, link bandwidth from the generation.
func (fx *fixture) expected() ([]*ginv1.Gpu, []*ginv1.NvSwitch) {
	var gpus []*ginv1.Gpu
	links := map[string]uint32{}
	for _, g := range fx.inv.Gpus {
		g = proto.Clone(g).(*ginv1.Gpu)
		g.PcieParentId, g.PcieLink, g.NumaNode = "", nil, -1
		for _, l := range g.Nvlinks {
			l.Health = ginv1.LinkHealth_LINK_HEALTH_UNSPECIFIED
			l.BandwidthMbPerS = NVLinkBandwidthMBps(l.Version)
			if l.RemoteType == ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_SWITCH && l.RemotePciBusId != "" {
				links[l.RemotePciBusId]++
			}
		}
		gpus = append(gpus, g)
	}
	var sw []*ginv1.NvSwitch
	for _, s := range fx.inv.Nvswitches {
		sw = append(sw, &ginv1.NvSwitch{Id: s.PciBusId, PciBusId: s.PciBusId, LinkCount: links[s.PciBusId]})
	}
	sort.Slice(sw, func(a, b int) bool { return sw[a].PciBusId < sw[b].PciBusId })
	return gpus, sw
}

func noErrors(t *testing.T, errs []discovery.ItemError) {
	t.Helper()
	for _, e := range errs {
		t.Errorf("unexpected item error: %v", e)
	}
}

func equalMsgs[M proto.Message](t *testing.T, what string, got, want []M) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("%s[%d]:\n got: %s\nwant: %s", what, i, prototext.Format(got[i]), prototext.Format(want[i]))
		}
	}
}

func countLinks(gpus []*ginv1.Gpu) int {
	n := 0
	for _, g := range gpus {
		n += len(g.Nvlinks)
	}
	return n
}

// TestInventoryProfiles checks that the collector reproduces each simulated
// node's GPUs, NVLinks and NVSwitches from the mocked NVML calls.
func TestInventoryProfiles(t *testing.T) {
	for _, tc := range []struct {
		profile              string
		gpus, links, version int
		switches             []uint32 // link counts, by bus id
	}{
		{"dgx-h100", 8, 18, 4, []uint32{40, 40, 32, 32}},
		{"dgx-a100", 8, 12, 3, []uint32{16, 16, 16, 16, 16, 16}},
		{"hgx-b200", 8, 18, 5, []uint32{72, 72}},
		{"gb200-nvl72", 4, 18, 5, nil}, // switches off-node: no remote bus id
		{"rtx3090-nvlink-pair", 2, 4, 3, nil},
		{"pcie-8gpu", 8, 0, 0, nil},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			fx := newFixture(t, tc.profile)
			res, errs := fx.collector().Inventory(context.Background())
			noErrors(t, errs)
			wantGPUs, wantSw := fx.expected()
			equalMsgs(t, "GPUs", res.GPUs, wantGPUs)
			equalMsgs(t, "NVSwitches", res.NVSwitches, wantSw)
			if res.DriverVersion != "550.54.15" || res.CUDADriverVersion != "12.4" {
				t.Errorf("driver %q CUDA %q, want 550.54.15 12.4", res.DriverVersion, res.CUDADriverVersion)
			}
			if len(res.GPUs) != tc.gpus {
				t.Fatalf("%d GPUs, want %d", len(res.GPUs), tc.gpus)
			}
			for _, g := range res.GPUs {
				if len(g.Nvlinks) != tc.links {
					t.Errorf("GPU %d: %d links, want %d", g.Index, len(g.Nvlinks), tc.links)
				}
				if !sysfsBusID.MatchString(g.PciBusId) {
					t.Errorf("GPU %d: bus id %q not in sysfs form", g.Index, g.PciBusId)
				}
				for _, l := range g.Nvlinks {
					if int(l.Version) != tc.version || l.State != ginv1.LinkState_LINK_STATE_UP {
						t.Errorf("GPU %d link %d: version %d state %v", g.Index, l.Index, l.Version, l.State)
					}
				}
			}
			var counts []uint32
			for _, s := range res.NVSwitches {
				counts = append(counts, s.LinkCount)
			}
			if len(counts) != len(tc.switches) {
				t.Fatalf("switch link counts %v, want %v", counts, tc.switches)
			}
			for i := range counts {
				if counts[i] != tc.switches[i] {
					t.Errorf("switch link counts %v, want %v", counts, tc.switches)
				}
			}
		})
	}
}

// TestInventoryDGXH100Wiring: every GPU reaches every NVSwitch, all 18 links
// to switches, so every GPU pair is NV18 as nvidia-smi topo -m shows it.
func TestInventoryDGXH100Wiring(t *testing.T) {
	fx := newFixture(t, "dgx-h100")
	res, errs := fx.collector().Inventory(context.Background())
	noErrors(t, errs)
	all := map[string]bool{}
	for _, s := range res.NVSwitches {
		all[s.PciBusId] = true
	}
	for _, g := range res.GPUs {
		seen := map[string]bool{}
		for _, l := range g.Nvlinks {
			if l.RemoteType != ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_SWITCH || l.BandwidthMbPerS != 25000 {
				t.Errorf("GPU %d link %d: remote %v, %d MB/s", g.Index, l.Index, l.RemoteType, l.BandwidthMbPerS)
			}
			if !strings.HasPrefix(l.RemotePciBusId, "0000:") {
				t.Errorf("GPU %d link %d: remote bus id %q not normalised", g.Index, l.Index, l.RemotePciBusId)
			}
			seen[l.RemotePciBusId] = true
		}
		if len(g.Nvlinks) != 18 || len(seen) != len(all) || len(all) != 4 {
			t.Errorf("GPU %d: %d links to %d of %d switches, want 18 to 4 of 4", g.Index, len(g.Nvlinks), len(seen), len(all))
		}
	}
}

func TestInventoryLinkError(t *testing.T) {
	fx := newFixture(t, "dgx-h100")
	d := fx.devs[3]
	state := d.GetNvLinkStateFunc
	d.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
		if l == 7 {
			return 0, nvml.ERROR_UNKNOWN
		}
		return state(l)
	}
	res, errs := fx.collector().Inventory(context.Background())
	if len(errs) != 1 || errs[0].Item != "GPU 3 NVLink 7" || errs[0].Source != "nvml" || !errors.Is(errs[0], nvml.ERROR_UNKNOWN) {
		t.Fatalf("errors %v, want one for GPU 3 NVLink 7", errs)
	}
	if n := countLinks(res.GPUs); n != 143 {
		t.Errorf("%d links, want 143", n)
	}
	for _, l := range res.GPUs[3].Nvlinks {
		if l.Index == 7 {
			t.Errorf("failed link 7 reported")
		}
	}
	if len(res.NVSwitches) != 4 {
		t.Errorf("%d switches, want 4", len(res.NVSwitches))
	}
}

// TestInventoryRemoteError: a failing remote read keeps the link, reports it.
func TestInventoryRemoteError(t *testing.T) {
	fx := newFixture(t, "dgx-h100")
	fx.devs[5].GetNvLinkRemotePciInfoFunc = func(l int) (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{}, nvml.ERROR_UNKNOWN }
	res, errs := fx.collector().Inventory(context.Background())
	if len(errs) != 18 || errs[0].Item != "GPU 5 NVLink 0" {
		t.Fatalf("errors %v, want 18 for GPU 5", errs)
	}
	if n := countLinks(res.GPUs); n != 144 {
		t.Errorf("%d links, want 144", n)
	}
}

func TestInventoryGPUError(t *testing.T) {
	fx := newFixture(t, "dgx-h100")
	fx.devs[2].GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }
	res, errs := fx.collector().Inventory(context.Background())
	if len(errs) != 1 || errs[0].Item != "GPU 2" || !errors.Is(errs[0], nvml.ERROR_GPU_IS_LOST) {
		t.Fatalf("errors %v, want one for GPU 2", errs)
	}
	if len(res.GPUs) != 7 || countLinks(res.GPUs) != 7*18 {
		t.Errorf("%d GPUs %d links, want 7 and 126", len(res.GPUs), countLinks(res.GPUs))
	}
}

// TestInventoryLinkCountFallback: without FI_DEV_NVLINK_LINK_COUNT the links
// are probed until NOT_SUPPORTED or INVALID_ARGUMENT.
func TestInventoryLinkCountFallback(t *testing.T) {
	for _, tc := range []struct {
		profile string
		stop    nvml.Return
		links   int
	}{
		{"dgx-h100", nvml.ERROR_INVALID_ARGUMENT, 18},
		{"dgx-a100", nvml.ERROR_NOT_SUPPORTED, 12},
		{"pcie-8gpu", nvml.ERROR_NOT_SUPPORTED, 0},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			fx := newFixture(t, tc.profile)
			for i, d := range fx.devs {
				delete(fx.fields[i], fieldKey{nvml.FI_DEV_NVLINK_LINK_COUNT, 0})
				state := d.GetNvLinkStateFunc
				d.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
					if l >= tc.links {
						return 0, tc.stop
					}
					return state(l)
				}
			}
			res, errs := fx.collector().Inventory(context.Background())
			noErrors(t, errs)
			wantGPUs, _ := fx.expected()
			equalMsgs(t, "GPUs", res.GPUs, wantGPUs)
			for i, d := range fx.devs {
				if n := len(d.GetNvLinkStateCalls()); n != tc.links+1 {
					t.Errorf("GPU %d: %d GetNvLinkState calls, want %d", i, n, tc.links+1)
				}
			}
		})
	}
}

// TestInventoryMissingSymbols: functions the driver lacks are never called
// (their mock functions are nil here: a call would panic).
func TestInventoryMissingSymbols(t *testing.T) {
	fx := newFixture(t, "gb200-nvl72")
	for _, s := range []string{"nvmlDeviceGetNumaNodeId", "nvmlDeviceGetArchitecture", "nvmlDeviceGetNvLinkRemoteDeviceType",
		"nvmlDeviceGetGpuFabricInfo_v4", "nvmlDeviceGetGpuFabricInfoV", "nvmlDeviceGetGpuFabricInfo"} {
		fx.missing[s] = true
	}
	for _, d := range fx.devs {
		d.GetNumaNodeIdFunc, d.GetArchitectureFunc, d.GetNvLinkRemoteDeviceTypeFunc = nil, nil, nil
		d.GetGpuFabricInfo_v4Func, d.GetGpuFabricInfoFunc = nil, nil
	}
	res, errs := fx.collector().Inventory(context.Background())
	noErrors(t, errs)
	for _, g := range res.GPUs {
		if g.Architecture != "" || g.Fabric != nil || g.NumaNode != -1 || len(g.Nvlinks) != 18 {
			t.Errorf("GPU %d: arch %q fabric %v numa %d links %d", g.Index, g.Architecture, g.Fabric, g.NumaNode, len(g.Nvlinks))
		}
		for _, l := range g.Nvlinks {
			if l.RemoteType != ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_UNSPECIFIED {
				t.Errorf("GPU %d link %d: remote type %v", g.Index, l.Index, l.RemoteType)
			}
		}
	}
}

func TestInventoryNumaNode(t *testing.T) {
	fx := newFixture(t, "gb200-nvl72")
	for i, d := range fx.devs {
		d.GetNumaNodeIdFunc = func() (int, nvml.Return) { return 2 + i, nvml.SUCCESS }
	}
	res, errs := fx.collector().Inventory(context.Background())
	noErrors(t, errs)
	for i, g := range res.GPUs {
		if g.NumaNode != int32(2+i) {
			t.Errorf("GPU %d: NUMA node %d, want %d", i, g.NumaNode, 2+i)
		}
	}
}

// TestInventoryGeForce: GetSerial NOT_SUPPORTED gives an empty serial and no
// error; the bridge's links go GPU to GPU.
func TestInventoryGeForce(t *testing.T) {
	fx := newFixture(t, "rtx3090-nvlink-pair")
	res, errs := fx.collector().Inventory(context.Background())
	noErrors(t, errs)
	if len(fx.devs[0].GetSerialCalls()) != 1 {
		t.Errorf("GetSerial not called")
	}
	for i, g := range res.GPUs {
		peer := res.GPUs[1-i].PciBusId
		if g.Serial != "" || g.Fabric != nil {
			t.Errorf("GPU %d: serial %q fabric %v", i, g.Serial, g.Fabric)
		}
		for _, l := range g.Nvlinks {
			if l.RemoteType != ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_GPU || l.RemotePciBusId != peer {
				t.Errorf("GPU %d link %d: remote %v %q, want GPU %q", i, l.Index, l.RemoteType, l.RemotePciBusId, peer)
			}
		}
	}
	if len(res.NVSwitches) != 0 {
		t.Errorf("switches %v", res.NVSwitches)
	}
}

func TestInventoryFabric(t *testing.T) {
	const cluster = "6b6f1c0e-9a39-4c4e-8d2b-3a6c2f1e9d70"
	for _, tc := range []struct {
		name    string
		missing []string
		mask    uint32
	}{
		{"v4", nil, 0x40},
		{"v1", []string{"nvmlDeviceGetGpuFabricInfo_v4"}, 0}, // no health mask in v1
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t, "gb200-nvl72")
			for _, g := range fx.inv.Gpus {
				g.Fabric.ClusterUuid, g.Fabric.CliqueId, g.Fabric.HealthMask = cluster, 32766, 0x40
			}
			for _, s := range tc.missing {
				fx.missing[s] = true
			}
			res, errs := fx.collector().Inventory(context.Background())
			noErrors(t, errs)
			want := &ginv1.MnnvlFabric{ClusterUuid: cluster, CliqueId: 32766,
				State: ginv1.FabricState_FABRIC_STATE_COMPLETED, HealthMask: tc.mask}
			for _, g := range res.GPUs {
				if !proto.Equal(g.Fabric, want) {
					t.Errorf("GPU %d fabric %v, want %v", g.Index, g.Fabric, want)
				}
			}
		})
	}
	t.Run("not-supported", func(t *testing.T) {
		fx := newFixture(t, "dgx-h100") // no MNNVL: NOT_SUPPORTED
		res, errs := fx.collector().Inventory(context.Background())
		noErrors(t, errs)
		for _, g := range res.GPUs {
			if g.Fabric != nil {
				t.Errorf("GPU %d fabric %v", g.Index, g.Fabric)
			}
		}
	})
	t.Run("state-not-supported", func(t *testing.T) {
		fx := newFixture(t, "dgx-h100")
		for _, d := range fx.devs {
			d.GetGpuFabricInfo_v4Func = func() (nvml.GpuFabricInfo_v4, nvml.Return) {
				return nvml.GpuFabricInfo_v4{State: nvml.GPU_FABRIC_STATE_NOT_SUPPORTED}, nvml.SUCCESS
			}
		}
		res, _ := fx.collector().Inventory(context.Background())
		if res.GPUs[0].Fabric != nil {
			t.Errorf("fabric %v", res.GPUs[0].Fabric)
		}
	})
}

func TestInventoryCancelled(t *testing.T) {
	fx := newFixture(t, "dgx-h100")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, errs := fx.collector().Inventory(ctx)
	if len(res.GPUs) != 0 || len(errs) != 1 || !errors.Is(errs[0], context.Canceled) {
		t.Errorf("GPUs %d errors %v", len(res.GPUs), errs)
	}
}

func TestInit(t *testing.T) {
	for _, tc := range []struct {
		ret     nvml.Return
		noDrv   bool
		wantNil bool
	}{
		{nvml.SUCCESS, false, true},
		{nvml.ERROR_LIBRARY_NOT_FOUND, true, false},
		{nvml.ERROR_DRIVER_NOT_LOADED, false, false},
	} {
		lib := &mock.Interface{InitFunc: func() nvml.Return { return tc.ret }}
		err := initLib(lib)
		if (err == nil) != tc.wantNil || errors.Is(err, ErrNoDriver) != tc.noDrv {
			t.Errorf("Init %v: error %v", tc.ret, err)
		}
		if err != nil && !tc.noDrv && !errors.Is(err, tc.ret) {
			t.Errorf("Init %v: error %v does not wrap it", tc.ret, err)
		}
	}
	if ErrNoDriver.Error() != "no NVIDIA driver on this node: libnvidia-ml.so.1 not found" {
		t.Errorf("ErrNoDriver: %q", ErrNoDriver)
	}
}

// TestNewRealLibrary runs the real loader: on a machine without the NVIDIA
// driver it must return ErrNoDriver, not crash.
func TestNewRealLibrary(t *testing.T) {
	c, err := New()
	if err == nil {
		t.Logf("NVML present on this machine")
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		return
	}
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("New: %v, want ErrNoDriver", err)
	}
}

func TestClose(t *testing.T) {
	fx := newFixture(t, "dgx-h100")
	c := fx.collector()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if n := len(fx.lib.ShutdownCalls()); n != 1 {
		t.Errorf("%d Shutdown calls, want 1", n)
	}
	fx.lib.ShutdownFunc = func() nvml.Return { return nvml.ERROR_UNINITIALIZED }
	if err := fx.collector().Close(); !errors.Is(err, nvml.ERROR_UNINITIALIZED) {
		t.Errorf("Close: %v", err)
	}
}

func TestCounters(t *testing.T) {
	fx := newFixture(t, "dgx-h100")
	links, samples, errs := fx.collector().Counters(context.Background())
	noErrors(t, errs)
	if len(links) != 144 || len(samples) != 8 {
		t.Fatalf("%d links %d samples, want 144 and 8", len(links), len(samples))
	}
	for i, s := range samples {
		g := fx.inv.Gpus[i]
		if s.Index != i || s.UUID != g.Uuid || s.PCIBusID != g.PciBusId || s.Model != g.Model ||
			s.TemperatureC == nil || *s.TemperatureC != uint32(30+i) {
			t.Errorf("sample %d: %+v", i, s)
		}
	}
	for _, lc := range links {
		i, l := lc.GPUIndex, lc.Link
		if lc.UUID != fx.inv.Gpus[i].Uuid || lc.PCIBusID != fx.inv.Gpus[i].PciBusId {
			t.Errorf("GPU %d link %d: ids %q %q", i, l, lc.UUID, lc.PCIBusID)
		}
		for _, c := range []struct {
			got  *uint64
			want uint64
		}{
			{lc.CRCFlit, errCounter(i, l, nvml.NVLINK_ERROR_DL_CRC_FLIT)},
			{lc.CRCData, errCounter(i, l, nvml.NVLINK_ERROR_DL_CRC_DATA)},
			{lc.Replay, errCounter(i, l, nvml.NVLINK_ERROR_DL_REPLAY)},
			{lc.Recovery, errCounter(i, l, nvml.NVLINK_ERROR_DL_RECOVERY)},
			{lc.TxBytes, txKiB(i, l) * 1024},
			{lc.RxBytes, rxKiB(i, l) * 1024},
		} {
			if c.got == nil || *c.got != c.want {
				t.Errorf("GPU %d link %d: counter %v, want %d", i, l, c.got, c.want)
			}
		}
		if lc.SymbolErrors != nil || lc.EffectiveErrors != nil {
			t.Errorf("GPU %d link %d: Blackwell counters on Hopper", i, l)
		}
	}
	// One batched field-value call per GPU for the counters (plus the link count).
	if n := len(fx.devs[0].GetFieldValuesCalls()); n != 2 {
		t.Errorf("%d GetFieldValues calls, want 2", n)
	}
}

func TestCountersUnsupported(t *testing.T) {
	fx := newFixture(t, "dgx-h100")
	for _, d := range fx.devs {
		d.GetNvLinkErrorCounterFunc = func(int, nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
		fieldValues := d.GetFieldValuesFunc
		d.GetFieldValuesFunc = func(v []nvml.FieldValue) nvml.Return {
			if len(v) == 1 && v[0].FieldId == nvml.FI_DEV_NVLINK_LINK_COUNT {
				return fieldValues(v)
			}
			return nvml.ERROR_NOT_SUPPORTED
		}
		d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	}
	links, samples, errs := fx.collector().Counters(context.Background())
	noErrors(t, errs)
	if len(links) != 144 {
		t.Fatalf("%d links", len(links))
	}
	for _, lc := range links {
		if lc.CRCFlit != nil || lc.CRCData != nil || lc.Replay != nil || lc.Recovery != nil ||
			lc.SymbolErrors != nil || lc.EffectiveErrors != nil || lc.TxBytes != nil || lc.RxBytes != nil {
			t.Errorf("GPU %d link %d: %+v, want all nil", lc.GPUIndex, lc.Link, lc)
		}
	}
	for _, s := range samples {
		if s.TemperatureC != nil {
			t.Errorf("GPU %d temperature %d, want nil", s.Index, *s.TemperatureC)
		}
	}
}

// TestCountersBlackwell: the DL error counters are unsupported on Blackwell;
// symbol/effective errors and link recovery come from field values.
func TestCountersBlackwell(t *testing.T) {
	fx := newFixture(t, "hgx-b200")
	links, _, errs := fx.collector().Counters(context.Background())
	noErrors(t, errs)
	if len(links) != 144 {
		t.Fatalf("%d links", len(links))
	}
	for _, lc := range links {
		l := uint64(lc.Link)
		if lc.CRCFlit != nil || lc.CRCData != nil || lc.Replay != nil {
			t.Errorf("GPU %d link %d: DL counters on Blackwell", lc.GPUIndex, lc.Link)
		}
		for _, c := range []struct {
			got  *uint64
			want uint64
		}{{lc.SymbolErrors, l + 1}, {lc.EffectiveErrors, l + 2}, {lc.Recovery, l + 3}} {
			if c.got == nil || *c.got != c.want {
				t.Errorf("GPU %d link %d: counter %v, want %d", lc.GPUIndex, lc.Link, c.got, c.want)
			}
		}
		if lc.TxBytes == nil {
			t.Errorf("GPU %d link %d: no throughput", lc.GPUIndex, lc.Link)
		}
	}
}

func TestCountersErrors(t *testing.T) {
	fx := newFixture(t, "dgx-h100")
	counter := fx.devs[1].GetNvLinkErrorCounterFunc
	fx.devs[1].GetNvLinkErrorCounterFunc = func(l int, c nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
		if l == 2 && c == nvml.NVLINK_ERROR_DL_REPLAY {
			return 0, nvml.ERROR_UNKNOWN
		}
		return counter(l, c)
	}
	fieldValues := fx.devs[4].GetFieldValuesFunc
	fx.devs[4].GetFieldValuesFunc = func(v []nvml.FieldValue) nvml.Return {
		ret := fieldValues(v)
		for k := range v {
			if v[k].FieldId == nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX && v[k].ScopeId == 9 {
				v[k].NvmlReturn = uint32(nvml.ERROR_GPU_IS_LOST)
			}
		}
		return ret
	}
	links, _, errs := fx.collector().Counters(context.Background())
	if len(errs) != 2 || errs[0].Item != "GPU 1 NVLink 2" || errs[1].Item != "GPU 4 NVLink 9" {
		t.Fatalf("errors %v", errs)
	}
	if len(links) != 144 {
		t.Fatalf("%d links", len(links))
	}
	for _, lc := range links {
		if lc.GPUIndex == 1 && lc.Link == 2 && (lc.Replay != nil || lc.CRCFlit == nil) {
			t.Errorf("GPU 1 link 2: %+v", lc)
		}
		if lc.GPUIndex == 4 && lc.Link == 9 && (lc.RxBytes != nil || lc.TxBytes == nil) {
			t.Errorf("GPU 4 link 9: %+v", lc)
		}
	}
}

func TestFieldUint(t *testing.T) {
	val := func(typ nvml.ValueType, b ...byte) nvml.FieldValue {
		f := nvml.FieldValue{ValueType: uint32(typ)}
		copy(f.Value[:], b)
		return f
	}
	for _, tc := range []struct {
		f    nvml.FieldValue
		want uint64
		ok   bool
	}{
		{val(nvml.VALUE_TYPE_UNSIGNED_INT, 0x12, 0, 0, 0, 0xff), 0x12, true},
		{val(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, 1, 0, 0, 0, 0, 0, 0, 1), 1<<56 + 1, true},
		{val(nvml.VALUE_TYPE_UNSIGNED_LONG, 2), 2, true},
		{val(nvml.VALUE_TYPE_SIGNED_LONG_LONG, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), 0, false},
		{val(nvml.VALUE_TYPE_SIGNED_INT, 5), 5, true},
		{val(nvml.VALUE_TYPE_SIGNED_INT, 0xff, 0xff, 0xff, 0xff), 0, false},
		{val(nvml.VALUE_TYPE_UNSIGNED_SHORT, 3, 1, 9), 0x103, true},
		{val(nvml.VALUE_TYPE_DOUBLE, 0, 0, 0, 0, 0, 0, 0x45, 0x40), 42, true}, // 42.0
		{val(nvml.VALUE_TYPE_COUNT, 1), 0, false},
	} {
		got, ok := fieldUint(tc.f)
		if got != tc.want || ok != tc.ok {
			t.Errorf("fieldUint(type %d %x) = %d %v, want %d %v", tc.f.ValueType, tc.f.Value, got, ok, tc.want, tc.ok)
		}
	}
}

func TestP2P(t *testing.T) {
	for _, tc := range []struct {
		profile string
		pairs   int
		nvlink  bool
	}{
		{"dgx-h100", 28, true},
		{"rtx3090-nvlink-pair", 1, true},
		{"pcie-8gpu", 28, false},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			fx := newFixture(t, tc.profile)
			pairs, errs := fx.collector().P2P(context.Background())
			noErrors(t, errs)
			if len(pairs) != tc.pairs {
				t.Fatalf("%d pairs, want %d", len(pairs), tc.pairs)
			}
			for _, p := range pairs {
				if p.A >= p.B || p.NVLink != tc.nvlink || !p.Read {
					t.Errorf("pair %+v", p)
				}
				ga, gb := fx.inv.Gpus[p.A], fx.inv.Gpus[p.B]
				want := "SYS"
				if ga.PcieParentId == gb.PcieParentId {
					want = "PIX"
				} else if ga.NumaNode == gb.NumaNode {
					want = "NODE"
				}
				if p.Level != want {
					t.Errorf("pair %d-%d: level %q, want %q", p.A, p.B, p.Level, want)
				}
			}
		})
	}
	t.Run("error", func(t *testing.T) {
		fx := newFixture(t, "dgx-h100")
		fx.devs[0].GetTopologyCommonAncestorFunc = func(nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
			return 0, nvml.ERROR_UNKNOWN
		}
		pairs, errs := fx.collector().P2P(context.Background())
		if len(pairs) != 28 || len(errs) != 7 || errs[0].Item != "GPU 0 GPU 1" {
			t.Errorf("%d pairs, errors %v", len(pairs), errs)
		}
	})
}

// TestHealthAndXIDs: VBIOS, the throttle reasons masked to the faults,
// ECC and row remapping come from NVML; XIDs queued on the event set are
// kept per GPU, once per code, across collections, and the devices are
// registered once.
func TestHealthAndXIDs(t *testing.T) {
	fx := newFixture(t, "dgx-h100")
	g0, g3 := fx.inv.Gpus[0], fx.inv.Gpus[3]
	g0.VbiosVersion = "96.00.89.00.01"
	g3.Health = &ginv1.GpuHealth{ClockEventReasons: 0x40, EccUncorrectedVolatile: 3, RemappedRowsUncorrectable: 2, RowRemapPending: true}
	c := fx.collector()
	at := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return at }
	fx.queue = []nvml.EventData{
		{Device: fx.devs[3], EventType: nvml.EventTypeXidCriticalError, EventData: 79},
		{Device: fx.devs[3], EventType: nvml.EventTypeXidCriticalError, EventData: 79},
		{Device: fx.devs[5], EventType: nvml.EventTypeXidCriticalError, EventData: 13},
		{Device: fx.devs[5], EventType: nvml.EventTypeSingleBitEccError, EventData: 0},
	}
	res, errs := c.Inventory(context.Background())
	noErrors(t, errs)
	if got := res.GPUs[0].GetVbiosVersion(); got != "96.00.89.00.01" {
		t.Errorf("GPU0 VBIOS %q", got)
	}
	want3 := &ginv1.GpuHealth{ClockEventReasons: 0x40, EccUncorrectedVolatile: 3, RemappedRowsUncorrectable: 2, RowRemapPending: true,
		Xids: []*ginv1.XidEvent{{Xid: 79, FirstSeen: timestamppb.New(at)}}}
	if !proto.Equal(res.GPUs[3].GetHealth(), want3) {
		t.Errorf("GPU3 health:\n got %v\nwant %v", res.GPUs[3].GetHealth(), want3)
	}
	if x := res.GPUs[5].GetHealth().GetXids(); len(x) != 1 || x[0].GetXid() != 13 {
		t.Errorf("GPU5 XIDs %v, want [13]", x)
	}
	// A later collection: no new events, the XIDs stay; no re-registration.
	later := at.Add(time.Hour)
	c.now = func() time.Time { return later }
	fx.queue = []nvml.EventData{{Device: fx.devs[3], EventType: nvml.EventTypeXidCriticalError, EventData: 48}}
	res, errs = c.Inventory(context.Background())
	noErrors(t, errs)
	x := res.GPUs[3].GetHealth().GetXids()
	if len(x) != 2 || x[0].GetXid() != 79 || !x[0].GetFirstSeen().AsTime().Equal(at) || x[1].GetXid() != 48 || !x[1].GetFirstSeen().AsTime().Equal(later) {
		t.Errorf("GPU3 XIDs after the second collection: %v", x)
	}
	for i := range fx.devs {
		if fx.registered[i] != 1 {
			t.Errorf("GPU%d registered %d times, want once", i, fx.registered[i])
		}
	}
	// A storm is bounded per GPU.
	for k := range 2 * MaxXIDsPerGPU {
		fx.queue = append(fx.queue, nvml.EventData{Device: fx.devs[1], EventType: nvml.EventTypeXidCriticalError, EventData: uint64(100 + k)})
	}
	res, _ = c.Inventory(context.Background())
	if n := len(res.GPUs[1].GetHealth().GetXids()); n != MaxXIDsPerGPU {
		t.Errorf("GPU1 kept %d XIDs, want %d", n, MaxXIDsPerGPU)
	}
}

// TestXIDsWithoutEvents: a driver whose event set cannot be created still
// gives the inventory, once without error for NOT_SUPPORTED.
func TestXIDsWithoutEvents(t *testing.T) {
	fx := newFixture(t, "dgx-h100")
	fx.lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	c := fx.collector()
	for range 2 {
		res, errs := c.Inventory(context.Background())
		noErrors(t, errs)
		if len(res.GPUs) != 8 {
			t.Fatalf("%d GPUs", len(res.GPUs))
		}
	}
}
