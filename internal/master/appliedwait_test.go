package master

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/pki"
)

// TestDenyListChangeHoldsOnEveryMasterWhenAnswered: when `tls deny` or
// `tls allow` hears success, every master the leader reaches has applied
// the change, so the very next call to a follower with the certificate is
// refused (deny) or served (allow). The test asserts the ordering (each
// follower's state holds the change when the answer arrives), not a
// duration. The liveness clock stands still, so the followers, once their
// first session report has reached the leader, stay reachable however
// slowly this machine runs.
func TestDenyListChangeHoldsOnEveryMasterWhenAnswered(t *testing.T) {
	p := newTestPKI(t)
	clk := newFakeClock()
	ms := startClusterWith(t, 3, func(c *Config) {
		c.TLS = p.source(t, pki.Identity{Role: pki.RoleMaster, Name: c.ID})
		c.LivenessClock = clk
	})
	var leader *member
	waitUntil(t, "a leader that hears every follower's reports", func() bool {
		leader = leaderOf(ms)
		if leader == nil || len(leader.s.node.Stats().Members) != 3 {
			return false
		}
		for _, m := range ms {
			if _, ok := m.s.store.Server(m.s.cfg.ID); !ok {
				return false
			}
			if ok, _, _ := leader.s.live.reach(m.s.cfg.ID); m != leader && !ok {
				return false
			}
		}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := ginv1.NewAdminServiceClient(p.dial(t, leader.s.Addr(), pki.Identity{Role: pki.RoleAdmin}))
	readerSrc := p.source(t, pki.Identity{Role: pki.RoleReader, Name: "dash"})
	serial := readerSrc.Serial()
	var followers []*member
	for _, m := range ms {
		if m != leader {
			followers = append(followers, m)
		}
	}
	// Each call dials anew: a denied certificate's open connections are
	// closed after the commit, asynchronously, and are not the point here.
	call := func(m *member) error {
		conn := dialWith(t, m.s.Addr(), readerSrc)
		_, err := ginv1.NewAdminServiceClient(conn).GetClusterInfo(ctx, &ginv1.GetClusterInfoRequest{})
		_ = conn.Close()
		return err
	}

	d, err := admin.DenyCertificate(ctx, &ginv1.DenyCertificateRequest{Serial: serial, Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range followers {
		if got := f.s.store.Index(); got < d.GetIndex() {
			t.Errorf("deny answered at index %d while %s had applied %d", d.GetIndex(), f.s.cfg.ID, got)
		}
		if err := call(f); status.Code(err) != codes.Unauthenticated {
			t.Errorf("right after the deny, %s served the denied certificate: %v, want Unauthenticated", f.s.cfg.ID, err)
		}
	}

	a, err := admin.AllowCertificate(ctx, &ginv1.AllowCertificateRequest{Serial: serial})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range followers {
		if got := f.s.store.Index(); got < a.GetIndex() {
			t.Errorf("allow answered at index %d while %s had applied %d", a.GetIndex(), f.s.cfg.ID, got)
		}
		if err := call(f); err != nil {
			t.Errorf("right after the allow, %s refused the certificate: %v", f.s.cfg.ID, err)
		}
	}

	// A master the leader still counts reachable (its clock stands still)
	// that cannot answer is named when the caller's deadline nears; the
	// entry is committed all the same.
	gone := followers[1]
	gone.crash()
	sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
	defer scancel()
	_, err = admin.DenyCertificate(sctx, &ginv1.DenyCertificateRequest{Serial: serial, Reason: "again"})
	if status.Code(err) != codes.Aborted || !strings.Contains(err.Error(), gone.s.cfg.ID+" had not applied it") {
		t.Fatalf("deny with %s down: %v, want Aborted naming it", gone.s.cfg.ID, err)
	}
	if _, ok := leader.s.store.DeniedCertificate(serial); !ok {
		t.Fatal("the deny whose wait ended early is not committed")
	}
}
