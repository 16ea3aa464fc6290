package fabricscan

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// nodeIfaces is a GPU node's RDMA interfaces; eno1 (management) has none.
func nodeIfaces(ifname string) (string, uint32, bool) {
	switch ifname {
	case "ens1f0np0":
		return "mlx5_0", 1, true
	case "ens2f0np0":
		return "mlx5_1", 1, true
	}
	return "", 0, false
}

func TestParseLLDPCLIJSON(t *testing.T) {
	leaf := &ginv1.FabricNeighbor{
		Hca: "mlx5_0", Port: 1, SwitchGuid: "1c:34:da:5e:01:00", SwitchDescription: "leaf-a01", SwitchPort: 12,
		Source: ginv1.FabricNeighborSource_FABRIC_NEIGHBOR_SOURCE_LLDP,
	}
	withRate := func(n *ginv1.FabricNeighbor, r uint32) *ginv1.FabricNeighbor {
		c := proto.Clone(n).(*ginv1.FabricNeighbor)
		c.RateGbps = r
		return c
	}
	sonic := &ginv1.FabricNeighbor{
		Hca: "mlx5_1", Port: 1, SwitchGuid: "b8:59:9f:00:12:34",
		SwitchDescription: "SONiC Software Version: SONiC.202311.1 - HwSku: Mellanox-SN5600-V256 - Distribution: Debian 12.5 - Kernel: 6.1.0-11-2-amd64",
		SwitchPort:        48, Source: ginv1.FabricNeighborSource_FABRIC_NEIGHBOR_SOURCE_LLDP,
	}
	splitLeaf := proto.Clone(leaf).(*ginv1.FabricNeighbor)
	splitLeaf.SwitchPort = 1 // "swp12s1": the trailing number is the split lane
	for _, c := range []struct {
		file string
		want []*ginv1.FabricNeighbor
	}{
		{"one-neighbor.json", []*ginv1.FabricNeighbor{withRate(leaf, 400)}},
		{"two-neighbors.json", []*ginv1.FabricNeighbor{splitLeaf, sonic}},
		{"json0.json", []*ginv1.FabricNeighbor{leaf}},
	} {
		t.Run(c.file, func(t *testing.T) {
			got, err := ParseLLDPCLIJSON(readFile(t, "testdata/lldp/"+c.file), nodeIfaces)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %d neighbours %v, want %d", len(got), got, len(c.want))
			}
			for i := range got {
				if !proto.Equal(got[i], c.want[i]) {
					t.Errorf("neighbour %d:\n got %v\nwant %v", i, got[i], c.want[i])
				}
			}
		})
	}
}

func TestParseLLDPCLIJSONNilMapper(t *testing.T) {
	got, err := ParseLLDPCLIJSON(readFile(t, "testdata/lldp/two-neighbors.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Hca != "eno1" || got[0].SwitchDescription != "mgmt-sw-07" || got[0].SwitchPort != 7 || got[0].RateGbps != 1 {
		t.Errorf("got %v", got)
	}
}

func TestParseLLDPCLIJSONEdges(t *testing.T) {
	for _, c := range []struct {
		name, in string
		n        int
		wantErr  string
	}{
		{"no neighbours", `{"lldp": {}}`, 0, ""},
		{"json0 no neighbours", `{"lldp": [{}]}`, 0, ""},
		{"not json", `lldpcli: unknown command`, 0, "invalid character"},
		{"truncated", `{"lldp": {"interface": {"ens1f0np0": {"chassis": {`, 0, "unexpected EOF"},
		{"no lldp key", `{"x": 1}`, 0, `no "lldp" key`},
		{"top-level array", `[1]`, 0, "not an object"},
		{"trailing", `{"lldp": {}} {}`, 0, "trailing data"},
		{"interface string", `{"lldp": {"interface": "eth0"}}`, 0, "not an object"},
		{"no chassis id", `{"lldp": {"interface": {"ens1f0np0": {"chassis": {"a": 1, "b": 2}, "port": {}}}}}`, 0, "chassis has no id"},
		{"chassis not object", `{"lldp": {"interface": {"ens1f0np0": {"chassis": 5}}}}`, 0, "chassis"},
		{"id number", `{"lldp": {"interface": {"ens1f0np0": {"chassis": {"id": {"type": "mac", "value": 7}}}}}}`, 1, ""},
		{"port id object", `{"lldp": {"interface": {"ens1f0np0": {"chassis": {"id": {"value": "aa"}}, "port": {"id": {"value": {"x": 1}}}}}}}`, 0, "port id"},
		{"unmapped only", `{"lldp": {"interface": {"eno1": {"chassis": {"id": {"value": "aa"}}}}}}`, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseLLDPCLIJSON([]byte(c.in), nodeIfaces)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || got != nil {
					t.Fatalf("got %v, %v; want error %q", got, err, c.wantErr)
				}
				return
			}
			if err != nil || len(got) != c.n {
				t.Fatalf("got %v, %v; want %d neighbours", got, err, c.n)
			}
		})
	}
	if _, err := ParseLLDPCLIJSON(make([]byte, MaxLLDPBytes+1), nil); err == nil || !strings.Contains(err.Error(), "larger") {
		t.Errorf("oversized input: %v", err)
	}
}

func TestTrailingNumberAndMAU(t *testing.T) {
	for s, want := range map[string]uint32{"swp12": 12, "Ethernet1/51": 51, "Eth1/1/4": 4, "eth0": 0, "": 0, "Ethernet48": 48, "x99999999999": 0} {
		if got, _ := trailingNumber(s); got != want {
			t.Errorf("trailingNumber(%q) = %d, want %d", s, got, want)
		}
	}
	for s, want := range map[string]uint32{
		"100GbaseCR4 - 100GBASE-R PCS/PMA over 4 lane shielded copper balanced cable": 100,
		"10GigBaseCX4 - X copper over 8 pair 100-Ohm balanced cable":                  10,
		"1000BaseTFD - Four-pair Category 5 UTP, full duplex mode":                    1,
		"100BaseTXFD - 2 pair category 5 UTP, full duplex mode":                       0,
		"unknown": 0, "": 0,
	} {
		if got := mauGbps(s); got != want {
			t.Errorf("mauGbps(%q) = %d, want %d", s, got, want)
		}
	}
}

func FuzzParseLLDPCLIJSON(f *testing.F) {
	for _, n := range []string{"one-neighbor.json", "two-neighbors.json", "json0.json"} {
		f.Add(readFile(f, "testdata/lldp/"+n))
	}
	f.Add([]byte(`{"lldp": {}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := ParseLLDPCLIJSON(in, nil)
		if err != nil {
			if got != nil {
				t.Fatal("result with error")
			}
			return
		}
		for _, n := range got {
			if n.SwitchGuid == "" || n.Source != ginv1.FabricNeighborSource_FABRIC_NEIGHBOR_SOURCE_LLDP {
				t.Fatalf("neighbour %v", n)
			}
		}
	})
}
