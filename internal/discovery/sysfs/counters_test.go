package sysfs

import (
	"maps"
	"testing"

	"github.com/gin-topology/gin/internal/discovery"
	"github.com/gin-topology/gin/internal/discovery/sysfs/sysfstest"
)

func TestPortCounters(t *testing.T) {
	ibData := map[string]uint64{
		"excessive_buffer_overrun_errors": 0, "link_downed": 1, "link_error_recovery": 0,
		"local_link_integrity_errors": 0, "port_rcv_data": 4000, "port_xmit_data": 10000,
		"port_rcv_errors": 3, "port_rcv_packets": 250, "port_xmit_packets": 300, "port_xmit_discards": 7,
		"port_xmit_wait": 12, "symbol_error": 0, "VL15_dropped": 0,
		"lifespan": 10, "out_of_sequence": 0, "local_ack_timeout_err": 0,
	}
	tests := []struct {
		name     string
		overlay  string
		remove   []string
		want     []discovery.PortCounters
		wantErrs []string
	}{
		{
			name: "node fixture",
			want: []discovery.PortCounters{
				{Device: "mlx5_0", Port: 1, Counters: ibData},
				// port_xmit_discards reads "N/A (no PMA)": skipped, no error.
				{Device: "mlx5_1", Port: 1, Counters: map[string]uint64{"symbol_error": 12, "link_downed": 0, "port_rcv_data": 16}},
				{Device: "mlx5_2", Port: 1, Counters: map[string]uint64{
					"port_rcv_data": 400, "port_xmit_data": 800, "symbol_error": 0,
					"out_of_sequence": 5, "local_ack_timeout_err": 2, "rnr_nak_retry_err": 0, "req_cqe_error": 1,
					"np_cnp_sent": 100, "rp_cnp_handled": 90, "lifespan": 10,
				}},
				{Device: "mlx5_3", Port: 1, Counters: map[string]uint64{}},
				// symbol_error reads "garbage": an ItemError, link_downed kept.
				{Device: "mlx5_4", Port: 1, Counters: map[string]uint64{"link_downed": 2}},
				{Device: "mlx5_5", Port: 1, Counters: map[string]uint64{}},
			},
			wantErrs: []string{"<root>/sys/class/infiniband/mlx5_4/ports/1/counters/symbol_error"},
		},
		{
			name: "legacy counters_ext data ×4, second port, device without ports",
			overlay: `-- sys/class/infiniband/mlx5_1/ports/1/counters_ext/port_rcv_data_64 --
10
-- sys/class/infiniband/mlx5_1/ports/1/counters_ext/port_xmit_data_64 --
18446744073709551615
-- sys/class/infiniband/mlx5_1/ports/1/counters_ext/port_rcv_packets_64 --
5
-- sys/class/infiniband/mlx5_3/ports/2/hw_counters/out_of_buffer --
3
-- sys/class/infiniband/mlx5_3/ports/2/hw_counters/ --
-- sys/class/infiniband/mlx5_5/ports/1/counters/link_downed --
-- sys/class/infiniband/mlx5_4/ports/1/counters/symbol_error --
4
`,
			remove: []string{"sys/class/infiniband/mlx5_0/ports", "sys/class/infiniband/mlx5_2"},
			want: []discovery.PortCounters{
				{Device: "mlx5_1", Port: 1, Counters: map[string]uint64{
					"symbol_error": 12, "link_downed": 0, "port_rcv_data": 16,
					"port_rcv_data_64": 40, "port_xmit_data_64": 18446744073709551612, "port_rcv_packets_64": 5,
				}},
				{Device: "mlx5_3", Port: 1, Counters: map[string]uint64{}},
				{Device: "mlx5_3", Port: 2, Counters: map[string]uint64{"out_of_buffer": 3}},
				{Device: "mlx5_4", Port: 1, Counters: map[string]uint64{"link_downed": 2, "symbol_error": 4}},
				{Device: "mlx5_5", Port: 1, Counters: map[string]uint64{}},
			},
			wantErrs: []string{
				"<root>/sys/class/infiniband/mlx5_0/ports",
				"<root>/sys/class/infiniband/mlx5_5/ports/1/counters/link_downed",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := nodeFixture(t)
			remove(t, root, tt.remove...)
			sysfstest.WriteArchive(t, root, tt.overlay)
			got, errs := PortCounters(root + "/sys")
			wantErrItems(t, root, errs, tt.wantErrs...)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d ports, want %d: %v", len(got), len(tt.want), got)
			}
			for i, w := range tt.want {
				g := got[i]
				if g.Device != w.Device || g.Port != w.Port || !maps.Equal(g.Counters, w.Counters) {
					t.Errorf("port %d:\n got %+v\nwant %+v", i, g, w)
				}
			}
		})
	}
}

func TestPortCountersNoInfiniband(t *testing.T) {
	got, errs := PortCounters(t.TempDir())
	if got != nil || errs != nil {
		t.Errorf("got %v, %v; want nothing", got, errs)
	}
}
