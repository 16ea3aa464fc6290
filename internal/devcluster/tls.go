package devcluster

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gin-topology/gin/internal/pki"
)

// MasterID is the dev master's Raft server id (and, with TLS, the name in
// its certificate, spiffe://gin/master/dev-master).
const MasterID = "dev-master"

// clusterTLS holds the dev cluster's credentials: nil for plaintext.
type clusterTLS struct {
	dir    string
	master *pki.Source
	log    *slog.Logger
}

// newClusterTLS makes (or keeps) the CA and the master's and an admin's
// certificates in dir and loads the master's. dir "" is plaintext.
func newClusterTLS(dir string, log *slog.Logger) (*clusterTLS, error) {
	if dir == "" {
		return nil, nil
	}
	t := &clusterTLS{dir: dir, log: log}
	src, err := t.ensure(pki.Identity{Role: pki.RoleMaster, Name: MasterID})
	if err != nil {
		return nil, err
	}
	t.master = src
	if _, err := t.ensure(pki.Identity{Role: pki.RoleAdmin}); err != nil {
		return nil, err
	}
	return t, nil
}

// ensure issues id's certificate in the directory unless it is there and
// loads it.
func (t *clusterTLS) ensure(id pki.Identity) (*pki.Source, error) {
	now := time.Now()
	ca, _, err := pki.EnsureCA(t.dir, 0, now)
	if err != nil {
		return nil, fmt.Errorf("dev cluster TLS: %w", err)
	}
	certPath, keyPath, _, err := ca.EnsureIssued(t.dir, pki.CertRequest{Identity: id}, now)
	if err != nil {
		return nil, fmt.Errorf("dev cluster TLS: %w", err)
	}
	src, err := pki.NewSource(pki.Files{CA: filepath.Join(t.dir, pki.CAFile), Cert: certPath, Key: keyPath}, t.log)
	if err != nil {
		return nil, fmt.Errorf("dev cluster TLS: %w", err)
	}
	return src, nil
}

// dial is the transport of a client with identity id (plaintext without TLS).
func (t *clusterTLS) dial(id pki.Identity) (grpc.DialOption, error) {
	if t == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials()), nil
	}
	src, err := t.ensure(id)
	if err != nil {
		return nil, err
	}
	return grpc.WithTransportCredentials(pki.ClientCredentialsFrom(src)), nil
}

// masterSource is the master's certificate source (nil without TLS).
func (t *clusterTLS) masterSource() *pki.Source {
	if t == nil {
		return nil
	}
	return t.master
}
