package agentmetrics

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/agent"
	"github.com/gin-topology/gin/internal/discovery"
)

// AgentState is what the collector reads from the running agent.
type AgentState interface {
	Status() agent.Status
	Inventory() *ginv1.NodeInventory
}

// CounterSource reads the node's counters at scrape time.
type CounterSource interface {
	Counters(ctx context.Context) discovery.Counters
}

// ScrapeTimeout bounds how long one scrape may read counters.
const ScrapeTimeout = 5 * time.Second

// Collector implements prometheus.Collector.
type Collector struct {
	hostname string
	version  string
	state    AgentState
	counters CounterSource

	buildInfo, connected, reconnects, generation, sent, collections, collectErrors,
	scrapeErrors *prometheus.Desc
	gpuInfo, gpuTemp                                            *prometheus.Desc
	nvlinkState, nvlinkHealth, nvlinkErrors, nvlinkTx, nvlinkRx *prometheus.Desc
	fabricInfo                                                  *prometheus.Desc
	portInfo, portState, portPhysState, portRate, portHealth    *prometheus.Desc
	portCounter                                                 *prometheus.Desc
	qps                                                         *prometheus.Desc
}

// New returns a collector for one agent. counters may be nil (no counter
// source: only inventory-derived metrics are reported).
func New(hostname, version string, state AgentState, counters CounterSource) *Collector {
	gpuLabels := []string{"gpu", "UUID", "pci_bus_id", "model_name", "hostname"}
	linkLabels := []string{"gpu", "UUID", "pci_bus_id", "nvlink", "hostname"}
	portLabels := []string{"device", "port", "hostname"}
	d := prometheus.NewDesc
	return &Collector{
		hostname: hostname, version: version, state: state, counters: counters,
		buildInfo:     d("gin_agent_build_info", "gin-agent build; always 1.", []string{"version", "hostname"}, nil),
		connected:     d("gin_agent_master_connected", "1 when the agent holds a session with a master, else 0.", []string{"master", "hostname"}, nil),
		reconnects:    d("gin_agent_master_reconnects_total", "Session attempts after the first one.", []string{"hostname"}, nil),
		generation:    d("gin_agent_inventory_generation", "Inventory generation last acknowledged by a master.", []string{"hostname"}, nil),
		sent:          d("gin_agent_inventories_sent_total", "Inventory updates sent to masters (full inventories and deltas).", []string{"hostname"}, nil),
		collections:   d("gin_agent_collections_total", "Hardware collections run.", []string{"hostname"}, nil),
		collectErrors: d("gin_agent_collection_errors_total", "Hardware collections that failed as a whole.", []string{"hostname"}, nil),
		scrapeErrors:  d("gin_agent_scrape_item_errors", "Items (links, ports, files) that could not be read in this scrape, by collector.", []string{"source", "hostname"}, nil),
		gpuInfo:       d("gin_gpu_info", "GPU identity; always 1.", append(gpuLabels, "numa_node", "compute_capability"), nil),
		gpuTemp:       d("gin_gpu_temperature_celsius", "GPU temperature.", gpuLabels, nil),
		nvlinkState:   d("gin_nvlink_up", "1 when the NVLink is up, 0 when it is down.", append(linkLabels, "version", "remote_type"), nil),
		nvlinkHealth:  d("gin_nvlink_degraded", "1 when the NVLink's error rate crossed the threshold.", linkLabels, nil),
		nvlinkErrors:  d("gin_nvlink_errors_total", "NVLink error counters by type.", append(linkLabels, "type"), nil),
		nvlinkTx:      d("gin_nvlink_transmit_bytes_total", "Bytes sent over the NVLink.", linkLabels, nil),
		nvlinkRx:      d("gin_nvlink_receive_bytes_total", "Bytes received over the NVLink.", linkLabels, nil),
		fabricInfo:    d("gin_gpu_fabric_info", "Multi-node NVLink fabric membership; always 1.", []string{"gpu", "UUID", "cluster_uuid", "clique_id", "state", "hostname"}, nil),
		portInfo:      d("gin_infiniband_port_info", "HCA port identity; always 1.", append(portLabels, "node_guid", "port_guid", "link_layer", "lid", "sm_lid", "netdev", "role"), nil),
		portState:     d("gin_infiniband_state_id", "Port logical state (4 = ACTIVE), as node_exporter's node_infiniband_state_id.", portLabels, nil),
		portPhysState: d("gin_infiniband_physical_state_id", "Port physical state (5 = LinkUp).", portLabels, nil),
		portRate:      d("gin_infiniband_rate_bytes_per_second", "Port signalling rate.", portLabels, nil),
		portHealth:    d("gin_infiniband_port_degraded", "1 when the port's error rate crossed the threshold.", portLabels, nil),
		portCounter:   d("gin_infiniband_port_stat_total", "Port counters, labelled with the kernel's file name (port_rcv_data and port_xmit_data in bytes).", append(portLabels, "stat"), nil),
		qps:           d("gin_rdma_qps", "RDMA queue pairs by type and state.", []string{"device", "port", "type", "state", "hostname"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.buildInfo, c.connected, c.reconnects, c.generation, c.sent, c.collections,
		c.collectErrors, c.scrapeErrors, c.gpuInfo, c.gpuTemp, c.nvlinkState, c.nvlinkHealth, c.nvlinkErrors, c.nvlinkTx,
		c.nvlinkRx, c.fabricInfo, c.portInfo, c.portState, c.portPhysState, c.portRate, c.portHealth, c.portCounter, c.qps} {
		ch <- d
	}
}

func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func counter(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Collect implements prometheus.Collector: it reads the agent's state and,
// within ScrapeTimeout, the node's counters.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	h := c.hostname
	st := c.state.Status()
	ch <- gauge(c.buildInfo, 1, c.version, h)
	ch <- gauge(c.connected, b2f(st.Connected), st.Master, h)
	ch <- counter(c.reconnects, float64(st.Reconnects), h)
	ch <- gauge(c.generation, float64(st.AckedGeneration), h)
	ch <- counter(c.sent, float64(st.InventoriesSent), h)
	ch <- counter(c.collections, float64(st.Collections), h)
	ch <- counter(c.collectErrors, float64(st.CollectErrors), h)

	inv := c.state.Inventory()
	gpuByIndex := map[int]*ginv1.Gpu{}
	for _, g := range inv.GetGpus() {
		gpuByIndex[int(g.GetIndex())] = g
		idx := strconv.Itoa(int(g.GetIndex()))
		ch <- gauge(c.gpuInfo, 1, idx, g.GetUuid(), g.GetPciBusId(), g.GetModel(), h, strconv.Itoa(int(g.GetNumaNode())),
			strconv.Itoa(int(g.GetComputeCapabilityMajor()))+"."+strconv.Itoa(int(g.GetComputeCapabilityMinor())))
		for _, l := range g.GetNvlinks() {
			ll := []string{idx, g.GetUuid(), g.GetPciBusId(), strconv.Itoa(int(l.GetIndex())), h}
			ch <- gauge(c.nvlinkState, b2f(l.GetState() == ginv1.LinkState_LINK_STATE_UP),
				append(ll, strconv.Itoa(int(l.GetVersion())), remoteType(l.GetRemoteType()))...)
			ch <- gauge(c.nvlinkHealth, b2f(l.GetHealth() == ginv1.LinkHealth_LINK_HEALTH_DEGRADED || l.GetHealth() == ginv1.LinkHealth_LINK_HEALTH_FAILED), ll...)
		}
		if f := g.GetFabric(); f != nil {
			ch <- gauge(c.fabricInfo, 1, idx, g.GetUuid(), f.GetClusterUuid(), strconv.Itoa(int(f.GetCliqueId())),
				strings.ToLower(strings.TrimPrefix(f.GetState().String(), "FABRIC_STATE_")), h)
		}
	}
	for _, hca := range inv.GetHcas() {
		for _, p := range hca.GetPorts() {
			pl := []string{hca.GetName(), strconv.Itoa(int(p.GetPort())), h}
			ch <- gauge(c.portInfo, 1, append(pl, hca.GetNodeGuid(), p.GetPortGuid(),
				strings.ToLower(strings.TrimPrefix(p.GetLinkLayer().String(), "LINK_LAYER_")),
				strconv.Itoa(int(p.GetLid())), strconv.Itoa(int(p.GetSmLid())), p.GetNetdev().GetName(),
				strings.ToLower(strings.TrimPrefix(hca.GetRole().String(), "HCA_ROLE_")))...)
			ch <- gauge(c.portState, float64(p.GetState()), pl...)
			ch <- gauge(c.portPhysState, float64(p.GetPhysState()), pl...)
			ch <- gauge(c.portRate, float64(p.GetRateGbps())*125_000_000, pl...)
			ch <- gauge(c.portHealth, b2f(p.GetHealth() == ginv1.LinkHealth_LINK_HEALTH_DEGRADED || p.GetHealth() == ginv1.LinkHealth_LINK_HEALTH_FAILED), pl...)
		}
	}
	for _, q := range inv.GetQpSummaries() {
		ch <- gauge(c.qps, float64(q.GetCount()), q.GetDevice(), strconv.Itoa(int(q.GetPort())), q.GetType(), q.GetState(), h)
	}

	if c.counters == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ScrapeTimeout)
	defer cancel()
	cs := c.counters.Counters(ctx)
	for _, g := range cs.GPUs {
		if g.TemperatureC != nil {
			ch <- gauge(c.gpuTemp, float64(*g.TemperatureC), strconv.Itoa(g.Index), g.UUID, g.PCIBusID, g.Model, h)
		}
	}
	for _, l := range cs.NVLinks {
		ll := []string{strconv.Itoa(l.GPUIndex), l.UUID, l.PCIBusID, strconv.Itoa(l.Link), h}
		for _, e := range []struct {
			typ string
			v   *uint64
		}{{"crc_flit", l.CRCFlit}, {"crc_data", l.CRCData}, {"replay", l.Replay}, {"recovery", l.Recovery}, {"symbol", l.SymbolErrors}, {"effective", l.EffectiveErrors}} {
			if e.v != nil {
				ch <- counter(c.nvlinkErrors, float64(*e.v), append(ll, e.typ)...)
			}
		}
		if l.TxBytes != nil {
			ch <- counter(c.nvlinkTx, float64(*l.TxBytes), ll...)
		}
		if l.RxBytes != nil {
			ch <- counter(c.nvlinkRx, float64(*l.RxBytes), ll...)
		}
	}
	for _, p := range cs.Ports {
		pl := []string{p.Device, strconv.Itoa(int(p.Port)), h}
		for name, v := range p.Counters {
			ch <- counter(c.portCounter, float64(v), append(pl, name)...)
		}
	}
	bySource := map[string]int{}
	for _, e := range cs.Errors {
		bySource[e.Source]++
	}
	for src, n := range bySource {
		ch <- gauge(c.scrapeErrors, float64(n), src, h)
	}
}

func remoteType(t ginv1.NvLinkRemoteType) string {
	return strings.ToLower(strings.TrimPrefix(t.String(), "NV_LINK_REMOTE_TYPE_"))
}
