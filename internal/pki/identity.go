package pki

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// TrustDomain is the SPIFFE trust domain of every GIN identity.
const TrustDomain = "gin"

// Role is what a certificate's holder may do (the authorization table,
// internal/authz, maps every gRPC method to the roles allowed).
type Role string

// The roles.
const (
	RoleMaster    Role = "master"    // a gin-master; name = its Raft node id
	RoleAgent     Role = "agent"     // a gin-agent; name = its node name
	RoleAdmin     Role = "admin"     // an operator: membership, fabric, nodes
	RoleScheduler Role = "scheduler" // Slurm prolog/epilog: pins and expires plans
	RoleReader    Role = "reader"    // reads only
)

// Roles lists every role, in a stable order.
func Roles() []Role {
	return []Role{RoleMaster, RoleAgent, RoleAdmin, RoleScheduler, RoleReader}
}

// MaxNameLen bounds an identity's name (a DNS label-sized host name, or a
// Raft server id).
const MaxNameLen = 128

// ParseRole returns the role named s.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles() {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("role %q: want one of master, agent, admin, scheduler, reader", s)
}

// NeedsName reports whether certificates of this role must name their
// holder (masters and agents: the name is what they may write as).
func (r Role) NeedsName() bool { return r == RoleMaster || r == RoleAgent }

// Identity is the principal a certificate carries.
type Identity struct {
	Role Role
	Name string // may be empty for admin, scheduler and reader
}

// String is the SPIFFE ID, spiffe://gin/<role>[/<name>].
func (id Identity) String() string { return id.URI().String() }

// URI is the SPIFFE ID as a URL (the certificate's URI SAN).
func (id Identity) URI() *url.URL {
	p := "/" + string(id.Role)
	if id.Name != "" {
		p += "/" + id.Name
	}
	return &url.URL{Scheme: "spiffe", Host: TrustDomain, Path: p}
}

// Validate checks the role and the name: a name of 1..MaxNameLen bytes of
// letters, digits, '.', '-' and '_' (no '/', no control characters).
func (id Identity) Validate() error {
	if _, err := ParseRole(string(id.Role)); err != nil {
		return err
	}
	if id.Name == "" {
		if id.Role.NeedsName() {
			return fmt.Errorf("a %s certificate needs a name (the %s)", id.Role, map[Role]string{RoleMaster: "master's --node-id", RoleAgent: "node name"}[id.Role])
		}
		return nil
	}
	return validName(id.Name)
}

func validName(name string) error {
	if len(name) > MaxNameLen {
		return fmt.Errorf("name is %d bytes, more than %d", len(name), MaxNameLen)
	}
	for i, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_'
		if !ok {
			return fmt.Errorf("name %q: character %q at byte %d (want letters, digits, '.', '-', '_')", name, c, i)
		}
	}
	if name == "." || name == ".." {
		return fmt.Errorf("name %q is not allowed", name)
	}
	return nil
}

// ParseIdentity parses a SPIFFE ID spiffe://gin/<role>[/<name>].
func ParseIdentity(u *url.URL) (Identity, error) {
	if u == nil {
		return Identity{}, errors.New("no identity URI")
	}
	if u.Scheme != "spiffe" || u.Host != TrustDomain || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return Identity{}, fmt.Errorf("identity %q: want spiffe://%s/<role>[/<name>]", u.String(), TrustDomain)
	}
	// The SPIFFE ID spec allows no percent-encoding in the path, and a
	// certificate's bytes are its identity: spiffe://gin/%61dmin must not
	// be read as spiffe://gin/admin (url.Parse decodes it into Path).
	if strings.Contains(u.EscapedPath(), "%") || strings.Contains(u.RawPath, "%") {
		return Identity{}, fmt.Errorf("identity %q: percent-encoding in a SPIFFE ID's path is refused", u.String())
	}
	parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	if !strings.HasPrefix(u.Path, "/") || len(parts) > 2 {
		return Identity{}, fmt.Errorf("identity %q: want spiffe://%s/<role>[/<name>]", u.String(), TrustDomain)
	}
	role, err := ParseRole(parts[0])
	if err != nil {
		return Identity{}, fmt.Errorf("identity %q: %w", u.String(), err)
	}
	id := Identity{Role: role}
	if len(parts) == 2 {
		if parts[1] == "" {
			return Identity{}, fmt.Errorf("identity %q: empty name", u.String())
		}
		id.Name = parts[1]
	}
	if err := id.Validate(); err != nil {
		return Identity{}, fmt.Errorf("identity %q: %w", u.String(), err)
	}
	return id, nil
}

// IdentityFromCert reads the identity of a certificate: it must carry
// exactly one URI SAN, a GIN SPIFFE ID. Call it only on a certificate that
// was verified against the cluster CA.
func IdentityFromCert(c *x509.Certificate) (Identity, error) {
	if c == nil {
		return Identity{}, errors.New("no certificate")
	}
	if len(c.URIs) != 1 {
		return Identity{}, fmt.Errorf("certificate %s has %d URI SANs, want exactly one spiffe://%s/<role>[/<name>]", c.SerialNumber, len(c.URIs), TrustDomain)
	}
	return ParseIdentity(c.URIs[0])
}
