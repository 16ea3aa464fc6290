package kubetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Version is the Kubernetes release the harness builds and runs; the
// client-go the module pins is its v0 staging release.
const Version = "v1.36.3"

// AdminToken is the bearer token of the user "admin" (group
// system:masters, which RBAC lets do everything).
const AdminToken = "kubetest-admin"

// BinDir is where kube-apiserver and kubectl are kept across runs: the
// environment's GIN_K8S_BIN, else /var/cache/gin-k8s-ci/<Version>.
func BinDir() string {
	if d := os.Getenv("GIN_K8S_BIN"); d != "" {
		return d
	}
	return filepath.Join("/var/cache/gin-k8s-ci", Version)
}

// Find returns BinDir when it holds kube-apiserver and kubectl and etcd is
// on the PATH; else an error that says how to get them.
func Find() (string, error) {
	dir := BinDir()
	var missing []string
	for _, b := range []string{"kube-apiserver", "kubectl"} {
		if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.Mode()&0o111 == 0 {
			missing = append(missing, filepath.Join(dir, b))
		}
	}
	if _, err := exec.LookPath("etcd"); err != nil {
		missing = append(missing, "etcd (apt-get install etcd-server)")
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("no Kubernetes API server to test against: missing %s (bash scripts/k8s-harness.sh build)", strings.Join(missing, ", "))
	}
	return dir, nil
}

// User is a static-token user of the API server.
type User struct {
	Token, Name string
	Groups      []string
}

// Server is a running etcd and kube-apiserver.
type Server struct {
	bin, dir          string
	etcdPort, apiPort int
	etcd, api         *exec.Cmd
	apiDone           chan struct{}
	users             []User
	// URL is the API server's https://127.0.0.1:PORT.
	URL string
}

