package master

import (
	"context"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	"github.com/gin-topology/gin/internal/authz"
	"github.com/gin-topology/gin/internal/pki"
)

// sessionBinding is what binds a node to the agent certificate of the
// session in ctx: its identity (spiffe://gin/agent/<node>), the SHA-256 of
// the public key of the cluster CA that anchors it, and its serial. nil
// without TLS (no verified certificate): the machine_id binding applies
// alone then.
//
// Why the CA key and not the certificate or its key: agents renew their
// certificates (new serial, often a new key) without anyone touching the
// node records, and a renewed certificate of the same CA must keep working.
// The identity already equals the node name (the session refuses any
// other), so the CA key is what the binding adds: a certificate for the
// name from another CA that a master happens to trust (a CA bundle during
// a migration) does not take over a node registered under the first one.
// Changing the cluster CA's key therefore means `ginctl node delete` for
// its nodes (docs/SECURITY.md). A stolen certificate is stopped with the
// deny list (ginctl tls deny), not with the binding.
func sessionBinding(ctx context.Context) *statev1.NodeBinding {
	id, ok := authz.Identity(ctx)
	if !ok {
		return nil
	}
	chain, err := authz.PeerChain(ctx)
	if err != nil {
		return nil
	}
	return &statev1.NodeBinding{
		Identity:    id.String(),
		CaKeySha256: pki.KeySHA256(chain[len(chain)-1]),
		Serial:      pki.FormatSerial(chain[0].SerialNumber),
	}
}
