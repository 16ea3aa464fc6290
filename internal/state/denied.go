package state

import (
	"errors"
	"fmt"
	"net/url"
	"sort"

	"google.golang.org/protobuf/proto"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/inventory"
	"github.com/gin-topology/gin/internal/pki"
)

// Bounds of the certificate deny list (CheckDeniedCertificate).
const (
	MaxDeniedCertificates = 10000
	MaxDenyReasonLen      = 256
	maxDeniedByLen        = 2 * pki.MaxNameLen
)

// ErrTooManyDenied is returned when the deny list holds
// MaxDeniedCertificates entries and a new serial arrives.
var ErrTooManyDenied = errors.New("the certificate deny list is full")

// CheckDeniedCertificate is the one rule for a deny-list entry, applied at
// the edge and again by the FSM: the serial in its canonical form
// (pki.FormatSerial), a bounded reason and denier of printable text.
func CheckDeniedCertificate(e *ginv1.DeniedCertificate) error {
	if e == nil {
		return errors.New("entry is missing")
	}
	canon, err := pki.ParseSerial(e.GetSerial())
	if err != nil {
		return err
	}
	if canon != e.GetSerial() {
		return fmt.Errorf("serial %q is not in its canonical form %q", e.GetSerial(), canon)
	}
	if len(e.GetReason()) > MaxDenyReasonLen {
		return fmt.Errorf("reason is %d bytes, more than %d", len(e.GetReason()), MaxDenyReasonLen)
	}
	if err := inventory.CheckText(e.GetReason()); err != nil {
		return fmt.Errorf("reason: %w", err)
	}
	if len(e.GetDeniedBy()) > maxDeniedByLen {
		return fmt.Errorf("denied_by is %d bytes, more than %d", len(e.GetDeniedBy()), maxDeniedByLen)
	}
	if err := inventory.CheckText(e.GetDeniedBy()); err != nil {
		return fmt.Errorf("denied_by: %w", err)
	}
	if id := e.GetIdentity(); id != "" {
		if len(id) > maxDeniedByLen {
			return fmt.Errorf("identity is %d bytes, more than %d", len(id), maxDeniedByLen)
		}
		u, err := url.Parse(id)
		if err != nil {
			return fmt.Errorf("identity %q: %w", id, err)
		}
		if _, err := pki.ParseIdentity(u); err != nil {
			return err
		}
	}
	if t := e.GetNotAfter(); t != nil {
		if err := t.CheckValid(); err != nil {
			return fmt.Errorf("not_after: %w", err)
		}
	}
	return nil
}

// DenyCertificate puts a serial on the deny list; the first entry for a
// serial is kept (Changed false for a repeat).
func (s *Store) DenyCertificate(index uint64, cmd *statev1.DenyCertificate) (Result, error) {
	e := cmd.GetEntry()
	s.mu.Lock()
	s.bump(index)
	if err := CheckDeniedCertificate(e); err != nil {
		s.mu.Unlock()
		return Result{Index: index}, err
	}
	if _, ok := s.denied[e.GetSerial()]; ok {
		s.mu.Unlock()
		return Result{Index: index}, nil
	}
	if len(s.denied) >= MaxDeniedCertificates {
		s.mu.Unlock()
		return Result{Index: index}, fmt.Errorf("%w (%d entries); remove entries of expired certificates with ginctl tls allow", ErrTooManyDenied, MaxDeniedCertificates)
	}
	stored := proto.CloneOf(e)
	stored.Index = index
	if s.denied == nil {
		s.denied = map[string]*ginv1.DeniedCertificate{}
	}
	s.denied[e.GetSerial()] = stored
	hooks := s.onDeny
	s.mu.Unlock()
	for _, fn := range hooks {
		fn()
	}
	return Result{Index: index, Changed: true}, nil
}

// AllowCertificate takes a serial off the deny list; a no-op when absent.
func (s *Store) AllowCertificate(index uint64, cmd *statev1.AllowCertificate) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bump(index)
	if _, ok := s.denied[cmd.GetSerial()]; !ok {
		return Result{Index: index}, nil
	}
	delete(s.denied, cmd.GetSerial())
	return Result{Index: index, Changed: true}, nil
}

// Denied reports whether a serial (pki.FormatSerial form) is on the deny
// list, and why; it is the pki.DenyList every master enforces.
func (s *Store) Denied(serial string) (reason string, denied bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.denied[serial]
	return e.GetReason(), ok
}

// DeniedCount is the length of the deny list.
func (s *Store) DeniedCount() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.denied)
}

// DeniedCertificate returns one entry of the deny list; callers must not
// modify it.
func (s *Store) DeniedCertificate(serial string) (*ginv1.DeniedCertificate, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.denied[serial]
	return e, ok
}

// DeniedCertificates returns the deny list sorted by serial; callers must
// not modify the entries.
func (s *Store) DeniedCertificates() []*ginv1.DeniedCertificate {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return sortedDenied(s.denied)
}

// OnDeny adds fn to the functions called (on the applying goroutine, after
// the store's lock is released) whenever serials were added to the deny
// list, by a command or a snapshot restore: the gRPC server and the Raft
// transport end the connections of the newly denied certificates. fn must
// not block.
func (s *Store) OnDeny(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onDeny = append(s.onDeny, fn)
}

func sortedDenied(m map[string]*ginv1.DeniedCertificate) []*ginv1.DeniedCertificate {
	out := make([]*ginv1.DeniedCertificate, 0, len(m))
	for _, e := range m {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetSerial() < out[j].GetSerial() })
	return out
}

// restoreDenied checks a snapshot's deny list.
func restoreDenied(list []*ginv1.DeniedCertificate) (map[string]*ginv1.DeniedCertificate, error) {
	if len(list) > MaxDeniedCertificates {
		return nil, fmt.Errorf("snapshot deny list has %d entries, more than %d", len(list), MaxDeniedCertificates)
	}
	m := make(map[string]*ginv1.DeniedCertificate, len(list))
	for i, e := range list {
		if err := CheckDeniedCertificate(e); err != nil {
			return nil, fmt.Errorf("snapshot denied certificate %d: %w", i, err)
		}
		if _, dup := m[e.GetSerial()]; dup {
			return nil, fmt.Errorf("snapshot denies serial %s twice", e.GetSerial())
		}
		m[e.GetSerial()] = e
	}
	return m, nil
}
