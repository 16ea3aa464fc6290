package master

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/authz"
	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/state"
)

// The certificate deny list (AdminService.DenyCertificate and friends).
// Entries are validated here and again in the FSM by
// state.CheckDeniedCertificate; every master enforces the replicated list
// (internal/authz at the gRPC listener, internal/raft at the Raft port).

func (a *adminService) DenyCertificate(ctx context.Context, req *ginv1.DenyCertificateRequest) (*ginv1.DenyCertificateResponse, error) {
	e, err := a.denyEntry(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := a.apply(ctx, &statev1.Command{Command: &statev1.Command_DenyCertificate{DenyCertificate: &statev1.DenyCertificate{Entry: e}}})
	if err != nil {
		return nil, toStatus(fmt.Errorf("deny certificate %s: %w", e.GetSerial(), err))
	}
	if err := a.waitDenyApplied(ctx, res.Index, "serial "+e.GetSerial()+" denied"); err != nil {
		return nil, toStatus(err)
	}
	stored, ok := a.store.DeniedCertificate(e.GetSerial())
	if !ok {
		return nil, toStatus(fmt.Errorf("deny entry %s committed at %d but not in the state", e.GetSerial(), res.Index))
	}
	a.log.Warn("certificate denied", "serial", e.GetSerial(), "reason", e.GetReason(), "by", e.GetDeniedBy(), "changed", res.Changed, "index", res.Index)
	if a.tls == nil {
		a.log.Warn("this master runs without TLS: the deny list is kept and replicated, but there are no certificates to refuse")
	}
	return &ginv1.DenyCertificateResponse{Entry: stored, Changed: res.Changed, Index: res.Index}, nil
}

// denyEntry validates a deny request at the edge: the serial canonical,
// the entry as the FSM will check it, room on the list for a new serial.
func (a *adminService) denyEntry(ctx context.Context, req *ginv1.DenyCertificateRequest) (*ginv1.DeniedCertificate, error) {
	serial, err := pki.ParseSerial(req.GetSerial())
	if err != nil {
		return nil, invalidf("serial", "%v", err)
	}
	e := &ginv1.DeniedCertificate{Serial: serial, Reason: req.GetReason(), DeniedAt: timestamppb.Now(),
		Identity: req.GetIdentity(), NotAfter: req.GetNotAfter()}
	if id, ok := authz.Identity(ctx); ok {
		e.DeniedBy = id.String()
	}
	if err := state.CheckDeniedCertificate(e); err != nil {
		return nil, invalidf("entry", "%v", err)
	}
	if _, ok := a.store.DeniedCertificate(serial); !ok {
		if n := a.store.DeniedCount(); n >= state.MaxDeniedCertificates {
			return nil, exhaustedf(apierr.ReasonDenyListFull, "serial %s not denied: the deny list holds %d entries, the most it may; take entries of expired certificates off it (ginctl tls allow SERIAL)",
				serial, n)
		}
	}
	return e, nil
}

func (a *adminService) AllowCertificate(ctx context.Context, req *ginv1.AllowCertificateRequest) (*ginv1.AllowCertificateResponse, error) {
	serial, err := pki.ParseSerial(req.GetSerial())
	if err != nil {
		return nil, toStatus(invalidf("serial", "%v", err))
	}
	if _, ok := a.store.DeniedCertificate(serial); !ok {
		return nil, toStatus(&notFound{msg: fmt.Sprintf("serial %s is not on the deny list", serial)})
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := a.apply(ctx, &statev1.Command{Command: &statev1.Command_AllowCertificate{AllowCertificate: &statev1.AllowCertificate{Serial: serial}}})
	if err != nil {
		return nil, toStatus(fmt.Errorf("allow certificate %s: %w", serial, err))
	}
	if err := a.waitDenyApplied(ctx, res.Index, "serial "+serial+" taken off the deny list"); err != nil {
		return nil, toStatus(err)
	}
	a.log.Warn("certificate taken off the deny list", "serial", serial, "changed", res.Changed, "index", res.Index)
	return &ginv1.AllowCertificateResponse{Changed: res.Changed, Index: res.Index}, nil
}

func (a *adminService) ListDeniedCertificates(context.Context, *ginv1.ListDeniedCertificatesRequest) (*ginv1.ListDeniedCertificatesResponse, error) {
	if err := a.outdated(); err != nil {
		return nil, toStatus(err)
	}
	return &ginv1.ListDeniedCertificatesResponse{Entries: a.store.DeniedCertificates()}, nil
}
