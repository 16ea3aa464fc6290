package discovery

import "fmt"

// ItemError is a failure to read one item (a GPU, a link, an HCA port, a
// sysfs file). Collectors report it and go on: one bad item never hides the
// rest of the node. The agent logs it and counts it in a metric.
type ItemError struct {
	// Source is the collector: "nvml", "sysfs", "netlink", "ibnetdiscover", "lldp".
	Source string
	// Item names what failed: "GPU 3 NVLink 7", "mlx5_2 port 1 rate",
	// "/sys/class/infiniband/mlx5_0/ports/1/lid".
	Item string
	Err  error
}

func (e ItemError) Error() string { return fmt.Sprintf("%s: %s: %v", e.Source, e.Item, e.Err) }

func (e ItemError) Unwrap() error { return e.Err }

// Counter values that Prometheus scrapes from the agent. They are time series
// and never go to the master (it holds link state and health verdicts only).

// NVLinkCounters are one NVLink's counters. A nil pointer means the driver
// does not report that counter (an old driver, or a field Blackwell renamed).
type NVLinkCounters struct {
	GPUIndex int
	UUID     string
	PCIBusID string
	Link     int
	// Error counters (NVML NvLinkErrorCounter, or the Blackwell field ids).
	CRCFlit, CRCData, Replay, Recovery *uint64
	// Blackwell and newer: symbol and effective errors.
	SymbolErrors, EffectiveErrors *uint64
	// Throughput in bytes since the driver loaded.
	TxBytes, RxBytes *uint64
}

// GPUSample is a GPU's scrape-time gauges.
type GPUSample struct {
	Index                 int
	UUID, PCIBusID, Model string
	// Temperature in °C; nil when unsupported.
	TemperatureC *uint32
}

// PortCounters are one HCA port's counters, named as the kernel names the
// files under /sys/class/infiniband/<dev>/ports/<port>/counters and
// hw_counters (port_rcv_data, symbol_error, link_downed, ...). Data counters
// are converted to bytes (the kernel reports 4-byte words).
type PortCounters struct {
	Device   string
	Port     uint32
	Counters map[string]uint64
}

// Counters is one scrape's worth of counters and gauges from every collector
// of a node, with the items that could not be read.
type Counters struct {
	NVLinks []NVLinkCounters
	GPUs    []GPUSample
	Ports   []PortCounters
	Errors  []ItemError
}
