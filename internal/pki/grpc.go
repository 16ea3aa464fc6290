package pki

import (
	"fmt"
	"log/slog"

	"google.golang.org/grpc/credentials"
)

// ClientCredentials loads files and returns gRPC transport credentials that
// dial masters with mTLS (the server must present a master certificate of
// the cluster CA naming the dialled host or IP).
func ClientCredentials(files Files, log *slog.Logger) (credentials.TransportCredentials, error) {
	src, err := NewSource(files, log)
	if err != nil {
		return nil, fmt.Errorf("mTLS: %w", err)
	}
	return credentials.NewTLS(ClientConfig(src, RequireRole(RoleMaster))), nil
}

// ServerCredentials are gRPC transport credentials for a master's listener:
// mTLS with a client certificate of the cluster CA required.
func ServerCredentials(src *Source) credentials.TransportCredentials {
	return credentials.NewTLS(ServerConfig(src, nil))
}

// ClientCredentialsFrom are mTLS dial credentials over an already loaded
// source (a master dialling the other masters with its own certificate).
func ClientCredentialsFrom(src *Source) credentials.TransportCredentials {
	return credentials.NewTLS(ClientConfig(src, RequireRole(RoleMaster)))
}

// ClientCredentialsDenying is ClientCredentialsFrom that also refuses a
// master whose certificate serial is on deny (masters dialling each other).
func ClientCredentialsDenying(src *Source, deny DenyList) credentials.TransportCredentials {
	return credentials.NewTLS(ClientConfigDenying(src, RequireRole(RoleMaster), deny))
}
