//go:build linux

package rdmanl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// defaultDumpTimeout bounds DumpQPs when ctx has no deadline.
	defaultDumpTimeout = 10 * time.Second
	// maxDumpBytes bounds what DumpQPs keeps (about 2M QPs).
	maxDumpBytes = 256 << 20
	recvBufBytes = 1 << 20
	pollSlice    = 100 * time.Millisecond
)

// DumpQPs asks the kernel, over NETLINK_RDMA, for every RDMA device
// (RDMA_NLDEV_CMD_GET) and then for each device's QPs
// (RDMA_NLDEV_CMD_RES_QP_GET dump), and returns the raw reply messages, each
// one whole netlink message, for ParseQPDump. Each device's dump ends with
// its NLMSG_DONE.
//
// It stops at ctx's deadline, or after 10 s when ctx has none. On a kernel
// without RDMA netlink it returns an error wrapping ErrNoRDMA; on one with
// the RDMA stack but no device, an empty result. QPs of processes in other
// PID namespaces are hidden by the kernel.
func DumpQPs(ctx context.Context) ([][]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultDumpTimeout)
		defer cancel()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_RDMA)
	if err != nil {
		if errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.EAFNOSUPPORT) {
			return nil, fmt.Errorf("%w: socket(AF_NETLINK, NETLINK_RDMA): %v", ErrNoRDMA, err)
		}
		return nil, fmt.Errorf("rdma netlink: socket: %w", err)
	}
	c := &nlConn{fd: fd, buf: make([]byte, recvBufBytes), seq: uint32(time.Now().UnixNano())}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("rdma netlink: bind: %w", err)
	}

	// 1. The devices.
	seq, err := c.send(msgType(cmdGet), nil)
	if err != nil {
		return nil, err
	}
	var devs []rdmaDevice
	for {
		b, err := c.recv(ctx)
		if err != nil {
			return nil, err
		}
		got, done, err := parseDevices(0, b, seq)
		if err != nil {
			return nil, fmt.Errorf("rdma netlink: device list: %w", err)
		}
		devs = append(devs, got...)
		if done {
			break
		}
	}

	// 2. One QP dump per device, as iproute2's `rdma resource show qp` does.
	out := [][]byte{}
	size := 0
	for _, d := range devs {
		seq, err := c.send(TypeResQPGet, appendAttrU32(nil, attrDevIndex, d.index))
		if err != nil {
			return nil, err
		}
		for done := false; !done; {
			b, err := c.recv(ctx)
			if err != nil {
				return nil, fmt.Errorf("rdma netlink: %s QPs: %w", d.name, err)
			}
			ms, err := splitMessages(0, b)
			if err != nil {
				return nil, fmt.Errorf("rdma netlink: %s QPs: %w", d.name, err)
			}
			for _, m := range ms {
				if m.seq != seq {
					continue
				}
				switch m.typ {
				case nlmsgDone:
					done = true
				case nlmsgError:
					if err := errorMessage(0, m); err != nil {
						return nil, fmt.Errorf("rdma netlink: %s QPs: %w", d.name, err)
					}
				}
				raw := b[m.off-nlmsgHdrLen : m.off+len(m.payload)]
				size += len(raw)
				if size > maxDumpBytes {
					return nil, fmt.Errorf("rdma netlink: QP dump larger than %d bytes", maxDumpBytes)
				}
				out = append(out, append([]byte(nil), raw...))
				if done {
					break
				}
			}
		}
	}
	return out, nil
}

type nlConn struct {
	fd  int
	buf []byte
	seq uint32
}

// send writes one dump request and returns its sequence number.
func (c *nlConn) send(typ uint16, attrs []byte) (uint32, error) {
	c.seq++
	req := appendMsg(nil, typ, nlmFRequest|nlmFDump, c.seq, 0, attrs)
	if err := unix.Sendto(c.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("rdma netlink: send: %w", err)
	}
	return c.seq, nil
}

// recv reads one datagram from the kernel, waiting at most until ctx ends.
func (c *nlConn) recv(ctx context.Context) ([]byte, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n, _, flags, from, err := unix.Recvmsg(c.fd, c.buf, nil, 0)
		switch {
		case err == nil:
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
			wait := pollSlice
			if dl, ok := ctx.Deadline(); ok {
				wait = min(wait, time.Until(dl))
			}
			if wait <= 0 {
				continue // ctx.Err() ends the loop
			}
			fds := []unix.PollFd{{Fd: int32(c.fd), Events: unix.POLLIN}}
			if _, err := unix.Poll(fds, int(wait.Milliseconds())+1); err != nil && !errors.Is(err, unix.EINTR) {
				return nil, fmt.Errorf("rdma netlink: poll: %w", err)
			}
			continue
		default:
			return nil, fmt.Errorf("rdma netlink: recv: %w", err)
		}
		if flags&unix.MSG_TRUNC != 0 {
			return nil, errors.New("rdma netlink: reply truncated by the receive buffer")
		}
		if sa, ok := from.(*unix.SockaddrNetlink); ok && sa.Pid != 0 {
			continue // not from the kernel
		}
		return c.buf[:n], nil
	}
}
