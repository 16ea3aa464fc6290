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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gin-topology/gin/internal/ratelog"
)

// Source answers plan requests (the agent's plan store).
type Source interface {
	// Plan returns the job's encoded plan and its content hash, an error
	// wrapping ErrNotFound when there is none, or another error when it
	// cannot be had now.
	Plan(ctx context.Context, r Request) (plan []byte, hash string, err error)
}

// FrameCache is what a Source may offer besides Plan: the complete encoded
// OK response (AppendResponse) for a job's plan in a form, held in memory,
// so that the server answers a rank with one write of bytes prepared once,
// without a context, an encoding or an allocation per request. ok is false
// when the source would have to do more (fetch, create, report an error);
// the server then calls Plan. The frame must not be modified.
type FrameCache interface {
	CachedFrame(job []byte, form Form) (frame []byte, hash string, ok bool)
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
	src   Source
	cache FrameCache // src's fast path, or nil
	log   *slog.Logger
	ln    *net.UnixListener
	bufs  sync.Pool // *[MaxRequest]byte: a connection's request buffer
	// answered counts the answers written, by status (Answered).
	answered [StatusBadRequest + 1]atomic.Uint64
	// path is where the socket was renamed to; sock its file there, so
	// that Close unlinks path only while it still is this socket.
	path   string
	sock   fs.FileInfo
	unlink bool // false: Close leaves the socket (a test's killed agent)
	// lines bounds the lines a caller can cause (a miss, a refused or
	// unread connection, an answer not delivered): any local user can
	// send requests by the hundred thousand.
	lines *ratelog.Bucket
	reportCounters
}

// logLineRate and logLineBurst bound the server's caller-caused lines: a
// burst of 10, then one a second, the next line let through saying how
// many were left out (suppressed=N).
const (
	logLineRate  = 1
	logLineBurst = 10
)

// SuppressedLines is how many caller-caused log lines the rate limit has
// left out since the server started.
func (s *Server) SuppressedLines() uint64 { return s.lines.Suppressed() }

// logCaller writes one caller-caused line through the rate limit. Attrs
// carry the caller's job id (at most MaxJobID bytes) and at most
// ratelog.MaxEcho bytes of anything else it sent.
func (s *Server) logCaller(ctx context.Context, level slog.Level, msg string, attrs ...any) {
	s.lines.Log(ctx, s.log, level, msg, attrs...)
}

// Answered is how many requests the server answered with each status
// since it started, zeros included, keyed by Status.String() (OK,
// NOT_FOUND, UNAVAILABLE, BAD_REQUEST). An answer counts when it was
// written, whether or not the peer read it.
func (s *Server) Answered() map[string]uint64 {
	out := make(map[string]uint64, len(s.answered))
	for st := range s.answered {
		out[Status(st).String()] = s.answered[st].Load()
	}
	return out
}

func (s *Server) count(st Status) {
	if int(st) < len(s.answered) {
		s.answered[st].Add(1)
	}
}

// Listen creates the socket at path, readable and writable by every local
// user (mode 0666; any process of the node may ask for a plan), in a
// directory created 0755 when missing. The directory is checked as the
// plan directory is: this user's, and no one else may write to it (a
// directory another user may write to lets that user swap what sits at
// path). The socket is bound and made 0666 inside a private directory
// (0700) made there, then renamed into place, so no path is followed: a
// symlink raced in at path is replaced, never chmodded through. A stale
// socket left by a previous agent is replaced; a socket another process
// still serves, and any other file at path, are refused. A request from
// a peer other than root is served from what the agent holds or the
// masters have pinned: its node list is dropped, so only root (the Slurm
// prolog) can have a plan created.
func Listen(path string, src Source, log *slog.Logger) (*Server, error) {
	return listen(path, src, log, nil)
}

