package agentmetrics

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/agent"
	"github.com/gin-topology/gin/internal/discovery"
	"github.com/gin-topology/gin/internal/discovery/sim"
)

type fakeState struct {
	st  agent.Status
	inv *ginv1.NodeInventory
}

func (f fakeState) Status() agent.Status            { return f.st }
func (f fakeState) Inventory() *ginv1.NodeInventory { return f.inv }

type fakeCounters discovery.Counters

func (f fakeCounters) Counters(context.Context) discovery.Counters { return discovery.Counters(f) }

func u64(v uint64) *uint64 { return &v }
func u32(v uint32) *uint32 { return &v }

func simInventory(t *testing.T) *ginv1.NodeInventory {
	t.Helper()
	src, err := sim.NewSource("dgx-h100", sim.NodeOptions{NodeName: "node001", Cluster: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.SetNVLinkState(2, 5, false); err != nil {
		t.Fatal(err)
	}
	inv, err := src.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	inv.QpSummaries = []*ginv1.QpSummary{{Device: "mlx5_0", Port: 1, Type: "RC", State: "RTS", Count: 12}}
	return inv
}

func TestCollectorLintsClean(t *testing.T) {
	inv := simInventory(t)
	c := New("node001", "v1.2.3", fakeState{st: agent.Status{Connected: true, Master: "m1:5000", AckedGeneration: 3}, inv: inv},
		fakeCounters{
			NVLinks: []discovery.NVLinkCounters{{GPUIndex: 0, UUID: "GPU-x", PCIBusID: "0000:1b:00.0", Link: 0, CRCFlit: u64(3), Replay: u64(1), TxBytes: u64(1 << 30)}},
			GPUs:    []discovery.GPUSample{{Index: 0, UUID: "GPU-x", PCIBusID: "0000:1b:00.0", Model: "H100", TemperatureC: u32(41)}},
			Ports:   []discovery.PortCounters{{Device: "mlx5_0", Port: 1, Counters: map[string]uint64{"symbol_error": 2, "port_rcv_data": 4096}}},
			Errors:  []discovery.ItemError{{Source: "nvml", Item: "GPU 1 NVLink 3", Err: errors.New("unknown error")}},
		})
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestCollectorValues(t *testing.T) {
	inv := simInventory(t)
	c := New("node001", "v1", fakeState{st: agent.Status{Connected: false, Reconnects: 4}, inv: inv},
		fakeCounters{Errors: []discovery.ItemError{{Source: "sysfs", Item: "mlx5_3 port 1 rate", Err: errors.New("bad")}}})
	tests := []struct {
		name   string
		metric string
		want   string
	}{
		{"disconnected", "gin_agent_master_connected", `
# HELP gin_agent_master_connected 1 when the agent holds a session with a master, else 0.
# TYPE gin_agent_master_connected gauge
gin_agent_master_connected{hostname="node001",master=""} 0
`},
		{"reconnects", "gin_agent_master_reconnects_total", `
# HELP gin_agent_master_reconnects_total Session attempts after the first one.
# TYPE gin_agent_master_reconnects_total counter
gin_agent_master_reconnects_total{hostname="node001"} 4
`},
		{"item errors by source", "gin_agent_scrape_item_errors", `
# HELP gin_agent_scrape_item_errors Items (links, ports, files) that could not be read in this scrape, by collector.
# TYPE gin_agent_scrape_item_errors gauge
gin_agent_scrape_item_errors{hostname="node001",source="sysfs"} 1
`},
		{"qps", "gin_rdma_qps", `
# HELP gin_rdma_qps RDMA queue pairs by type and state.
# TYPE gin_rdma_qps gauge
gin_rdma_qps{device="mlx5_0",hostname="node001",port="1",state="RTS",type="RC"} 12
`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := testutil.CollectAndCompare(c, strings.NewReader(tc.want), tc.metric); err != nil {
				t.Fatal(err)
			}
		})
	}
	// One NVLink is down: 143 of 144 report 1.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	up, down := 0, 0
	for _, mf := range mfs {
		if mf.GetName() != "gin_nvlink_up" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetGauge().GetValue() == 1 {
				up++
			} else {
				down++
			}
		}
	}
	if up != 143 || down != 1 {
		t.Fatalf("gin_nvlink_up: %d up, %d down; want 143, 1", up, down)
	}
}
