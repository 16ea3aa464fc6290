//go:build linux

package sysfs

import (
	"testing"

	"github.com/prometheus/procfs/sysfs"
)

// PortCounters and procfs agree on the counters procfs knows (data ×4 included).
func TestPortCountersMatchProcfs(t *testing.T) {
	root := nodeFixture(t)
	fs, err := sysfs.NewFS(root + "/sys")
	if err != nil {
		t.Fatal(err)
	}
	ours, _ := PortCounters(root + "/sys")
	byDev := map[string]map[string]uint64{}
	for _, pc := range ours {
		if pc.Port == 1 {
			byDev[pc.Device] = pc.Counters
		}
	}
	for _, dev := range []string{"mlx5_0", "mlx5_1", "mlx5_2"} {
		d, err := fs.InfiniBandDevice(dev)
		if err != nil {
			t.Fatalf("procfs %s: %v", dev, err)
		}
		p := d.Ports[1]
		for name, v := range map[string]*uint64{
			"port_rcv_data": p.Counters.PortRcvData, "port_xmit_data": p.Counters.PortXmitData,
			"symbol_error": p.Counters.SymbolError, "link_downed": p.Counters.LinkDowned,
			"port_rcv_errors": p.Counters.PortRcvErrors, "port_xmit_discards": p.Counters.PortXmitDiscards,
			"VL15_dropped": p.Counters.VL15Dropped, "out_of_sequence": p.HwCounters.OutOfSequence,
			"local_ack_timeout_err": p.HwCounters.LocalAckTimeoutErr, "np_cnp_sent": p.HwCounters.NpCnpSent,
			"req_cqe_error": p.HwCounters.ReqCqeError,
		} {
			got, ok := byDev[dev][name]
			if (v != nil) != ok || (v != nil && *v != got) {
				t.Errorf("%s %s: ours %d (%v), procfs %v", dev, name, got, ok, v)
			}
		}
	}
	// procfs fails the whole of mlx5_4 (malformed rate and counter); ours does not.
	if _, err := fs.InfiniBandDevice("mlx5_4"); err == nil {
		t.Error("procfs read mlx5_4; the fixture is meant to break it")
	}
}

// With procfs built in, healthy devices go through it.
func TestProcfsDevice(t *testing.T) {
	root := nodeFixture(t)
	b, err := procfsDevice(root+"/sys", "mlx5_1")
	if err != nil {
		t.Fatal(err)
	}
	p := b.ports[1]
	if b.fw != "28.39.1002" || p.rateGbps != 200 || p.stateID != 4 || p.physID != 5 || p.linkLayer != "InfiniBand" {
		t.Errorf("procfsDevice = %+v", b)
	}
	if _, err := procfsDevice(root+"/sys", "mlx5_4"); err == nil {
		t.Error("procfsDevice(mlx5_4) succeeded despite the malformed rate")
	}
}
