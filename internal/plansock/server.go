package plansock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Source answers plan requests (the agent's plan store).
type Source interface {
	// Plan returns the job's encoded plan and its content hash, an error
	// wrapping ErrNotFound when there is none, or another error when it
	// cannot be had now.
	Plan(ctx context.Context, r Request) (plan []byte, hash string, err error)
}

// ErrNotFound says that the job has no plan.
var ErrNotFound = errors.New("no plan for this job")

// Server limits.
const (
	// DefaultPath is where gin-agent serves plans and the plugin asks.
	DefaultPath = "/run/gin/agent.sock"
	// connTimeout bounds one connection: request, answer and write.
	connTimeout = 10 * time.Second
	// maxConns bounds the connections served at once.
	maxConns = 512
	// MaxConnsPerUID bounds one user's connections at once, so that no
	// local user can hold every slot while the ranks of another's job
	// start (root is not limited).
	MaxConnsPerUID = 64
)

// Server serves a Source on a Unix socket.
type Server struct {
	src Source
	log *slog.Logger
	ln  *net.UnixListener
}

// Listen creates the socket at path, readable and writable by every local
// user (mode 0666; any process of the node may ask for a plan), in a
// directory created 0755 when missing. A stale socket left by a previous
// agent is replaced; a socket another process still serves, and any other
// file at path, are refused. A request from a peer other than root is
// served from what the agent holds or the masters have pinned: its node
// list is dropped, so only root (the Slurm prolog) can have a plan created.
func Listen(path string, src Source, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("plan socket %s: %w", path, err)
	}
	if st, err := os.Lstat(path); err == nil {
		if st.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("plan socket %s: exists and is not a socket (%s)", path, st.Mode().Type())
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			_ = c.Close()
			return nil, fmt.Errorf("plan socket %s: another process serves it (another gin-agent?)", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("plan socket %s: removing the stale socket: %w", path, err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("plan socket: %w", err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("plan socket %s: %w", path, err)
	}
	return &Server{src: src, log: log, ln: ln}, nil
}

// Addr is the socket's path.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Serve answers connections until ctx ends, then closes the socket and
// waits for the connections in progress.
func (s *Server) Serve(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { _ = s.ln.Close() })
	defer stop()
	sem := make(chan struct{}, maxConns)
	var mu sync.Mutex
	perUID := map[uint32]int{}
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("plan socket: %w", err)
		}
		cred, err := peerCred(c)
		if err != nil {
			s.log.Warn("plan socket: peer unknown, connection closed", "err", err)
			_ = c.Close()
			continue
		}
		mu.Lock()
		over := cred.Uid != 0 && perUID[cred.Uid] >= MaxConnsPerUID
		if !over {
			perUID[cred.Uid]++
		}
		mu.Unlock()
		if over {
			s.log.Warn("plan socket: too many connections from one user, connection closed", "uid", cred.Uid, "pid", cred.Pid, "limit", MaxConnsPerUID)
			_ = c.Close()
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			_ = c.Close()
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				<-sem
				mu.Lock()
				if perUID[cred.Uid]--; perUID[cred.Uid] <= 0 {
					delete(perUID, cred.Uid)
				}
				mu.Unlock()
			}()
			s.serveConn(ctx, c, cred)
		}()
	}
}

// Close closes the socket (Serve returns).
func (s *Server) Close() error { return s.ln.Close() }

func (s *Server) serveConn(ctx context.Context, c *net.UnixConn, cred *syscall.Ucred) {
	defer func() { _ = c.Close() }()
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, connTimeout)
	defer cancel()
	_ = c.SetDeadline(start.Add(connTimeout))
	uid, pid := int(cred.Uid), int(cred.Pid)
	req, err := ReadRequest(c)
	var resp Response
	switch {
	case err != nil:
		resp = Response{Status: StatusBadRequest, Body: clip(err.Error())}
	default:
		if cred.Uid != 0 {
			// Only root (the Slurm prolog) may have a plan created: for
			// anyone else the node list is dropped, so the agent serves a
			// plan that is held or pinned and never pins one a local user
			// made up (for another user's job id, on other nodes).
			req.Nodes, req.GPUsPerNode = "", 0
		}
		plan, hash, perr := s.src.Plan(ctx, req)
		switch {
		case perr == nil:
			resp = Response{Status: StatusOK, Hash: hash, Body: plan}
		case errors.Is(perr, ErrNotFound):
			resp = Response{Status: StatusNotFound, Body: clip(perr.Error())}
		default:
			resp = Response{Status: StatusUnavailable, Body: clip(perr.Error())}
		}
	}
	b, err2 := AppendResponse(nil, resp)
	if err2 != nil {
		b, _ = AppendResponse(nil, Response{Status: StatusUnavailable, Body: clip(err2.Error())})
		resp.Status = StatusUnavailable
	}
	_, werr := c.Write(b)
	attrs := []any{"uid", uid, "pid", pid, "job", req.JobID, "status", resp.Status.String(),
		"hash", resp.Hash, "took", time.Since(start).Round(time.Microsecond)}
	switch {
	case werr != nil:
		s.log.Warn("plan socket: answer not delivered", append(attrs, "err", werr)...)
	case resp.Status == StatusOK:
		s.log.Debug("plan socket: plan served", attrs...)
	default:
		s.log.Info("plan socket: no plan served", append(attrs, "reason", string(resp.Body))...)
	}
}

// clip bounds a message to MaxMessage bytes.
func clip(s string) []byte {
	if len(s) > MaxMessage {
		s = s[:MaxMessage]
	}
	return []byte(s)
}

// peerCred is the kernel's word on who is at the other end of c.
func peerCred(c *net.UnixConn) (*syscall.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}
