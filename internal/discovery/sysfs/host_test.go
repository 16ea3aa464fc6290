package sysfs

import (
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sysfs/sysfstest"
)

func TestHost(t *testing.T) {
	twoNodes := []*ginv1.NumaNode{
		{Id: 0, Socket: 0, CpuList: "0-55,112-167"},
		{Id: 1, Socket: 1, CpuList: "56-111,168-223"},
	}
	full := &ginv1.Host{
		Hostname: "dgx-h100-017", MachineId: "4f3c1e0b9a8d4c2e8f1a0b2c3d4e5f60", SystemModel: "DGXH100",
		KernelVersion: "6.8.0-1015-nvidia", NumaNodes: twoNodes,
	}
	with := func(f func(h *ginv1.Host)) *ginv1.Host {
		h := &ginv1.Host{
			Hostname: full.Hostname, MachineId: full.MachineId, SystemModel: full.SystemModel,
			KernelVersion: full.KernelVersion, NumaNodes: twoNodes,
		}
		f(h)
		return h
	}
	const uuid = "2c1e7a4e-58b1-11ee-8000-7cc2554e3a10"
	tests := []struct {
		name     string
		overlay  string
		remove   []string
		want     *ginv1.Host
		wantErrs []string
	}{
		{name: "two NUMA nodes", want: full},
		{
			name:   "no machine-id: DMI product UUID",
			remove: []string{"etc/machine-id"},
			want:   with(func(h *ginv1.Host) { h.MachineId = uuid }),
		},
		{
			name:    "empty machine-id: DMI product UUID",
			overlay: "-- etc/machine-id --\n\n",
			want:    with(func(h *ginv1.Host) { h.MachineId = uuid }),
		},
		{
			name:     "neither machine-id nor product_uuid",
			remove:   []string{"etc/machine-id", "sys/class/dmi/id/product_uuid"},
			want:     with(func(h *ginv1.Host) { h.MachineId = "" }),
			wantErrs: []string{"<root>/etc/machine-id", "<root>/sys/class/dmi/id/product_uuid"},
		},
		{
			name:   "no DMI (Arm server): no model, no error",
			remove: []string{"sys/class/dmi"},
			want:   with(func(h *ginv1.Host) { h.SystemModel = "" }),
		},
		{
			name:     "no hostname, no osrelease",
			remove:   []string{"proc/sys/kernel"},
			want:     with(func(h *ginv1.Host) { h.Hostname, h.KernelVersion = "", "" }),
			wantErrs: []string{"<root>/proc/sys/kernel/hostname", "<root>/proc/sys/kernel/osrelease"},
		},
		{
			name:   "kernel without NUMA: one node from cpu/online",
			remove: []string{"sys/devices/system/node"},
			want:   with(func(h *ginv1.Host) { h.NumaNodes = []*ginv1.NumaNode{{Id: 0, Socket: 0, CpuList: "0-223"}} }),
		},
		{
			name: "memory-only nodes left out, numeric order",
			overlay: `-- sys/devices/system/node/node2/cpulist --

-- sys/devices/system/node/node10/cpulist --
224-231
-- sys/devices/system/cpu/cpu224/topology/physical_package_id --
2
-- sys/devices/system/node/has_cpu --
0-1,10
`,
			want: with(func(h *ginv1.Host) {
				h.NumaNodes = append(append([]*ginv1.NumaNode{}, twoNodes...), &ginv1.NumaNode{Id: 10, Socket: 2, CpuList: "224-231"})
			}),
		},
		{
			name:    "unknown package of a node's first CPU",
			remove:  []string{"sys/devices/system/cpu/cpu56"},
			overlay: "-- sys/devices/system/node/node1/cpulist --\n56-111,168-223\n",
			want: with(func(h *ginv1.Host) {
				h.NumaNodes = []*ginv1.NumaNode{twoNodes[0], {Id: 1, Socket: 0, CpuList: "56-111,168-223"}}
			}),
			wantErrs: []string{"<root>/sys/devices/system/node/node1/cpulist"},
		},
		{
			name:     "unreadable cpulist",
			remove:   []string{"sys/devices/system/node/node1/cpulist"},
			want:     with(func(h *ginv1.Host) { h.NumaNodes = twoNodes[:1] }),
			wantErrs: []string{"<root>/sys/devices/system/node/node1/cpulist"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := nodeFixture(t)
			remove(t, root, tt.remove...)
			sysfstest.WriteArchive(t, root, tt.overlay)
			got, errs := Host(root+"/sys", root+"/proc", root+"/etc")
			wantErrItems(t, root, errs, tt.wantErrs...)
			protoDiff(t, "host", got, tt.want)
		})
	}
}
