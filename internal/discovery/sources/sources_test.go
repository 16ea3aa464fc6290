package sources

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery"
	"github.com/gin-topology/gin/internal/discovery/sim"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "inv.json")
	b, _ := protojson.Marshal(&ginv1.NodeInventory{NodeName: "other", Gpus: []*ginv1.Gpu{{Uuid: "GPU-1"}}})
	if err := os.WriteFile(good, b, 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		spec       string
		openErr    bool
		collectErr bool
		gpus       int
	}{
		{"sim:dgx-h100", false, false, 8},
		{"sim:pcie-8gpu", false, false, 8},
		{"sim:", true, false, 0},
		{"sim:nope", true, false, 0},
		{"file:" + good, false, false, 1},
		{"file:" + bad, false, true, 0},
		{"file:" + filepath.Join(dir, "missing.json"), false, true, 0},
		{"file:", true, false, 0},
		{"bogus:x", true, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			src, err := Open(tc.spec, Options{NodeName: "n1"})
			if (err != nil) != tc.openErr {
				t.Fatalf("Open err = %v, want error %v", err, tc.openErr)
			}
			if err != nil {
				return
			}
			inv, err := src.Collect(context.Background())
			if (err != nil) != tc.collectErr {
				t.Fatalf("Collect err = %v, want error %v", err, tc.collectErr)
			}
			if err != nil {
				return
			}
			if inv.GetNodeName() != "n1" || len(inv.GetGpus()) != tc.gpus {
				t.Fatalf("inventory %q with %d GPUs, want n1 with %d", inv.GetNodeName(), len(inv.GetGpus()), tc.gpus)
			}
		})
	}
	if _, err := Open("sim:dgx-h100", Options{}); err == nil {
		t.Error("empty node name accepted")
	}
}

func TestWithHealthMarksFlakyLinkDegraded(t *testing.T) {
	s, err := sim.NewSource("dgx-h100", sim.NodeOptions{NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	src := WithHealth(s, 10).(*healthSource)
	now := time.Unix(0, 0)
	src.now = func() time.Time { return now }
	ctx := context.Background()
	if _, err := src.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.AddNVLinkErrors(3, 7, 100); err != nil {
		t.Fatal(err)
	}
	if err := s.AddPortErrors("mlx5_0", 1, "symbol_error", 2); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	inv, err := src.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var degraded []string
	for _, g := range inv.GetGpus() {
		for _, l := range g.GetNvlinks() {
			if l.GetHealth() == ginv1.LinkHealth_LINK_HEALTH_DEGRADED {
				degraded = append(degraded, "gpu")
			} else if l.GetHealth() != ginv1.LinkHealth_LINK_HEALTH_HEALTHY {
				t.Fatalf("GPU%d link %d health %v", g.GetIndex(), l.GetIndex(), l.GetHealth())
			}
		}
	}
	if len(degraded) != 1 || inv.GetGpus()[3].GetNvlinks()[7].GetHealth() != ginv1.LinkHealth_LINK_HEALTH_DEGRADED {
		t.Fatalf("degraded links %v, want GPU3 link 7 only", degraded)
	}
	if h := inv.GetHcas()[0].GetPorts()[0].GetHealth(); h != ginv1.LinkHealth_LINK_HEALTH_HEALTHY {
		t.Fatalf("2 symbol errors a minute marked the port %v", h)
	}
	if _, ok := interface{}(src).(discovery.CounterSource); !ok {
		t.Fatal("health source hides the counters")
	}
}

func TestAutoWithoutDriver(t *testing.T) {
	_, err := Open("auto", Options{NodeName: "n1"})
	if err == nil {
		t.Skip("this machine has hardware discovery")
	}
	if !errors.Is(err, ErrNoHardwareDiscovery) {
		t.Fatalf("auto: %v, want ErrNoHardwareDiscovery", err)
	}
}
