package faulttest

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	hraft "github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/testkit"
)

// campaignCerts makes the campaign's cluster CA and certificates with the
// real `ginctl tls` commands, as docs/SECURITY.md tells an operator to: one
// master certificate per master naming the address it advertises inside
// its namespace, one agent certificate per node, and a scheduler
// certificate for the workload and the checks (it may pin plans and read
// everything the checks read, nothing more). It returns the directory and
// what it made (the rotation fault issues them again).
func campaignCerts(t *testing.T, bin, dir string, masterIPs, nodes []string) (testkit.CertDir, []testkit.Cert) {
	t.Helper()
	var certs []testkit.Cert
	for i, ip := range masterIPs {
		certs = append(certs, testkit.Cert{Role: "master", Name: masterID(i), IPs: []string{ip}})
	}
	for _, n := range nodes {
		certs = append(certs, testkit.Cert{Role: "agent", Name: n})
	}
	certs = append(certs, testkit.Cert{Role: "scheduler"})
	// A master certificate of the cluster CA for a master that never
	// joins: the forged-Raft attacker's (issue #21).
	certs = append(certs, testkit.Cert{Role: "master", Name: memberlessID})
	return testkit.MakeCerts(t, filepath.Join(bin, "ginctl"), dir, certs...), certs
}

func masterID(i int) string { return fmt.Sprintf("m%d", i+1) }

// memberlessID names the campaign's master certificate of no member.
const memberlessID = "m9"