// listen is Listen; bound, when not nil, runs between the bind and the
// chmod (a test's racer swapping what sits at path).
func listen(path string, src Source, log *slog.Logger, bound func()) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plan socket %s: %w", path, err)
	}
	if err := checkSocketDir(dir); err != nil {
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
	}
	private, err := os.MkdirTemp(dir, ".gs")
	if err != nil {
		return nil, fmt.Errorf("plan socket %s: %w", path, err)
	}
	defer func() { _ = os.RemoveAll(private) }()
	at := filepath.Join(private, "s")
	if len(at) >= maxSunPath {
		return nil, fmt.Errorf("plan socket %s: the directory's path is too long to bind a socket in (%d bytes with the private directory, a socket path holds at most %d)", path, len(at), maxSunPath-1)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: at, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("plan socket: %w", err)
	}
	// The listener knows the private name; Close unlinks path itself.
	ln.SetUnlinkOnClose(false)
	if bound != nil {
		bound()
	}
	if err := os.Chmod(at, 0o666); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("plan socket %s: %w", path, err)
	}
	if err := os.Rename(at, path); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("plan socket %s: %w", path, err)
	}
	st, err := os.Lstat(path)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("plan socket %s: %w", path, err)
	}
	cache, _ := src.(FrameCache)
	return &Server{src: src, cache: cache, log: log, ln: ln, path: path, sock: st, unlink: true,
		lines: ratelog.New(logLineRate, logLineBurst, nil)}, nil
}

// maxSunPath is the size of sockaddr_un's sun_path on Linux (the path and
// its terminating NUL).
const maxSunPath = 108

// checkSocketDir checks that dir is a directory of this user's that no
// one else may write to.
func checkSocketDir(dir string) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("directory %s is owned by uid %d, not by this agent (uid %d): give a directory of the agent's own (the default is /run/gin)", dir, sys.Uid, os.Geteuid())
	}
	if st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("directory %s is writable by others (mode %v): another user could replace the socket; give a directory only the agent may write to (the default is /run/gin)", dir, st.Mode().Perm())
	}
	return nil
}

// Addr is the socket's path.
func (s *Server) Addr() string { return s.path }

// Serve answers connections until ctx ends, then closes the socket and
// waits for the connections in progress.
func (s *Server) Serve(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { _ = s.Close() })
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
		buf, _ := s.bufs.Get().(*[MaxRequest]byte)
		if buf == nil {
			buf = new([MaxRequest]byte)
		}
		at, err := s.serveAtOnce(ctx, c, buf)
		if err != nil {
			s.logCaller(ctx, slog.LevelWarn, "plan socket: peer unknown, connection closed", "err", err)
			_ = c.Close()
			s.bufs.Put(buf)
			continue
		}
		if at.served {
			s.bufs.Put(buf)
			continue
		}
		cred, n, rest := at.cred, at.n, at.rest
		mu.Lock()
		over := cred.Uid != 0 && perUID[cred.Uid] >= MaxConnsPerUID
		if !over {
			perUID[cred.Uid]++
		}
		mu.Unlock()
		if over {
			s.logCaller(ctx, slog.LevelWarn, "plan socket: too many connections from one user, connection closed", "uid", cred.Uid, "pid", cred.Pid, "limit", MaxConnsPerUID)
			_ = c.Close()
			s.bufs.Put(buf)
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			_ = c.Close()
			s.bufs.Put(buf)
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
			if rest != nil {
				s.bufs.Put(buf)
				s.finishWrite(c, cred, rest)
				return
			}
			s.serveConn(ctx, c, cred, buf, n)
		}()
	}
}

// Close closes the socket (Serve returns).
func (s *Server) Close() error {
	err := s.ln.Close()
	s.removeSocket()
	return err
}

// removeSocket unlinks the socket at path, as a listener does on close,
// unless path now holds another file (another agent's socket).
func (s *Server) removeSocket() {
	if !s.unlink {
		return
	}
	if st, err := os.Lstat(s.path); err == nil && os.SameFile(st, s.sock) {
		_ = os.Remove(s.path)
	}
}

// maxAtOnce bounds the answers the accept loop writes itself: far below a
// Unix socket's send buffer, so that the write completes at once whether
// or not the client reads.
const maxAtOnce = 64 << 10

// atOnce is what serveAtOnce did.
type atOnce struct {
	cred   *syscall.Ucred
	n      int    // request bytes read into the buffer
	rest   []byte // the part of the answer still to write
	served bool   // answered and closed
	// for the log
	job  []byte
	hash string
	werr error
}

