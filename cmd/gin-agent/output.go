package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"google.golang.org/protobuf/reflect/protoreflect"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/jsonout"
)

// writeJSON prints the inventory in GIN's JSON convention (internal/jsonout,
// docs/JSON.md): .proto field names, every field present, enum words.
func writeJSON(w io.Writer, inv *ginv1.NodeInventory) error {
	if err := jsonout.Write(w, inv); err != nil {
		return fmt.Errorf("write inventory: %w", err)
	}
	return nil
}

// writeTable prints a short human summary: the node, its GPUs and its HCAs.
func writeTable(w io.Writer, inv *ginv1.NodeInventory) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	h := inv.GetHost()
	fmt.Fprintf(tw, "Node:\t%s\n", inv.GetNodeName())
	fmt.Fprintf(tw, "Source:\t%s\n", orDash(inv.GetSource()))
	if h != nil {
		fmt.Fprintf(tw, "System:\t%s\n", orDash(h.GetSystemModel()))
		fmt.Fprintf(tw, "Driver:\t%s (CUDA %s), kernel %s\n", orDash(h.GetDriverVersion()), orDash(h.GetCudaDriverVersion()), orDash(h.GetKernelVersion()))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write inventory: %w", err)
	}

	fmt.Fprintf(w, "\nGPUs: %d\n", len(inv.GetGpus()))
	if len(inv.GetGpus()) > 0 {
		fmt.Fprintln(tw, "  INDEX\tMODEL\tPCI BUS ID\tNUMA\tNVLINKS UP")
		for _, g := range inv.GetGpus() {
			up := 0
			for _, l := range g.GetNvlinks() {
				if l.GetState() == ginv1.LinkState_LINK_STATE_UP {
					up++
				}
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%d/%d\n", g.GetIndex(), orDash(g.GetModel()), orDash(g.GetPciBusId()),
				numa(g.GetNumaNode()), up, len(g.GetNvlinks()))
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("write inventory: %w", err)
		}
	}

	fmt.Fprintf(w, "\nHCAs: %d\n", len(inv.GetHcas()))
	if len(inv.GetHcas()) > 0 {
		fmt.Fprintln(tw, "  NAME\tPCI BUS ID\tNUMA\tPORT\tSTATE\tPHYS STATE\tRATE\tLINK LAYER")
		for _, c := range inv.GetHcas() {
			if len(c.GetPorts()) == 0 {
				fmt.Fprintf(tw, "  %s\t%s\t%s\t-\t-\t-\t-\t-\n", c.GetName(), orDash(c.GetPciBusId()), numa(c.GetNumaNode()))
			}
			for _, p := range c.GetPorts() {
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", c.GetName(), orDash(c.GetPciBusId()), numa(c.GetNumaNode()),
					p.GetPort(), enumWord(p.GetState()), enumWord(p.GetPhysState()), rate(p), enumWord(p.GetLinkLayer()))
			}
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("write inventory: %w", err)
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func numa(n int32) string {
	if n < 0 {
		return "-"
	}
	return strconv.Itoa(int(n))
}

// enumWord is an enum value as ginctl's tables and every -o json print it
// ("active" for PORT_STATE_ACTIVE; docs/JSON.md), "-" for the unspecified value.
func enumWord(e protoreflect.Enum) string {
	if e.Number() == 0 {
		return "-"
	}
	return jsonout.EnumWord(e.Descriptor(), e.Number())
}

func rate(p *ginv1.HcaPort) string {
	if p.GetRateGbps() == 0 {
		return "-"
	}
	return strconv.Itoa(int(p.GetRateGbps())) + " Gb/s"
}
