package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

func stateName(s ginv1.NodeState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "NODE_STATE_"))
}

func (a *app) nodesCmd() *cobra.Command {
	var nodes string
	cmd := &cobra.Command{
		Use:   "nodes",
		Short: "List the cluster's nodes with their state",
		Long: `List the cluster's nodes: state (up, down, draining), inventory generation,
GPUs, NVLinks and compute ports up, NVLink domain and leaf switch.
-o json prints a JSON array with one object per node.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp *ginv1.ListNodesResponse
			err := a.withTopology(cmd.Context(), func(ctx context.Context, tc ginv1.TopologyServiceClient) (err error) {
				resp, err = tc.ListNodes(ctx, &ginv1.ListNodesRequest{Nodes: nodes, Consistency: a.consistency()})
				return err
			})
			if err != nil {
				return err
			}
			if a.output == "json" {
				return a.printJSON(resp.GetNodes())
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSTATE\tGEN\tGPUS\tNVLINKS\tPORTS\tNVLINK DOMAIN\tLEAF\tSYSTEM")
			for _, n := range resp.GetNodes() {
				gpus := fmt.Sprintf("%d", n.GetGpuCount())
				if n.GetGpuModel() != "" {
					gpus += " × " + n.GetGpuModel()
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d/%d\t%d/%d\t%s\t%s\t%s\n", n.GetName(), stateName(n.GetState()), n.GetGeneration(),
					gpus, n.GetNvlinksUp(), n.GetNvlinksTotal(), n.GetComputePortsUp(), n.GetComputePortsTotal(),
					dash(n.GetNvlinkDomain()), dash(n.GetLeafSwitch()), dash(n.GetSystemModel()))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%d node(s); served by %s at index %d\n", len(resp.GetNodes()), resp.GetRead().GetServedBy(), resp.GetRead().GetIndex())
			return nil
		},
	}
	cmd.Flags().StringVar(&nodes, "nodes", "", "only these nodes (Slurm hostlist: node[001-004,010])")
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (a *app) nodeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "node NAME",
		Short: "Show one node's inventory",
		Long:  "Show one node: its state and the inventory its agent reported (-o json prints the whole inventory).",
		Args:  args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp *ginv1.GetNodeResponse
			err := a.withTopology(cmd.Context(), func(ctx context.Context, tc ginv1.TopologyServiceClient) (err error) {
				resp, err = tc.GetNode(ctx, &ginv1.GetNodeRequest{Name: args[0], Consistency: a.consistency()})
				return err
			})
			if err != nil {
				return err
			}
			if a.output == "json" {
				return a.printJSON(resp)
			}
			s, inv := resp.GetSummary(), resp.GetInventory()
			fmt.Fprintf(a.stdout, "Node %s: %s (%s), generation %d, %s\n", s.GetName(), stateName(s.GetState()), dash(s.GetStateReason()), s.GetGeneration(), dash(s.GetSystemModel()))
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "GPU\tUUID\tMODEL\tPCI\tNUMA\tNVLINKS UP")
			for _, g := range inv.GetGpus() {
				up := 0
				for _, l := range g.GetNvlinks() {
					if l.GetState() == ginv1.LinkState_LINK_STATE_UP {
						up++
					}
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d/%d\n", g.GetIndex(), g.GetUuid(), g.GetModel(), g.GetPciBusId(), g.GetNumaNode(), up, len(g.GetNvlinks()))
			}
			fmt.Fprintln(tw, "\nHCA\tPORT\tSTATE\tRATE\tLINK LAYER\tROLE\tPCI")
			for _, h := range inv.GetHcas() {
				for _, p := range h.GetPorts() {
					fmt.Fprintf(tw, "%s\t%d\t%s\t%d Gb/s\t%s\t%s\t%s\n", h.GetName(), p.GetPort(),
						strings.TrimPrefix(p.GetState().String(), "PORT_STATE_"), p.GetRateGbps(),
						strings.TrimPrefix(p.GetLinkLayer().String(), "LINK_LAYER_"),
						strings.TrimPrefix(h.GetRole().String(), "HCA_ROLE_"), h.GetPciBusId())
				}
			}
			return tw.Flush()
		},
	}
}
