//go:build !linux

package sysfs

import "errors"

// procfsDevice without procfs: its InfiniBand reader is Linux-only. The own
// readers do all the work elsewhere; they read the same files.
func procfsDevice(sysRoot, name string) (*ibDevBasics, error) {
	return nil, errors.New("procfs InfiniBand reader not built in (Linux only)")
}
