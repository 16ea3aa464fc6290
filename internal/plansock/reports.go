package plansock

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gin-topology/gin/internal/rankreport"
)

// The profiler plugin's reports share the node socket with plan requests
// (one per connection, no answer): a connection whose first bytes are
// ReportMagic carries one frame of internal/rankreport's format, which the
// server reads whole, within reportTimeout and MaxReportBody, and hands to
// the ReportSink with the peer's credentials. The per-user connection
// bound covers reports as it covers plan requests.

// ReportMagic opens a report frame; reportHeader is its header's length
// and MaxReportBody its body's bound (internal/rankreport's format).
const (
	ReportMagic   = rankreport.Magic
	reportHeader  = rankreport.HeaderLen
	MaxReportBody = rankreport.MaxBody
	reportTimeout = 2 * time.Second
)

// ReportSink takes the reports of the node's ranks (the agent's live
// collector, internal/livereport). Report must not block: it is called on
// the connection's goroutine, with frame the whole frame (header and
// body), which it must not keep.
type ReportSink interface {
	Report(uid, pid uint32, frame []byte) error
}

// SetReportSink makes the server take report frames (before Serve);
// without one a report is read and dropped (counted).
func (s *Server) SetReportSink(r ReportSink) { s.reports.Store(&r) }

// Reports is how many report frames the server took and how many it
// refused (malformed, over the bounds, or refused by the sink).
func (s *Server) Reports() (taken, refused uint64) {
	return s.reportsTaken.Load(), s.reportsRefused.Load()
}

type reportCounters struct {
	reports                      atomic.Pointer[ReportSink]
	reportsTaken, reportsRefused atomic.Uint64
}

func isReport(b []byte) bool {
	n := min(len(b), len(ReportMagic))
	return n > 0 && string(b[:n]) == ReportMagic[:n]
}

// serveReport reads one report frame, of which buf holds the first n bytes.
func (s *Server) serveReport(ctx context.Context, c *net.UnixConn, cred *syscall.Ucred, first []byte) {
	_ = c.SetDeadline(time.Now().Add(reportTimeout))
	err := s.readReport(c, cred, first)
	if err != nil {
		s.reportsRefused.Add(1)
		s.logCaller(ctx, slog.LevelWarn, "plan socket: report refused", "uid", cred.Uid, "pid", cred.Pid, "err", err)
		return
	}
	s.reportsTaken.Add(1)
}

func (s *Server) readReport(c net.Conn, cred *syscall.Ucred, first []byte) error {
	var hdr [reportHeader]byte
	n := copy(hdr[:], first)
	if n < reportHeader {
		if _, err := io.ReadFull(c, hdr[n:]); err != nil {
			return fmt.Errorf("report header incomplete: %w", err)
		}
	}
	if string(hdr[:4]) != ReportMagic {
		return errors.New("not a report frame")
	}
	body := binary.BigEndian.Uint32(hdr[8:12])
	if body > MaxReportBody {
		return fmt.Errorf("report body of %d bytes, at most %d", body, MaxReportBody)
	}
	frame := make([]byte, reportHeader+int(body))
	copy(frame, hdr[:])
	got := copy(frame[reportHeader:], first[min(len(first), reportHeader):])
	if len(first) > len(frame) {
		return fmt.Errorf("%d bytes after the report frame", len(first)-len(frame))
	}
	if _, err := io.ReadFull(c, frame[reportHeader+got:]); err != nil {
		return fmt.Errorf("report body incomplete: %w", err)
	}
	sink := s.reports.Load()
	if sink == nil {
		return errors.New("this agent takes no reports (live telemetry off)")
	}
	return (*sink).Report(cred.Uid, uint32(cred.Pid), frame)
}