// scheduler is the workload's and the checks' TLS identity; it follows
// its files, so the rotation fault rotates it too.
func scheduler(t *testing.T, d testkit.CertDir) *pki.Source {
	t.Helper()
	src, err := pki.NewSource(d.Files("scheduler"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// servedSerial is the serial number of the certificate the master at addr
// presents to a new TLS connection (verified as a master of the CA naming
// that address).
func servedSerial(addr string, src *pki.Source) (*big.Int, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	cfg := pki.ClientConfig(src, pki.RequireRole(pki.RoleMaster))
	cfg.ServerName = host
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: time.Second}, Config: cfg}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// raftRedialLine is what a master logs when it closes its pooled Raft
// connections after its TLS files changed (internal/raft).
const raftRedialLine = "TLS files changed: closing pooled Raft connections"

// lastProblemLine is the last WARN or ERROR line of p's log ("" if none),
// cut to 400 bytes: why an agent is not up, for the failure message.
func lastProblemLine(p *testkit.Proc) string {
	b, _ := os.ReadFile(p.Log)
	lines := strings.Split(string(b), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "level=WARN") || strings.Contains(lines[i], "level=ERROR") {
			return lines[i][:min(len(lines[i]), 400)]
		}
	}
	return ""
}

// logCount is how many times p's log holds text.
func logCount(p *testkit.Proc, text string) int {
	b, _ := os.ReadFile(p.Log)
	return strings.Count(string(b), text)
}

// requireTLS checks that mTLS is really on in the campaign: every master
// logged that its Raft port takes only master certificates, and a
// plaintext client gets no answer from any of them.
func requireTLS(c *cluster) error {
	for i, p := range c.masters {
		if err := logSays(p, "Raft over TLS"); err != nil {
			return err
		}
		conn, err := grpc.NewClient(c.addrs[i], grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err = ginv1.NewAdminServiceClient(conn).GetClusterInfo(ctx, &ginv1.GetClusterInfoRequest{})
		cancel()
		_ = conn.Close()
		if err == nil {
			return fmt.Errorf("%s answered a plaintext client: TLS is not on", p.Name)
		}
	}
	return nil
}

// agentsUseTLS checks that every agent logged its mTLS identity.
func agentsUseTLS(c *cluster) error {
	for _, a := range c.agents {
		if err := logSays(a, "mTLS to the masters"); err != nil {
			return err
		}
	}
	return nil
}

// logSays checks that p's log holds text.
func logSays(p *testkit.Proc, text string) error {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return err
	}
	if !strings.Contains(string(b), text) {
		return fmt.Errorf("%s's log (%s) does not say %q: is TLS on?", p.Name, p.Log, text)
	}
	return nil
}

// raftAttack is issue #11's forged-Raft attacker kept up through the whole
// campaign: every 300 ms it connects to every master's Raft port as what
// is not a master of this cluster (in turn: plain TCP, TLS without a
// certificate, an agent's certificate, a master certificate of another
// CA) and sends the start of a Raft RequestVote. A master must refuse
// every such connection: a TLS alert for plain bytes, the handshake
// refused for the others; a connection the master takes (no refusal, or
// any other answer) fails the campaign, and the leader-per-term and
// workload checks show that none of it disturbed an election.
//
// Issue #21 adds the attackers that pass the handshake: a master
// certificate of the cluster CA for a master that never joined (m9), as
// itself and claiming to be m1, and a member's certificate (m2's) claiming
// to be m1. Each sends a whole forged RequestVote (a far higher term,
// LeadershipTransfer set); the master must answer it with a Raft RPC error
// saying it was refused (its Raft never sees it).
type raftAttack struct {
	kinds  []raftAttacker
	m1Addr string // what the attackers claiming m1 claim as its address

	mu       sync.Mutex
	tries    map[string]int // kind -> connections made
	refused  map[string]int // kind -> of those, refused by the master
	answered []string       // anything else the master sent back (a failure)
}

type raftAttacker struct {
	name string
	tls  *tls.Config // nil: plain TCP
	// claim, when set, is the server id a whole forged RequestVote claims
	// (a certificate that passes the handshake); "": only the start of one.
	claim string
}

// newRaftAttack prepares the attackers: agentCert is a certificate of the
// cluster CA for another role, otherCA a master certificate of another CA,
// memberless a master certificate of the cluster CA that names no member
// and member a member's (m2's).
func newRaftAttack(agentCert, otherCA, memberless, member pki.Files) (*raftAttack, error) {
	a := &raftAttack{tries: map[string]int{}, refused: map[string]int{}}
	a.kinds = append(a.kinds, raftAttacker{name: "plain TCP"})
	a.kinds = append(a.kinds, raftAttacker{name: "TLS without a certificate", tls: &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}}) //nolint:gosec // the attacker
	for _, f := range []struct {
		name  string
		files pki.Files
	}{{"an agent's certificate", agentCert}, {"a master certificate of another CA", otherCA}} {
		src, err := pki.NewSource(f.files, nil)
		if err != nil {
			return nil, err
		}
		a.kinds = append(a.kinds, raftAttacker{name: f.name, tls: &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true, //nolint:gosec // the attacker
			Certificates: []tls.Certificate{*src.Certificate()}}})
	}
	for _, f := range []struct {
		name, claim string
		files       pki.Files
	}{
		{"a master certificate of no member, as itself", memberlessID, memberless},
		{"a master certificate of no member, as m1", "m1", memberless},
		{"m2's master certificate, as m1", "m1", member},
	} {
		src, err := pki.NewSource(f.files, nil)
		if err != nil {
			return nil, err
		}
		a.kinds = append(a.kinds, raftAttacker{name: f.name, claim: f.claim, tls: &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true, //nolint:gosec // the attacker
			Certificates: []tls.Certificate{*src.Certificate()}}})
	}
	return a, nil
}

// forgedWholeVote is a whole Raft RequestVote on the wire (the rpc type
// byte 1, then the msgpack request hashicorp/raft decodes) claiming to be
// server id at addr, with a far higher term and LeadershipTransfer set:
// taken by Raft, it would unseat the leader.
func forgedWholeVote(id, addr string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte(1)
	err := codec.NewEncoder(&b, &codec.MsgpackHandle{}).Encode(&hraft.RequestVoteRequest{
		RPCHeader: hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte(id), Addr: []byte(addr)},
		Term:      1 << 40, Candidate: []byte(addr), LastLogIndex: 1 << 40, LastLogTerm: 1 << 40, LeadershipTransfer: true,
	})
	return b.Bytes(), err
}

