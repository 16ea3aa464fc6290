package pki

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// MaxSerialBytes bounds a certificate serial number (RFC 5280, 4.1.2.2).
const MaxSerialBytes = 20

// FormatSerial is THE form of a certificate serial in GIN: upper-case hex,
// an even number of digits, no separators, as `openssl x509 -serial`
// prints it. The deny list stores it and `ginctl tls` prints it.
func FormatSerial(n *big.Int) string {
	if n == nil {
		return ""
	}
	s := strings.ToUpper(n.Text(16))
	if len(s)%2 == 1 {
		s = "0" + s
	}
	return s
}

// ParseSerial reads a serial as people copy it: hex in either case, with or
// without ':' (or ' ') between bytes, with an optional "serial=" (openssl)
// or "0x" prefix, and returns its FormatSerial form. It refuses anything
// else, zero, and more than MaxSerialBytes bytes.
func ParseSerial(s string) (string, error) {
	orig := s
	s = strings.TrimSpace(s)
	if len(s) > 4*MaxSerialBytes+16 {
		return "", fmt.Errorf("serial %.40q...: longer than a %d-byte serial", orig, MaxSerialBytes)
	}
	s = strings.TrimPrefix(strings.TrimPrefix(s, "serial="), "SERIAL=")
	s = strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	s = strings.NewReplacer(":", "", " ", "").Replace(s)
	if s == "" {
		return "", errors.New("serial is empty (want hex, as `openssl x509 -noout -serial` prints it)")
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return "", fmt.Errorf("serial %q: %q is not a hex digit (want hex, as `openssl x509 -noout -serial` prints it)", orig, c)
		}
	}
	n, ok := new(big.Int).SetString(s, 16)
	if !ok {
		return "", fmt.Errorf("serial %q is not hex", orig)
	}
	if n.Sign() == 0 {
		return "", fmt.Errorf("serial %q is zero", orig)
	}
	if len(n.Bytes()) > MaxSerialBytes {
		return "", fmt.Errorf("serial %q has %d bytes, more than %d", orig, len(n.Bytes()), MaxSerialBytes)
	}
	return FormatSerial(n), nil
}

// ReadCertificate reads the first certificate of a PEM file (bounded).
func ReadCertificate(path string) (*x509.Certificate, error) {
	certs, err := readCerts(path)
	if err != nil {
		return nil, err
	}
	return certs[0], nil
}

// KeySHA256 is the hex SHA-256 of a certificate's public key (its
// SubjectPublicKeyInfo): a node's binding names its CA by it.
func KeySHA256(c *x509.Certificate) string {
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return hex.EncodeToString(sum[:])
}

// DenyList answers whether a certificate serial (FormatSerial form) is on
// the cluster's deny list, and why.
type DenyList interface {
	Denied(serial string) (reason string, denied bool)
}

// DeniedError is the refusal of a certificate on the deny list.
type DeniedError struct {
	Serial, Reason string
	Identity       Identity
}

func (e *DeniedError) Error() string {
	msg := fmt.Sprintf("certificate serial %s (%s) is denied", e.Serial, e.Identity)
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg + " (ginctl tls denied lists the deny list)"
}

// CheckDenied returns a *DeniedError when leaf's serial is on list (nil
// list: nothing is denied). leaf must have been verified against the
// cluster CA: the list names serials of that CA's certificates.
func CheckDenied(list DenyList, leaf *x509.Certificate) error {
	if list == nil || leaf == nil {
		return nil
	}
	serial := FormatSerial(leaf.SerialNumber)
	reason, denied := list.Denied(serial)
	if !denied {
		return nil
	}
	id, _ := IdentityFromCert(leaf)
	return &DeniedError{Serial: serial, Reason: reason, Identity: id}
}
