package linkhealth

import (
	"testing"
	"time"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery"
)

func u64(v uint64) *uint64 { return &v }

func inv() *ginv1.NodeInventory {
	return &ginv1.NodeInventory{
		Gpus: []*ginv1.Gpu{{Uuid: "GPU-a", Nvlinks: []*ginv1.NvLink{{Index: 0}, {Index: 1}, {Index: 2}}}},
		Hcas: []*ginv1.Hca{{Name: "mlx5_0", Ports: []*ginv1.HcaPort{{Port: 1}}}},
	}
}

func TestEvaluator(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name      string
		first     uint64 // errors at t0
		second    uint64 // errors one minute later
		wantLink0 ginv1.LinkHealth
	}{
		{"quiet link", 5, 5, ginv1.LinkHealth_LINK_HEALTH_HEALTHY},
		{"under threshold", 0, 10, ginv1.LinkHealth_LINK_HEALTH_HEALTHY},
		{"over threshold", 0, 11, ginv1.LinkHealth_LINK_HEALTH_DEGRADED},
		{"counter reset", 500, 3, ginv1.LinkHealth_LINK_HEALTH_HEALTHY},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := New(10)
			for i, v := range []uint64{tc.first, tc.second} {
				e.Observe(t0.Add(time.Duration(i)*time.Minute), discovery.Counters{
					NVLinks: []discovery.NVLinkCounters{{UUID: "GPU-a", Link: 0, CRCFlit: u64(v)}},
				})
			}
			n := inv()
			e.Apply(n)
			if got := n.Gpus[0].Nvlinks[0].Health; got != tc.wantLink0 {
				t.Fatalf("link 0 health = %v, want %v", got, tc.wantLink0)
			}
			if got := n.Gpus[0].Nvlinks[1].Health; got != ginv1.LinkHealth_LINK_HEALTH_UNSPECIFIED {
				t.Fatalf("link without counters = %v, want unspecified", got)
			}
		})
	}
}

func TestPortDegradesAndRecovers(t *testing.T) {
	e := New(6)
	t0 := time.Unix(0, 0)
	obs := func(sec int, symbolErrors uint64) ginv1.LinkHealth {
		e.Observe(t0.Add(time.Duration(sec)*time.Second), discovery.Counters{Ports: []discovery.PortCounters{{
			Device: "mlx5_0", Port: 1, Counters: map[string]uint64{"symbol_error": symbolErrors, "port_rcv_data": 1 << 40},
		}}})
		n := inv()
		e.Apply(n)
		return n.Hcas[0].Ports[0].Health
	}
	obs(0, 0)
	if h := obs(10, 2); h != ginv1.LinkHealth_LINK_HEALTH_DEGRADED { // 12/min > 6
		t.Fatalf("after a burst: %v", h)
	}
	if h := obs(70, 2); h != ginv1.LinkHealth_LINK_HEALTH_HEALTHY {
		t.Fatalf("after a quiet minute: %v", h)
	}
}

func TestValidate(t *testing.T) {
	for _, v := range []float64{0, -1, 2e9} {
		if Validate(v) == nil {
			t.Errorf("Validate(%g) = nil", v)
		}
	}
	if err := Validate(10); err != nil {
		t.Error(err)
	}
}