// serveAtOnce is the accept loop's fast path, the one every rank of a
// started job takes. It asks the kernel who the peer is (SO_PEERCRED) and,
// when the request has already arrived (one read that does not wait) and
// the source holds its answer prepared (FrameCache), answers with one write
// that does not wait and closes the connection: no goroutine, no context,
// no wakeup of another thread, no allocation but the runtime's for the
// system calls. Otherwise it returns the bytes it read into buf for
// serveConn to go on from, or the part of the answer a full client queue
// did not take (rest). It never blocks. A connection served here holds no
// slot, so it is not counted against its user's limit.
func (s *Server) serveAtOnce(ctx context.Context, c *net.UnixConn, buf *[MaxRequest]byte) (atOnce, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return atOnce{}, err
	}
	var a atOnce
	var cerr error
	if err := raw.Control(func(fd uintptr) { cerr = s.atOnceFD(int(fd), buf, &a) }); err != nil {
		return atOnce{}, err
	}
	if cerr != nil {
		return atOnce{}, cerr
	}
	switch {
	case !a.served:
	case a.werr != nil:
		s.logCaller(ctx, slog.LevelWarn, "plan socket: answer not delivered", "uid", a.cred.Uid, "pid", a.cred.Pid, "job", string(a.job),
			"status", StatusOK.String(), "hash", a.hash, "err", a.werr)
	case s.log.Enabled(ctx, slog.LevelDebug):
		s.log.Debug("plan socket: plan served", "uid", a.cred.Uid, "pid", a.cred.Pid, "job", string(a.job),
			"status", StatusOK.String(), "hash", a.hash)
	}
	if a.served {
		_ = c.Close()
	}
	return a, nil
}

// atOnceFD is serveAtOnce's system calls on the connection's descriptor;
// it returns an error only when the peer is unknown.
func (s *Server) atOnceFD(fd int, buf *[MaxRequest]byte, a *atOnce) error {
	cred, err := syscall.GetsockoptUcred(fd, syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	if err != nil {
		return err
	}
	a.cred = cred
	if s.cache == nil {
		return nil
	}
	n, err := syscall.Read(fd, buf[:])
	if err != nil || n <= 0 {
		return nil // nothing yet (EAGAIN), or serveConn meets the error
	}
	a.n = n
	r, err := parseRequest(buf[:n])
	if err != nil {
		return nil
	}
	frame, hash, ok := s.cache.CachedFrame(r.jobID, r.form)
	if !ok || len(frame) > maxAtOnce {
		return nil
	}
	s.count(StatusOK) // before the write, so a peer that has its answer sees it counted (finishWrite writes the rest of this one)
	w, err := syscall.SendmsgN(fd, frame, nil, nil, syscall.MSG_NOSIGNAL)
	if errors.Is(err, syscall.EAGAIN) || (err == nil && w < len(frame)) {
		// The client's queue is full: a goroutine writes the rest.
		a.rest = frame[max(w, 0):]
		return nil
	}
	a.served, a.job, a.hash, a.werr = true, r.jobID, hash, err
	return nil
}

// finishWrite writes the rest of an answer serveAtOnce began.
func (s *Server) finishWrite(c *net.UnixConn, cred *syscall.Ucred, rest []byte) {
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(connTimeout))
	if _, err := c.Write(rest); err != nil {
		s.logCaller(context.Background(), slog.LevelWarn, "plan socket: answer not delivered", "uid", cred.Uid, "pid", cred.Pid, "status", StatusOK.String(), "err", err)
	}
}

