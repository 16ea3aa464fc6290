package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// completionTimeout bounds the master lookups of shell completion: a shell
// waiting on Tab must not hang when no master answers.
const completionTimeout = 2 * time.Second

// completionNodes lists the cluster's nodes for completion (nil when no
// master answers: the shell then completes nothing).
func (a *app) completionNodes(ctx context.Context) []*ginv1.NodeSummary {
	if a.timeout > completionTimeout || a.timeout <= 0 {
		a.timeout = completionTimeout
	}
	var resp *ginv1.ListNodesResponse
	if err := a.withTopology(ctx, func(ctx context.Context, tc ginv1.TopologyServiceClient) (err error) {
		resp, err = tc.ListNodes(ctx, &ginv1.ListNodesRequest{})
		return err
	}); err != nil {
		return nil
	}
	return resp.GetNodes()
}

// completeNodeNames completes one node name (a positional NAME).
func (a *app) completeNodeNames(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return a.nodeNames(cmd, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeNodesFlag completes --nodes/--node values: node names (the
// shell matches the prefix; a hostlist expression is typed by hand).
func (a *app) completeNodesFlag(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return a.nodeNames(cmd, toComplete), cobra.ShellCompDirectiveNoFileComp
}

func (a *app) nodeNames(cmd *cobra.Command, toComplete string) []string {
	var out []string
	for _, n := range a.completionNodes(cmd.Context()) {
		if strings.HasPrefix(n.GetName(), toComplete) {
			out = append(out, n.GetName())
		}
	}
	return out
}

// completeGPUs completes the GPUs of `path`: "node001/" for each node, then
// node001/GPU0.. once a node is typed.
func (a *app) completeGPUs(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) >= 2 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	nodes := a.completionNodes(cmd.Context())
	node, _, typedNode := strings.Cut(toComplete, "/")
	var out []string
	for _, n := range nodes {
		if !typedNode {
			if strings.HasPrefix(n.GetName(), toComplete) {
				out = append(out, n.GetName()+"/")
			}
			continue
		}
		if n.GetName() != node {
			continue
		}
		for i := range n.GetGpuCount() {
			if g := fmt.Sprintf("%s/GPU%d", n.GetName(), i); strings.HasPrefix(g, toComplete) {
				out = append(out, g)
			}
		}
	}
	if !typedNode {
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeFormats completes export's FORMAT.
func completeFormats(formats map[string]ginv1.ExportFormat) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		out := make([]string, 0, len(formats))
		for f := range formats {
			out = append(out, f)
		}
		sort.Strings(out)
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
