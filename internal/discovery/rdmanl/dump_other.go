//go:build !linux

package rdmanl

import "context"

// DumpQPs needs Linux's NETLINK_RDMA; elsewhere it returns ErrNoRDMA.
func DumpQPs(ctx context.Context) ([][]byte, error) { return nil, ErrNoRDMA }
