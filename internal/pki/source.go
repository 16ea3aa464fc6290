package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Files names the PEM files of one process's TLS identity: the cluster CA
// (the roots peers are verified against), its certificate and its key.
type Files struct {
	CA, Cert, Key string
}

// Given reports whether any file is named; Validate then requires all three.
func (f Files) Given() bool { return f.CA != "" || f.Cert != "" || f.Key != "" }

// Validate requires all three files to be named.
func (f Files) Validate() error {
	var missing []string
	for _, x := range []struct{ flag, v string }{{"--tls-ca", f.CA}, {"--tls-cert", f.Cert}, {"--tls-key", f.Key}} {
		if x.v == "" {
			missing = append(missing, x.flag)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("TLS needs --tls-ca, --tls-cert and --tls-key together (env GIN_TLS_CA, GIN_TLS_CERT, GIN_TLS_KEY); missing %v", missing)
	}
	return nil
}

// FilesFromEnv fills the files not given as flags from GIN_TLS_CA,
// GIN_TLS_CERT and GIN_TLS_KEY.
func FilesFromEnv(f Files, getenv func(string) string) Files {
	if f.CA == "" {
		f.CA = getenv("GIN_TLS_CA")
	}
	if f.Cert == "" {
		f.Cert = getenv("GIN_TLS_CERT")
	}
	if f.Key == "" {
		f.Key = getenv("GIN_TLS_KEY")
	}
	return f
}

// Source serves the current CA pool and key pair of Files. Every handshake
// asks it; it re-reads a file when its size or modification time changed
// (rotation without a restart) and keeps the last good material when the
// new one does not load (a pair caught half-written, a broken file), logging
// why. A Source is safe for concurrent use.
type Source struct {
	files Files
	log   *slog.Logger

	mu      sync.Mutex
	stamp   [3]fileStamp // CA, cert, key as last loaded (or tried)
	pool    *x509.CertPool
	pair    *tls.Certificate
	ident   Identity
	lastErr error
	gen     uint64 // successful reloads after the first load
}

type fileStamp struct {
	size int64
	mod  time.Time
	ok   bool
}

// NewSource loads the files once; a missing or invalid file is an error
// here (later failures keep the last good material).
func NewSource(files Files, log *slog.Logger) (*Source, error) {
	if err := files.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{files: files, log: log}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(); err != nil {
		return nil, err
	}
	return s, nil
}

// Identity is the identity of the current certificate.
func (s *Source) Identity() Identity {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maybeReloadLocked()
	return s.ident
}

// Serial is the current certificate's serial (FormatSerial form).
func (s *Source) Serial() string {
	leaf, err := s.leaf()
	if err != nil {
		return ""
	}
	return FormatSerial(leaf.SerialNumber)
}

// leaf is the current certificate, parsed.
func (s *Source) leaf() (*x509.Certificate, error) {
	pair := s.Certificate()
	if pair.Leaf != nil {
		return pair.Leaf, nil
	}
	return x509.ParseCertificate(pair.Certificate[0])
}

// Pool is the current CA pool.
func (s *Source) Pool() *x509.CertPool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maybeReloadLocked()
	return s.pool
}

// Certificate is the current key pair.
func (s *Source) Certificate() *tls.Certificate {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maybeReloadLocked()
	return s.pair
}

func (s *Source) current() (*x509.CertPool, *tls.Certificate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maybeReloadLocked()
	return s.pool, s.pair
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{size: fi.Size(), mod: fi.ModTime(), ok: true}
}

func (s *Source) maybeReloadLocked() {
	now := [3]fileStamp{stampOf(s.files.CA), stampOf(s.files.Cert), stampOf(s.files.Key)}
	if now == s.stamp {
		return
	}
	if err := s.reloadLocked(); err != nil {
		if s.lastErr == nil || s.lastErr.Error() != err.Error() {
			s.log.Warn("TLS files changed but do not load; keeping the previous certificate and CA", "err", err)
		}
		s.lastErr = err
		return
	}
	s.lastErr = nil
	s.gen++
	s.log.Info("TLS certificate and CA reloaded", "identity", s.ident.String(), "cert", s.files.Cert)
}

func (s *Source) reloadLocked() error {
	// The stamps are taken before reading: a write racing the read changes
	// them again and the next handshake reloads.
	stamp := [3]fileStamp{stampOf(s.files.CA), stampOf(s.files.Cert), stampOf(s.files.Key)}
	s.stamp = stamp
	cas, err := readCerts(s.files.CA)
	if err != nil {
		return fmt.Errorf("--tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	for _, c := range cas {
		pool.AddCert(c)
	}
	certPEM, err := readBounded(s.files.Cert)
	if err != nil {
		return fmt.Errorf("--tls-cert: %w", err)
	}
	keyPEM, err := readBounded(s.files.Key)
	if err != nil {
		return fmt.Errorf("--tls-key: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("--tls-cert %s / --tls-key %s: %w", s.files.Cert, s.files.Key, err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return fmt.Errorf("--tls-cert %s: %w", s.files.Cert, err)
		}
	}
	id, err := IdentityFromCert(leaf)
	if err != nil {
		return fmt.Errorf("--tls-cert %s: %w", s.files.Cert, err)
	}
	inter := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return verifyErr(s.files, leaf, err)
	}
	s.pool, s.pair, s.ident = pool, &pair, id
	return nil
}

// ErrNoPeerCertificate is returned when a peer presented no certificate.
var ErrNoPeerCertificate = errors.New("peer presented no certificate")

// CoversHost reports whether the current certificate names host (a DNS
// name or an IP address) as a SAN, as peers dialling that host require.
func (s *Source) CoversHost(host string) error {
	leaf, err := s.leaf()
	if err != nil {
		return err
	}
	if err := leaf.VerifyHostname(host); err != nil {
		return fmt.Errorf("%s: %w", s.files.Cert, err)
	}
	return nil
}

// Generation counts the successful reloads since NewSource; it checks the
// files first, so polling it also picks up changes between handshakes.
func (s *Source) Generation() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maybeReloadLocked()
	return s.gen
}

// verifyErr says why the certificate does not verify against the CA: an
// expired (or not yet valid) certificate is named as such, with its dates
// and the command that renews it, not as a certificate of another CA.
func verifyErr(f Files, leaf *x509.Certificate, err error) error {
	var inv x509.CertificateInvalidError
	if errors.As(err, &inv) && inv.Reason == x509.Expired {
		now := time.Now()
		if now.After(leaf.NotAfter) {
			return fmt.Errorf("--tls-cert %s expired on %s (%s ago): issue a new one (ginctl tls cert create; docs/SECURITY.md): %w",
				f.Cert, leaf.NotAfter.UTC().Format(time.RFC3339), now.Sub(leaf.NotAfter).Round(time.Minute), ErrCertExpired)
		}
		if now.Before(leaf.NotBefore) {
			return fmt.Errorf("--tls-cert %s is not valid before %s (this host's clock says %s: is it right?): %w",
				f.Cert, leaf.NotBefore.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), ErrCertExpired)
		}
		// The leaf is in its dates: the CA or an intermediate expired.
		return fmt.Errorf("--tls-cert %s: its CA --tls-ca %s (or a certificate between them) has expired: %w", f.Cert, f.CA, ErrCertExpired)
	}
	return fmt.Errorf("--tls-cert %s is not signed by --tls-ca %s: %w", f.Cert, f.CA, err)
}

// ErrCertExpired marks a certificate outside its validity dates.
var ErrCertExpired = errors.New("certificate outside its validity period")
