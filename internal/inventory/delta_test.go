package inventory

import (
	"testing"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

func TestDiffApplyRoundTrip(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(*ginv1.NodeInventory)
		wantGPUs  int // upserted GPUs in the delta
		wantHCAs  int
		wantWhole bool // a whole section is replaced
	}{
		{"nothing changed", func(*ginv1.NodeInventory) {}, 0, 0, false},
		{"NVLink down", func(i *ginv1.NodeInventory) { i.Gpus[0].Nvlinks[0].State = ginv1.LinkState_LINK_STATE_DOWN }, 1, 0, false},
		{"port retrained", func(i *ginv1.NodeInventory) { i.Hcas[0].Ports[0].RateGbps = 200 }, 0, 1, false},
		{"GPU removed", func(i *ginv1.NodeInventory) {
			i.Gpus = i.Gpus[:1]
			i.Gpus[0].Nvlinks = nil
		}, 1, 0, false},
		{"QPs changed", func(i *ginv1.NodeInventory) { i.QpSummaries = []*ginv1.QpSummary{{Device: "mlx5_0", Count: 3}} }, 0, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := validInventory()
			old.Generation = 4
			cur := proto.CloneOf(old)
			cur.Generation = 5
			tc.mutate(cur)
			d := Diff(old, cur)
			if len(d.UpsertGpus) != tc.wantGPUs || len(d.UpsertHcas) != tc.wantHCAs {
				t.Fatalf("delta upserts %d GPUs, %d HCAs; want %d, %d", len(d.UpsertGpus), len(d.UpsertHcas), tc.wantGPUs, tc.wantHCAs)
			}
			if got := d.QpSummaries != nil; got != tc.wantWhole {
				t.Fatalf("qp section replaced = %v, want %v", got, tc.wantWhole)
			}
			got, err := ApplyDelta(old, d)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, cur) {
				t.Fatalf("ApplyDelta(Diff) != cur\n got %v\nwant %v", got, cur)
			}
			if old.Generation != 4 || len(old.Gpus) != 2 {
				t.Fatal("ApplyDelta modified its base")
			}
		})
	}
}

func TestApplyDeltaErrors(t *testing.T) {
	base := validInventory()
	base.Generation = 3
	tests := []struct {
		name string
		d    *ginv1.InventoryDelta
	}{
		{"wrong base", &ginv1.InventoryDelta{BaseGeneration: 2, Generation: 4}},
		{"not after base", &ginv1.InventoryDelta{BaseGeneration: 3, Generation: 3}},
		{"remove missing GPU", &ginv1.InventoryDelta{BaseGeneration: 3, Generation: 4, RemovedGpuUuids: []string{"GPU-zz"}}},
		{"remove missing HCA", &ginv1.InventoryDelta{BaseGeneration: 3, Generation: 4, RemovedHcaNames: []string{"mlx5_9"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ApplyDelta(base, tc.d); err == nil {
				t.Fatal("ApplyDelta succeeded, want error")
			}
		})
	}
}
