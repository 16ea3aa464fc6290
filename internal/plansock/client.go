package plansock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// Fetch asks the agent at path for a plan within ctx. It refuses to talk to
// a socket whose server is neither root nor this user (SO_PEERCRED), so
// another local user cannot pose as the agent.
func Fetch(ctx context.Context, path string, r Request) (Response, error) {
	req, err := AppendRequest(nil, r)
	if err != nil {
		return Response{}, fmt.Errorf("plan request: %w", err)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return Response{}, fmt.Errorf("agent socket %s: %w", path, err)
	}
	c := nc.(*net.UnixConn)
	defer func() { _ = c.Close() }()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	cred, err := peerCred(c)
	if err != nil {
		return Response{}, fmt.Errorf("agent socket %s: who serves it: %w", path, err)
	}
	if cred.Uid != 0 && int(cred.Uid) != os.Getuid() {
		return Response{}, fmt.Errorf("agent socket %s: served by uid %d (pid %d), neither root nor this user; not trusted", path, cred.Uid, cred.Pid)
	}
	if _, err := c.Write(req); err != nil {
		return Response{}, fmt.Errorf("agent socket %s: %w", path, deadlineErr(ctx, err))
	}
	resp, err := ReadResponse(c)
	if err != nil {
		return Response{}, fmt.Errorf("agent socket %s: %w", path, deadlineErr(ctx, err))
	}
	return resp, nil
}

func deadlineErr(ctx context.Context, err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) || ctx.Err() != nil {
		return fmt.Errorf("no answer in time: %w", err)
	}
	return err
}
