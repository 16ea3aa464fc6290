package pki

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// EnsureCA loads the CA in dir when both of its files are there and creates
// it when neither is (created reports which). One file without the other is
// an error: the CA is never replaced, so certificates already issued stay
// valid when a set-up step runs again (compose's certs service at every
// `up`).
func EnsureCA(dir string, days int, now time.Time) (ca *CA, created bool, err error) {
	certThere, err := exists(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, false, err
	}
	keyThere, err := exists(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, false, err
	}
	switch {
	case certThere && keyThere:
		ca, err = LoadCA(dir)
		return ca, false, err
	case certThere || keyThere:
		return nil, false, fmt.Errorf("pki: %s holds only one of %s and %s; restore the other, or remove both to make a new CA (every certificate must then be issued again)", dir, CAFile, CAKeyFile)
	}
	ca, err = CreateCA(dir, days, now)
	return ca, err == nil, err
}

// EnsureIssued issues req into dir (as IssueToDir) unless its pair is
// already there; a kept pair must be signed by ca and name req's identity,
// else it is an error naming the file (a CA made anew does not silently keep
// certificates no master accepts).
func (ca *CA) EnsureIssued(dir string, req CertRequest, now time.Time) (certPath, keyPath string, created bool, err error) {
	c, k := CertFiles(req.Identity)
	certPath, keyPath = filepath.Join(dir, c), filepath.Join(dir, k)
	certThere, err := exists(certPath)
	if err != nil {
		return "", "", false, err
	}
	keyThere, err := exists(keyPath)
	if err != nil {
		return "", "", false, err
	}
	switch {
	case certThere && keyThere:
		return certPath, keyPath, false, ca.checkIssued(certPath, req.Identity)
	case certThere || keyThere:
		return "", "", false, fmt.Errorf("pki: only one of %s and %s exists; remove it to issue the pair again", certPath, keyPath)
	}
	certPath, keyPath, err = ca.IssueToDir(dir, req, now)
	return certPath, keyPath, err == nil, err
}

// checkIssued verifies that the certificate in path was signed by ca and
// names id.
func (ca *CA) checkIssued(path string, id Identity) error {
	certs, err := readCerts(path)
	if err != nil {
		return err
	}
	if err := certs[0].CheckSignatureFrom(ca.Cert); err != nil {
		return fmt.Errorf("pki: %s was not issued by this CA (%v); remove it and its key to issue it again", path, err)
	}
	got, err := IdentityFromCert(certs[0])
	if err != nil {
		return fmt.Errorf("pki: %s: %w", path, err)
	}
	if got != id {
		return fmt.Errorf("pki: %s is for %s, not %s", path, got, id)
	}
	return nil
}

func exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, fmt.Errorf("pki: %w", err)
}