// serveConn answers the request of which buf holds the first n bytes.
func (s *Server) serveConn(ctx context.Context, c *net.UnixConn, cred *syscall.Ucred, buf *[MaxRequest]byte, n int) {
	defer func() { _ = c.Close() }()
	defer s.bufs.Put(buf)
	if s.peekReport(c, buf, &n) {
		s.serveReport(ctx, c, cred, buf[:n])
		return
	}
	start := time.Now()
	_ = c.SetDeadline(start.Add(connTimeout))
	raw, err := readRequest(c, buf, n)
	if err == nil && s.cache != nil {
		// The ranks' path: the plan is held, its answer was encoded once.
		if frame, hash, ok := s.cache.CachedFrame(raw.jobID, raw.form); ok {
			s.count(StatusOK)
			_, werr := c.Write(frame)
			if werr != nil {
				s.logCaller(ctx, slog.LevelWarn, "plan socket: answer not delivered", "uid", cred.Uid, "pid", cred.Pid, "job", string(raw.jobID),
					"status", StatusOK.String(), "hash", hash, "took", time.Since(start).Round(time.Microsecond), "err", werr)
			} else if s.log.Enabled(ctx, slog.LevelDebug) {
				s.log.Debug("plan socket: plan served", "uid", cred.Uid, "pid", cred.Pid, "job", string(raw.jobID),
					"status", StatusOK.String(), "hash", hash, "took", time.Since(start).Round(time.Microsecond))
			}
			return
		}
	}
	ctx, cancel := context.WithTimeout(ctx, connTimeout)
	defer cancel()
	var req Request
	var resp Response
	switch {
	case err != nil:
		resp = Response{Status: StatusBadRequest, Body: clip(err.Error())}
	default:
		req = raw.request()
		req.UID = cred.Uid
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
	var b []byte
	var err2 error
	if frame, hash, ok := s.prepared(req, resp); ok {
		// The plan arrived while this request waited: its answer is
		// prepared, as for every later rank.
		b, resp.Hash = frame, hash
	} else {
		b, err2 = AppendResponse(nil, resp)
	}
	if err2 != nil {
		b, _ = AppendResponse(nil, Response{Status: StatusUnavailable, Body: clip(err2.Error())})
		resp.Status = StatusUnavailable
	}
	s.count(resp.Status)
	_, werr := c.Write(b)
	level := slog.LevelInfo
	switch {
	case werr != nil:
		level = slog.LevelWarn
	case resp.Status == StatusOK:
		level = slog.LevelDebug
	}
	if !s.log.Enabled(ctx, level) {
		return
	}
	attrs := []any{"uid", cred.Uid, "pid", cred.Pid, "job", req.JobID, "status", resp.Status.String(),
		"hash", resp.Hash, "took", time.Since(start).Round(time.Microsecond)}
	switch {
	case werr != nil:
		s.logCaller(ctx, slog.LevelWarn, "plan socket: answer not delivered", append(attrs, "err", werr)...)
	case resp.Status == StatusOK:
		// Debug only (an operator's choice), and a served plan is the
		// answer ranks are meant to get: not rate limited.
		s.log.Debug("plan socket: plan served", attrs...)
	default:
		s.logCaller(ctx, slog.LevelInfo, "plan socket: no plan served", append(attrs, "reason", ratelog.Clip(string(resp.Body)))...)
	}
}

// peekReport says whether a connection opens with a report frame rather
// than a plan request, reading into buf (which holds n bytes) only while
// the bytes so far could be either.
func (s *Server) peekReport(c *net.UnixConn, buf *[MaxRequest]byte, n *int) bool {
	if *n > 0 && !isReport(buf[:*n]) {
		return false
	}
	_ = c.SetReadDeadline(time.Now().Add(connTimeout))
	for *n < len(ReportMagic) {
		k, err := c.Read(buf[*n:])
		*n += k
		if err != nil || !isReport(buf[:*n]) {
			break
		}
	}
	return *n >= len(ReportMagic) && isReport(buf[:*n])
}

// prepared is the source's prepared answer for an OK response to req, when
// it has one for the same plan.
func (s *Server) prepared(req Request, resp Response) ([]byte, string, bool) {
	if s.cache == nil || resp.Status != StatusOK {
		return nil, "", false
	}
	frame, hash, ok := s.cache.CachedFrame([]byte(req.JobID), req.Form)
	return frame, hash, ok && hash == resp.Hash
}

// readRequest reads one request into buf, in as few reads as the client's
// writes allow (one, for a client that sends its request at once).
// buf holds the first n bytes already.
func readRequest(c net.Conn, buf *[MaxRequest]byte, n int) (rawRequest, error) {
	if n > 0 {
		if r, perr := parseRequest(buf[:n]); perr == nil || !errors.Is(perr, errShort) {
			return r, perr
		}
	}
	for {
		k, err := c.Read(buf[n:])
		n += k
		r, perr := parseRequest(buf[:n])
		if perr == nil || !errors.Is(perr, errShort) {
			return r, perr
		}
		if err != nil {
			return rawRequest{}, fmt.Errorf("request incomplete after %d bytes: %w", n, err)
		}
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