// Start starts etcd and kube-apiserver from bin (Find) with the admin and
// users, and returns once /readyz answers; both are stopped when tb ends.
func Start(tb testing.TB, bin string, users ...User) *Server {
	tb.Helper()
	s := &Server{bin: bin, dir: tb.TempDir(), users: append([]User{{Token: AdminToken, Name: "admin", Groups: []string{"system:masters"}}}, users...)}
	for _, u := range s.users {
		if strings.ContainsAny(u.Token+u.Name+strings.Join(u.Groups, ""), ",\"\n") {
			tb.Fatalf("kubetest: user %q: token, name and groups must not hold commas, quotes or newlines", u.Name)
		}
	}
	if err := s.writeFiles(); err != nil {
		tb.Fatalf("kubetest: %v", err)
	}
	s.etcdPort, s.apiPort = freePort(tb), freePort(tb)
	peer := freePort(tb)
	s.URL = "https://127.0.0.1:" + strconv.Itoa(s.apiPort)
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(s.etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peer)
	s.etcd = exec.Command("etcd", "--name", "kubetest", "--data-dir", filepath.Join(s.dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "kubetest="+peerURL)
	if err := startLogged(s.etcd, filepath.Join(s.dir, "etcd.log")); err != nil {
		tb.Fatalf("kubetest: etcd: %v", err)
	}
	tb.Cleanup(func() { stop(s.etcd) })
	tb.Cleanup(func() { s.stopAPI() })
	if err := s.startAPI(); err != nil {
		tb.Fatalf("kubetest: %v", err)
	}
	if err := s.waitReady(90 * time.Second); err != nil {
		tb.Fatalf("kubetest: %v\n%s", err, tail(filepath.Join(s.dir, "kube-apiserver.log")))
	}
	return s
}

// StopAPI stops kube-apiserver (etcd keeps running); StartAPI brings it
// back. Tests use them to hold the API server down for a while.
func (s *Server) StopAPI() { s.stopAPI() }

// StartAPI starts a stopped kube-apiserver and waits until it is ready.
func (s *Server) StartAPI(tb testing.TB) {
	tb.Helper()
	if err := s.startAPI(); err != nil {
		tb.Fatalf("kubetest: %v", err)
	}
	if err := s.waitReady(90 * time.Second); err != nil {
		tb.Fatalf("kubetest: %v\n%s", err, tail(filepath.Join(s.dir, "kube-apiserver.log")))
	}
}

// CAFile is the API server's serving CA (a self-signed certificate for
// 127.0.0.1).
func (s *Server) CAFile() string { return filepath.Join(s.dir, "serving.crt") }

// Kubeconfig writes (once) and returns a kubeconfig file for the user of
// that name.
func (s *Server) Kubeconfig(tb testing.TB, user string) string {
	tb.Helper()
	var u *User
	for i := range s.users {
		if s.users[i].Name == user {
			u = &s.users[i]
		}
	}
	if u == nil {
		tb.Fatalf("kubetest: no user %q", user)
	}
	p := filepath.Join(s.dir, "kubeconfig-"+user)
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kubetest
  cluster: {server: %q, certificate-authority: %q}
users:
- name: %s
  user: {token: %q}
contexts:
- name: kubetest
  context: {cluster: kubetest, user: %s}
current-context: kubetest
`, s.URL, s.CAFile(), u.Name, u.Token, u.Name)
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// Kubectl runs kubectl as user with args (and stdin when not nil) and
// returns its stdout, or an error carrying its stderr.
func (s *Server) Kubectl(tb testing.TB, user string, stdin []byte, args ...string) (string, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "kubectl"), append([]string{"--kubeconfig", s.Kubeconfig(tb, user)}, args...)...)
	if stdin != nil {
		cmd.Stdin = strings.NewReader(string(stdin))
	}
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

// KubectlPath is the kubectl binary.
func (s *Server) KubectlPath() string { return filepath.Join(s.bin, "kubectl") }

func (s *Server) startAPI() error {
	s.api = exec.Command(filepath.Join(s.bin, "kube-apiserver"),
		"--etcd-servers", "http://127.0.0.1:"+strconv.Itoa(s.etcdPort),
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", strconv.Itoa(s.apiPort),
		"--tls-cert-file", filepath.Join(s.dir, "serving.crt"), "--tls-private-key-file", filepath.Join(s.dir, "serving.key"),
		"--cert-dir", filepath.Join(s.dir, "apiserver-certs"),
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", filepath.Join(s.dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(s.dir, "sa.key"),
		"--token-auth-file", filepath.Join(s.dir, "tokens.csv"), "--authorization-mode", "RBAC",
		"--service-cluster-ip-range", "10.0.0.0/24", "--endpoint-reconciler-type", "none")
	if err := startLogged(s.api, filepath.Join(s.dir, "kube-apiserver.log")); err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	done := make(chan struct{})
	s.apiDone = done
	cmd := s.api
	go func() { _ = cmd.Wait(); close(done) }()
	return nil
}

func (s *Server) stopAPI() {
	if s.api == nil {
		return
	}
	_ = s.api.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.apiDone:
	case <-time.After(20 * time.Second):
		_ = s.api.Process.Kill()
		<-s.apiDone
	}
	s.api = nil
}

// waitReady polls /readyz as the admin until it answers 200, the process
// exits, or the timeout passes.
func (s *Server) waitReady(timeout time.Duration) error {
	pem, err := os.ReadFile(s.CAFile())
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer c.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+AdminToken)
		if resp, err := c.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.apiDone:
			return errors.New("kube-apiserver exited before it was ready")
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("kube-apiserver not ready within %s", timeout)
}

// writeFiles writes the serving certificate, the service-account key pair
// and the token file.
func (s *Server) writeFiles() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(s.dir, "serving.crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	if err := writeKey(filepath.Join(s.dir, "serving.key"), key); err != nil {
		return err
	}
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(s.dir, "sa.key"), sa); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(s.dir, "sa.pub"), "PUBLIC KEY", pub); err != nil {
		return err
	}
	var b strings.Builder
	for _, u := range s.users {
		fmt.Fprintf(&b, "%s,%s,%s-uid", u.Token, u.Name, u.Name)
		if len(u.Groups) > 0 {
			fmt.Fprintf(&b, ",\"%s\"", strings.Join(u.Groups, ","))
		}
		b.WriteByte('\n')
	}
	return os.WriteFile(filepath.Join(s.dir, "tokens.csv"), []byte(b.String()), 0o600)
}

func writeKey(path string, k *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// freePort asks the kernel for a free loopback port. etcd and kube-apiserver
// take port numbers, not listeners, so the port is closed again before they
// bind it: another process could take it in between (then the start fails
// loudly, it does not test the wrong server).
func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func startLogged(cmd *exec.Cmd, logPath string) error {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	_ = f.Close()
	return err
}

func stop(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