// run attacks raftAddrs until stop is closed, one attacker kind per
// master per 300 ms, in turn.
func (a *raftAttack) run(raftAddrs []string, stop <-chan struct{}) {
	a.m1Addr = raftAddrs[0]
	for tick := 0; ; tick++ {
		var wg sync.WaitGroup
		for i, addr := range raftAddrs {
			wg.Go(func() { a.once(a.kinds[(tick+i)%len(a.kinds)], addr) })
		}
		wg.Wait()
		select {
		case <-stop:
			return
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// forgedVote is the start of a Raft RequestVote on the wire (hashicorp/raft:
// the RPC type byte 1, then the msgpack request: a map of 5 fields, the
// first key "Term"). A Raft server that takes the connection waits for the
// rest, so it never ends it by itself (the attacker's read times out: not
// a refusal); a TLS server ends it at once, before the handshake (these
// are not TLS records) or after it (a certificate it refuses).
var forgedVote = []byte{1, 0x85, 0xa4, 'T', 'e', 'r', 'm'}

func (a *raftAttack) once(k raftAttacker, addr string) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return // the master is down or cut off: nothing reached
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	var conn net.Conn = c
	if k.tls != nil {
		tc := tls.Client(c, k.tls)
		conn = tc
		if err := tc.Handshake(); err != nil {
			a.record(k, refusedIf(err), "")
			return
		}
		// TLS 1.3: the client finishes its side before the server has
		// checked its certificate; the refusal shows on the read.
	}
	if k.claim != "" {
		a.whole(k, conn, addr)
		return
	}
	_, _ = conn.Write(forgedVote)
	buf := make([]byte, 64)
	n, err := conn.Read(buf)
	switch {
	case n == 0:
		a.record(k, refusedIf(err), "")
	case k.tls == nil && buf[0] == 0x15:
		a.record(k, refused, "") // a TLS alert record: the port speaks only TLS
	default:
		a.record(k, answered, fmt.Sprintf("%s at %s: %d bytes back (%x)", k.name, addr, n, buf[:n]))
	}
}

// whole sends a whole forged RequestVote on a connection past the
// handshake and reads the answer: the transport's RPC error (a msgpack
// string, then the empty response) saying it was refused is a refusal;
// a vote response (no error), or any other error, is an answer.
func (a *raftAttack) whole(k raftAttacker, conn net.Conn, addr string) {
	claimAddr := "127.0.0.1:5001" // m9's: any
	if k.claim == "m1" {
		claimAddr = a.m1Addr
	}
	req, err := forgedWholeVote(k.claim, claimAddr)
	if err != nil {
		a.record(k, answered, fmt.Sprintf("%s: encode: %v", k.name, err))
		return
	}
	if _, err := conn.Write(req); err != nil {
		a.record(k, refusedIf(err), "")
		return
	}
	var rpcErr string
	if err := codec.NewDecoder(conn, &codec.MsgpackHandle{}).Decode(&rpcErr); err != nil {
		// A handshake refused after the client's side finished shows here.
		a.record(k, refusedIf(err), "")
		return
	}
	if strings.Contains(rpcErr, "refused") {
		a.record(k, refused, "")
		return
	}
	a.record(k, answered, fmt.Sprintf("%s at %s: Raft answered the forged RequestVote (error %q)", k.name, addr, rpcErr))
}

type attackOutcome int

const (
	noReply  attackOutcome = iota // the master was stopped or cut off mid-way
	refused                       // ended by the master without Raft
	answered                      // anything else (a failure)
)

// refusedIf: an error that is not a timeout is the master ending the
// connection (an alert, EOF, a reset); a timeout is no reply at all.
func refusedIf(err error) attackOutcome {
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		return noReply
	}
	return refused
}

func (a *raftAttack) record(k raftAttacker, o attackOutcome, what string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tries[k.name]++
	switch o {
	case refused:
		a.refused[k.name]++
	case answered:
		a.answered = append(a.answered, what)
	}
}

// problems are the attack's failures: an answer, or an attacker that was
// never refused (a master that takes the connection and waits for more
// is never refused either).
func (a *raftAttack) problems() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := append([]string(nil), a.answered...)
	for _, k := range a.kinds {
		if a.refused[k.name] == 0 {
			out = append(out, fmt.Sprintf("the Raft attacker with %s was never refused (%d connections)", k.name, a.tries[k.name]))
		}
	}
	return out
}

func (a *raftAttack) summary() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var parts []string
	for _, k := range a.kinds {
		parts = append(parts, fmt.Sprintf("%s %d of %d refused", k.name, a.refused[k.name], a.tries[k.name]))
	}
	return strings.Join(parts, ", ") + " (the rest reached a stopped or cut-off master)"
}
