package main

import (
	"context"
	"fmt"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/promsd"
)

// exportPrometheusSD writes the file_sd targets of every node's agent and
// every master (`ginctl export prometheus-sd`), to stdout or atomically to
// out.
func (a *app) exportPrometheusSD(ctx context.Context, out string, agentPort, masterPort int) error {
	var nodes *ginv1.ListNodesResponse
	if err := a.withTopology(ctx, func(ctx context.Context, tc ginv1.TopologyServiceClient) (err error) {
		nodes, err = tc.ListNodes(ctx, &ginv1.ListNodesRequest{})
		return err
	}); err != nil {
		return err
	}
	info, err := a.clusterInfo(ctx)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(nodes.GetNodes()))
	for _, n := range nodes.GetNodes() {
		names = append(names, n.GetName())
	}
	var masters []promsd.Master
	for _, m := range info.GetMembers() {
		if m.GetClientAddress() == "" {
			return fmt.Errorf("prometheus-sd: master %s has no client address in the cluster's configuration", m.GetId())
		}
		masters = append(masters, promsd.Master{ID: m.GetId(), ClientAddress: m.GetClientAddress(), HTTPAddress: m.GetHttpAddress()})
	}
	groups, err := promsd.Build(names, masters, agentPort, masterPort)
	if err != nil {
		return usagef("%v", err)
	}
	b, err := promsd.Marshal(groups)
	if err != nil {
		return err
	}
	if out == "" || out == "-" {
		_, err = a.stdout.Write(b)
		return err
	}
	return promsd.WriteFile(out, b)
}
