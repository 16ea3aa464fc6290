package inventory

import (
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

func TestComputeEthernet(t *testing.T) {
	eth := &ginv1.HcaPort{Port: 1, LinkLayer: ginv1.LinkLayer_LINK_LAYER_ETHERNET}
	ib := &ginv1.HcaPort{Port: 1, LinkLayer: ginv1.LinkLayer_LINK_LAYER_INFINIBAND}
	hca := func(role ginv1.HcaRole, ports ...*ginv1.HcaPort) *ginv1.Hca {
		return &ginv1.Hca{Name: "mlx5_0", Role: role, Ports: ports}
	}
	const compute, storage, unspecified = ginv1.HcaRole_HCA_ROLE_COMPUTE, ginv1.HcaRole_HCA_ROLE_STORAGE, ginv1.HcaRole_HCA_ROLE_UNSPECIFIED
	tests := []struct {
		name string
		hcas []*ginv1.Hca
		want bool
	}{
		{"compute RoCE", []*ginv1.Hca{hca(compute, eth), hca(compute, eth)}, true},
		{"compute InfiniBand, storage Ethernet", []*ginv1.Hca{hca(compute, ib), hca(storage, eth)}, false},
		{"mixed compute", []*ginv1.Hca{hca(compute, eth), hca(compute, ib)}, false},
		{"compute role wins over unspecified", []*ginv1.Hca{hca(compute, ib), hca(unspecified, eth)}, false},
		{"unspecified role when no compute", []*ginv1.Hca{hca(unspecified, eth), hca(storage, ib)}, true},
		{"storage only", []*ginv1.Hca{hca(storage, eth)}, false},
		{"no HCAs", nil, false},
		{"compute HCA without ports, unspecified Ethernet", []*ginv1.Hca{hca(compute), hca(unspecified, eth)}, true},
	}
	for _, tc := range tests {
		if got := ComputeEthernet(&ginv1.NodeInventory{NodeName: "n", Hcas: tc.hcas}); got != tc.want {
			t.Errorf("%s: ComputeEthernet = %v, want %v", tc.name, got, tc.want)
		}
	}
}
