// Package authz is the masters' authorization: one table (table.go) maps
// every gRPC method the masters serve to the roles allowed to call it, and
// one interceptor (unary and stream) checks it against the identity of the
// caller's verified client certificate (internal/pki). It denies by default:
// a method without a row is refused, a caller without a certificate is
// Unauthenticated, a caller whose role has no right is PermissionDenied.
// With a deny list (WithDenyList, the replicated list of internal/state) it
// also refuses certificates by serial (Unauthenticated naming the serial),
// and closes the connections a certificate holds when it is denied later
// (Credentials, EndDenied).
// Rules that depend on a message (an agent writes only the node its
// certificate names) are checked by the service with Identity from the
// context.
package authz
