package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/hostlist"
	"github.com/gin-topology/gin/internal/nodelabels"
)

// exportKueue writes a Kueue Topology whose levels are the labels
// gin-master --kube-labels keeps. The levels follow the cluster: as many
// switch levels as the Slurm tree export has above its nodes, and the
// NVLink block when every node is in one (the block export works) and
// every block lies within one leaf (Kueue's levels must nest).
func (a *app) exportKueue(ctx context.Context, out, name string) error {
	var tree, block []byte
	var blockErr error
	err := a.withPlans(ctx, func(ctx context.Context, pc ginv1.PlanServiceClient) error {
		r, err := pc.Export(ctx, &ginv1.ExportRequest{Format: ginv1.ExportFormat_EXPORT_FORMAT_SLURM_TREE})
		if err != nil {
			return err
		}
		tree = r.GetContent()
		r, blockErr = pc.Export(ctx, &ginv1.ExportRequest{Format: ginv1.ExportFormat_EXPORT_FORMAT_SLURM_BLOCK})
		block = r.GetContent()
		return nil
	})
	if err != nil {
		return err
	}
	depth, leafOf, err := treeDepth(tree)
	if err != nil {
		return err
	}
	blocks, why := blockErr == nil, ""
	if blockErr != nil {
		why = "no NVLink block level: not every node is in an MNNVL domain"
	} else if ok, w := blocksNest(block, leafOf); !ok {
		blocks, why = false, "no NVLink block level: "+w
	}
	comment := "Kueue Topology written by ginctl export kueue: levels are the Node labels gin-master --kube-labels keeps.\n" +
		"Refer to it from a ResourceFlavor (spec.topologyName: " + name + ")."
	if why != "" {
		comment += "\n" + why + "."
	}
	y, err := nodelabels.KueueTopology(name, nodelabels.KueueLevels(depth, blocks), comment)
	if err != nil {
		return usagef("--kueue-name: %v", err)
	}
	if out == "" || out == "-" {
		_, err = a.stdout.Write(y)
		return err
	}
	return os.WriteFile(out, y, 0o644)
}

// treeDepth reads a topology/tree topology.conf: the most switch levels
// above any node, and each node's leaf switch.
func treeDepth(conf []byte) (int, map[string]string, error) {
	parent := map[string]string{}
	leafOf := map[string]string{}
	for _, line := range strings.Split(string(conf), "\n") {
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		var sw, kind, list string
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "SwitchName":
				sw = v
			case "Nodes", "Switches":
				kind, list = k, v
			}
		}
		if sw == "" || list == "" {
			return 0, nil, fmt.Errorf("the master's Slurm tree export has a line ginctl does not read: %q", line)
		}
		names, err := hostlist.Expand(list)
		if err != nil {
			return 0, nil, fmt.Errorf("the master's Slurm tree export: %q: %w", line, err)
		}
		for _, n := range names {
			if kind == "Nodes" {
				leafOf[n] = sw
			} else {
				parent[n] = sw
			}
		}
	}
	depth := 0
	for _, leaf := range leafOf {
		d := 1
		for s := leaf; parent[s] != "" && d <= len(parent); s = parent[s] {
			d++
		}
		depth = max(depth, d)
	}
	return depth, leafOf, nil
}

// blocksNest reports whether every block of a topology/block
// topology.conf lies within one leaf, else why not.
func blocksNest(conf []byte, leafOf map[string]string) (bool, string) {
	for _, line := range strings.Split(string(conf), "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "BlockName="), " Nodes=")
		if !ok || !strings.HasPrefix(line, "BlockName=") {
			continue
		}
		nodes, err := hostlist.Expand(strings.TrimSpace(rest))
		if err != nil || len(nodes) == 0 {
			return false, fmt.Sprintf("block %s unreadable", name)
		}
		for _, n := range nodes[1:] {
			if leafOf[n] != leafOf[nodes[0]] {
				return false, fmt.Sprintf("block %s spans leaves %s and %s", name, leafOf[nodes[0]], leafOf[n])
			}
		}
	}
	return true, ""
}
