package authz_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/authz"
	"github.com/gin-topology/gin/internal/pki"
)

// TestForwardedForIsHonouredFromMastersOnly: a master forwarding a call
// for a caller is checked as that caller; anyone else naming a caller is
// checked as itself, so a reader cannot claim an admin's rights.
func TestForwardedForIsHonouredFromMastersOnly(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.CreateCA(dir, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	peerCtx := func(id pki.Identity, forwardedFor string) context.Context {
		certPEM, _, err := ca.Issue(pki.CertRequest{Identity: id}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(certPEM)
		leaf, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		ctx := peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{leaf, ca.Cert}}}}})
		if forwardedFor != "" {
			ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(authz.ForwardedForKey, forwardedFor))
		}
		return ctx
	}
	master := pki.Identity{Role: pki.RoleMaster, Name: "m2"}
	admin := pki.Identity{Role: pki.RoleAdmin, Name: "ops"}
	reader := pki.Identity{Role: pki.RoleReader}
	tests := []struct {
		name   string
		caller pki.Identity
		forFor string
		method string
		code   codes.Code
		as     pki.Identity // the identity the handler sees, when allowed
	}{
		{"a master for an admin", master, admin.String(), ginv1.AdminService_DenyCertificate_FullMethodName, codes.OK, admin},
		{"a master for a reader's write", master, reader.String(), ginv1.PlanService_DeletePlan_FullMethodName, codes.PermissionDenied, pki.Identity{}},
		{"a master for itself", master, "", ginv1.RelayService_ReportSessions_FullMethodName, codes.OK, master},
		{"a master without a caller on an admin write", master, "", ginv1.AdminService_DenyCertificate_FullMethodName, codes.PermissionDenied, pki.Identity{}},
		{"a master naming no identity", master, "spiffe://elsewhere/admin", ginv1.AdminService_DenyCertificate_FullMethodName, codes.Unauthenticated, pki.Identity{}},
		{"a reader claiming an admin", reader, admin.String(), ginv1.AdminService_DenyCertificate_FullMethodName, codes.PermissionDenied, pki.Identity{}},
	}
	a := authz.New(authz.Table())
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, err := a.Authorize(peerCtx(tc.caller, tc.forFor), tc.method)
			if status.Code(err) != tc.code {
				t.Fatalf("Authorize = %v, want %v", err, tc.code)
			}
			if err != nil {
				return
			}
			if id, _ := authz.Identity(ctx); id != tc.as {
				t.Fatalf("the handler sees %v, want %v", id, tc.as)
			}
		})
	}
}
