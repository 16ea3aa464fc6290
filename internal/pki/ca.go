package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// File names in a certificate directory.
const (
	CAFile    = "ca.pem"
	CAKeyFile = "ca-key.pem"
)

// Validity defaults and bounds, in days.
const (
	DefaultCADays   = 1825
	DefaultCertDays = 365
	MaxDays         = 3650
	// MaxSANs bounds the --dns and --ip entries of one certificate.
	MaxSANs = 64
)

// notBeforeSkew back-dates certificates a little so that a peer whose clock
// is slightly behind accepts them.
const notBeforeSkew = time.Minute

// CA is a loaded certificate authority (certificate and private key).
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// CreateCA creates a new CA valid for days (0: DefaultCADays) and writes it
// to dir/ca.pem and dir/ca-key.pem (key mode 0600). It refuses to overwrite
// an existing CA.
func CreateCA(dir string, days int, now time.Time) (*CA, error) {
	if days == 0 {
		days = DefaultCADays
	}
	if days < 1 || days > MaxDays {
		return nil, fmt.Errorf("days %d: want 1..%d", days, MaxDays)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: generate CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "GIN cluster CA", Organization: []string{"GIN"}},
		NotBefore:             now.Add(-notBeforeSkew),
		NotAfter:              now.Add(time.Duration(days) * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		PermittedURIDomains:   []string{TrustDomain},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("pki: create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: parse CA certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	if err := writePair(filepath.Join(dir, CAFile), encodeCert(der), filepath.Join(dir, CAKeyFile), keyPEM); err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

// LoadCA reads dir/ca.pem and dir/ca-key.pem.
func LoadCA(dir string) (*CA, error) {
	certs, err := readCerts(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, err
	}
	keyPath := filepath.Join(dir, CAKeyFile)
	b, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("pki: read CA key: %w", err)
	}
	key, err := parseKey(b)
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %w", keyPath, err)
	}
	if !certs[0].IsCA {
		return nil, fmt.Errorf("pki: %s is not a CA certificate", filepath.Join(dir, CAFile))
	}
	if !publicKeysEqual(certs[0].PublicKey, key.Public()) {
		return nil, fmt.Errorf("pki: %s does not match %s", keyPath, filepath.Join(dir, CAFile))
	}
	return &CA{Cert: certs[0], Key: key}, nil
}

// CertRequest describes a leaf certificate.
type CertRequest struct {
	Identity Identity
	DNS      []string
	IPs      []net.IP
	Days     int // 0: DefaultCertDays
}

// Issue signs a new leaf certificate for req with a fresh P-256 key and
// returns both PEM encoded. Master certificates also name localhost,
// 127.0.0.1 and ::1 and may serve and dial (ServerAuth+ClientAuth); every
// other role only dials (ClientAuth).
func (ca *CA) Issue(req CertRequest, now time.Time) (certPEM, keyPEM []byte, err error) {
	if err := req.Identity.Validate(); err != nil {
		return nil, nil, err
	}
	days := req.Days
	if days == 0 {
		days = DefaultCertDays
	}
	if days < 1 || days > MaxDays {
		return nil, nil, fmt.Errorf("days %d: want 1..%d", days, MaxDays)
	}
	if len(req.DNS)+len(req.IPs) > MaxSANs {
		return nil, nil, fmt.Errorf("%d DNS names and IP addresses: at most %d", len(req.DNS)+len(req.IPs), MaxSANs)
	}
	for _, d := range req.DNS {
		if err := validDNS(d); err != nil {
			return nil, nil, err
		}
	}
	notAfter := now.Add(time.Duration(days) * 24 * time.Hour)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter // a leaf never outlives its CA
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: generate key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: req.Identity.String(), Organization: []string{"GIN"}},
		NotBefore:    now.Add(-notBeforeSkew),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		URIs:         []*url.URL{req.Identity.URI()},
		DNSNames:     append([]string(nil), req.DNS...),
		IPAddresses:  append([]net.IP(nil), req.IPs...),
	}
	if req.Identity.Role == RoleMaster {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.DNSNames = appendMissing(tmpl.DNSNames, "localhost")
		tmpl.IPAddresses = appendMissingIP(tmpl.IPAddresses, net.IPv4(127, 0, 0, 1), net.IPv6loopback)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: sign certificate: %w", err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return encodeCert(der), keyPEM, nil
}

