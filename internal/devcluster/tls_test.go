package devcluster

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/pki"
)

// TestStartWithTLS: with TLSDir the agents register over mutual TLS with
// their own certificates (Start returns once they have), an admin
// certificate reads, a plaintext client is refused, and a second cluster on
// the same directory keeps its CA.
func TestStartWithTLS(t *testing.T) {
	dir := t.TempDir()
	start := func() *Cluster {
		ctx, cancel := context.WithCancel(context.Background())
		c, done, err := Start(ctx, Config{Bind: "127.0.0.1:0", Agents: 2, HeartbeatInterval: time.Second, TLSDir: dir})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		t.Cleanup(func() { cancel(); <-done })
		return c
	}
	c := start()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	creds, err := pki.ClientCredentials(pki.Files{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "admin.pem"), Key: filepath.Join(dir, "admin-key.pem")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		opt     grpc.DialOption
		wantErr bool
	}{
		{"admin", grpc.WithTransportCredentials(creds), false},
		{"plaintext", grpc.WithTransportCredentials(insecure.NewCredentials()), true},
	} {
		conn, err := grpc.NewClient(c.Master.Addr(), tc.opt)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := ginv1.NewTopologyServiceClient(conn).ListNodes(ctx, &ginv1.ListNodesRequest{})
		_ = conn.Close()
		if tc.wantErr != (err != nil) || (!tc.wantErr && len(resp.GetNodes()) != 2) {
			t.Fatalf("%s: %d nodes, err %v; want error %v", tc.name, len(resp.GetNodes()), err, tc.wantErr)
		}
	}
	ca, err := pki.LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	start()
	again, err := pki.LoadCA(dir)
	if err != nil || !again.Cert.Equal(ca.Cert) {
		t.Fatalf("a second cluster on the directory changed the CA (%v)", err)
	}
}
