package main

import (
	"context"
	"fmt"
	"log/slog"

	"google.golang.org/grpc"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/livereport"
	"github.com/gin-topology/gin/internal/plansock"
)

// startLive takes the profiler plugin's rank reports on the node socket
// and sends the node's windows to the masters every second, until ctx
// ends. Without a node socket (--plan-socket "") there is nothing to take:
// it returns nil.
func startLive(ctx context.Context, sock *plansock.Server, node string, masters []string, creds grpc.DialOption,
	inv func() *ginv1.NodeInventory, log *slog.Logger) (*livereport.Collector, func(), error) {
	if sock == nil {
		return nil, func() {}, nil
	}
	send, err := livereport.NewMasters(masters, creds)
	if err != nil {
		return nil, nil, fmt.Errorf("live telemetry: %w", err)
	}
	c := livereport.New(node, livereport.NICOf(inv), log)
	sock.SetReportSink(c)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx, livereport.DefaultFlush, send)
	}()
	return c, func() { cancel(); <-done; _ = send.Close() }, nil
}
