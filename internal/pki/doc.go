// Package pki is GIN's certificate authority and TLS plumbing: it creates the
// cluster CA and leaf certificates (`ginctl tls ca create`, `ginctl tls cert
// create`), encodes who a certificate belongs to as exactly one URI SAN
// spiffe://gin/<role>/<name> (role = master, agent, admin, scheduler or
// reader; name = the master's node id or the agent's node name, optional for
// the other roles), reads that identity back from a verified peer
// certificate, and builds TLS 1.3 mutual-TLS configurations from files that
// are re-read whenever they change (certificate rotation and CA changes
// without a restart; a half-written pair keeps the last good one). It also
// holds the one form of a certificate serial (FormatSerial, ParseSerial) and
// refuses certificates on the cluster's deny list in handshakes
// (ServerConfigDenying, ClientConfigDenying; the list itself is replicated
// state, internal/state).
package pki
