package main

import (
	"context"
	"fmt"
	"strings"

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
			t := a.newTable("NAME", "STATE", "GEN", "GPUS", "GPU_MODEL", "NVLINKS", "PORTS", "NVLINK_DOMAIN", "LEAF", "SYSTEM")
			for _, n := range resp.GetNodes() {
				t.row(n.GetName(), n.GetState(), n.GetGeneration(), n.GetGpuCount(), n.GetGpuModel(),
					fmt.Sprintf("%d/%d", n.GetNvlinksUp(), n.GetNvlinksTotal()), fmt.Sprintf("%d/%d", n.GetComputePortsUp(), n.GetComputePortsTotal()),
					n.GetNvlinkDomain(), n.GetLeafSwitch(), n.GetSystemModel())
			}
			if err := t.flush(); err != nil {
				return err
			}
			a.summary("%d node(s); served by %s at index %d%s", len(resp.GetNodes()), resp.GetRead().GetServedBy(), resp.GetRead().GetIndex(), offLeader(resp.GetRead()))
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
	cmd := &cobra.Command{
		Use:               "node NAME",
		Short:             "Show one node's inventory",
		Long:              "Show one node: its state and the inventory its agent reported (-o json prints the whole inventory).",
		Args:              args("NAME"),
		ValidArgsFunction: a.completeNodeNames,
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
			a.summary("Node %s: %s (%s), generation %d, %s", s.GetName(), stateName(s.GetState()), dash(s.GetStateReason()), s.GetGeneration(), dash(s.GetSystemModel()))
			t := a.newTable("GPU", "UUID", "MODEL", "PCI", "NUMA", "NVLINKS_UP")
			for _, g := range inv.GetGpus() {
				up := 0
				for _, l := range g.GetNvlinks() {
					if l.GetState() == ginv1.LinkState_LINK_STATE_UP {
						up++
					}
				}
				t.row(g.GetIndex(), g.GetUuid(), g.GetModel(), g.GetPciBusId(), g.GetNumaNode(), fmt.Sprintf("%d/%d", up, len(g.GetNvlinks())))
			}
			if err := t.flush(); err != nil {
				return err
			}
			fmt.Fprintln(a.stdout)
			t = a.newTable("HCA", "PORT", "STATE", "RATE_GBPS", "LINK_LAYER", "ROLE", "PCI")
			for _, h := range inv.GetHcas() {
				for _, p := range h.GetPorts() {
					t.row(h.GetName(), p.GetPort(), p.GetState(), p.GetRateGbps(), p.GetLinkLayer(), h.GetRole(), h.GetPciBusId())
				}
			}
			return t.flush()
		},
	}
	cmd.AddCommand(a.nodeDeleteCmd())
	return cmd
}

func (a *app) nodeDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a node and its binding, so that the name can be registered again (admin)",
		Long: `Delete a node's record: its inventory, its state and its binding to the machine
(machine_id) or agent certificate that registered it first. A new machine or
certificate can then register the name. A node whose agent holds a session is
refused (FAILED_PRECONDITION): stop the agent first, or deny its certificate
(ginctl tls deny SERIAL), which ends the session.`,
		Args:              args("NAME"),
		ValidArgsFunction: a.completeNodeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp *ginv1.DeleteNodeResponse
			if err := a.withAdmin(cmd.Context(), func(ctx context.Context, ac ginv1.AdminServiceClient) (err error) {
				resp, err = ac.DeleteNode(ctx, &ginv1.DeleteNodeRequest{NodeName: args[0]})
				return err
			}); err != nil {
				return err
			}
			if a.output == "json" {
				return a.printJSON(resp)
			}
			fmt.Fprintf(a.stdout, "deleted node %s (commit index %d)\n", args[0], resp.GetIndex())
			return nil
		},
	}
}