// CertFiles are the file names of a leaf: ROLE-NAME.pem and
// ROLE-NAME-key.pem, or ROLE.pem and ROLE-key.pem without a name.
func CertFiles(id Identity) (cert, key string) {
	base := string(id.Role)
	if id.Name != "" {
		base += "-" + id.Name
	}
	return base + ".pem", base + "-key.pem"
}

// IssueToDir issues a certificate and writes it into dir under CertFiles
// (key mode 0600), refusing to overwrite existing files. It returns the
// paths written.
func (ca *CA) IssueToDir(dir string, req CertRequest, now time.Time) (certPath, keyPath string, err error) {
	certPEM, keyPEM, err := ca.Issue(req, now)
	if err != nil {
		return "", "", err
	}
	c, k := CertFiles(req.Identity)
	certPath, keyPath = filepath.Join(dir, c), filepath.Join(dir, k)
	if err := writePair(certPath, certPEM, keyPath, keyPEM); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

// writePair writes a certificate (0644) and its key (0600), both created
// exclusively: nothing is overwritten, and a failure leaves neither.
func writePair(certPath string, certPEM []byte, keyPath string, keyPEM []byte) error {
	for _, p := range []string{certPath, keyPath} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("pki: %s exists; remove it first to replace it", p)
		}
	}
	if err := writeExclusive(keyPath, keyPEM, 0o600); err != nil {
		return err
	}
	if err := writeExclusive(certPath, certPEM, 0o644); err != nil {
		_ = os.Remove(keyPath)
		return err
	}
	return nil
}

func writeExclusive(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	if err := f.Chmod(mode); err != nil { // the umask may have narrowed it; never widen a key
		_ = f.Close()
		_ = os.Remove(path)
		return fmt.Errorf("pki: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	return nil
}

func newSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("pki: serial: %w", err)
	}
	return s.Add(s, big.NewInt(1)), nil // positive
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func parseKey(b []byte) (crypto.Signer, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("no PEM block")
	}
	var k any
	var err error
	switch blk.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(blk.Bytes)
	default:
		return nil, fmt.Errorf("PEM block %q is not a private key", blk.Type)
	}
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("key type %T cannot sign", k)
	}
	return s, nil
}

// maxPEMBytes bounds every certificate, CA and key file read.
const maxPEMBytes = 1 << 20

// readCerts reads every CERTIFICATE block of a PEM file (at least one).
func readCerts(path string) ([]*x509.Certificate, error) {
	b, err := readBounded(path)
	if err != nil {
		return nil, err
	}
	certs, err := parseCerts(b)
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %w", path, err)
	}
	return certs, nil
}

func parseCerts(b []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no CERTIFICATE in PEM data")
	}
	return certs, nil
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPEMBytes+1))
	if err != nil {
		return nil, fmt.Errorf("pki: read %s: %w", path, err)
	}
	if len(b) > maxPEMBytes {
		return nil, fmt.Errorf("pki: %s is larger than %d bytes", path, maxPEMBytes)
	}
	return b, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	ak, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ak.Equal(b)
}

func validDNS(d string) error {
	if d == "" || len(d) > 253 {
		return fmt.Errorf("DNS name %q: want 1..253 bytes", d)
	}
	for i, c := range d {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || (c == '*' && i == 0)
		if !ok {
			return fmt.Errorf("DNS name %q: character %q at byte %d", d, c, i)
		}
	}
	return nil
}

func appendMissing(list []string, v string) []string {
	for _, x := range list {
		if x == v {
			return list
		}
	}
	return append(list, v)
}

func appendMissingIP(list []net.IP, ips ...net.IP) []net.IP {
next:
	for _, ip := range ips {
		for _, x := range list {
			if x.Equal(ip) {
				continue next
			}
		}
		list = append(list, ip)
	}
	return list
}
