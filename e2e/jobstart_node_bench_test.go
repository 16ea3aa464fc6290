//go:build linux

package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/plansock"
	"github.com/gin-topology/gin/internal/plantable"
	"github.com/gin-topology/gin/internal/testkit"
)

// BenchmarkJobStartNode is a job start as one node sees it: one real
// gin-agent process (--plan-socket) and the node's ranks, 8 (a DGX) or 72
// (an NVL72-style tray seen as one node), all released at once by a
// barrier, with every master down. The cluster is three real gin-master
// processes; the Slurm prolog's step (a root request with the job's node
// list on the agent's socket) has the agent fetch and keep each job's plan,
// then all three masters are killed (SIGKILL) before any rank starts.
//
// A rank's init is what the plugin's C shim does on the agent path, in the
// same system calls (shimRank): socket, connect, SO_PEERCRED (root or this
// user), one write of the form-2 request (job id, the job's node list, GPUs
// per node), the answer read in the shim's five reads, the table checked
// (plantable.Decode: checksum, job, content hash). The ranks are goroutines
// of this process, each blocked in its own system calls (a thread each), not
// processes: process start-up and dlopen are not in the figure. Latency is
// from the barrier to the rank holding the checked table. Every rank must
// hold the pinned plan, or the benchmark fails. Each iteration is one job
// start; iterations reuse the job (the agent's work for a held plan is the
// same for every job start).
//
//	go test -run '^$' -bench BenchmarkJobStartNode -benchtime=200x -timeout 10m ./e2e/
func BenchmarkJobStartNode(b *testing.B) {
	bin := binaries(b)
	c := startFailoverCluster(b, bin, 0, nil)
	c.waitWhole("the masters to form")
	var join []string
	for _, m := range c.masters {
		join = append(join, m.client)
	}
	dir, err := os.MkdirTemp("", "gjn")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "agent.sock")
	const node = "jsn01"
	a := &foAgent{metrics: "127.0.0.1:" + strconv.Itoa(foPorts(b, 1)[0])}
	a.foProc = foProc{testkit.Proc{Name: node, Log: filepath.Join(dir, node+".log"),
		Argv: []string{filepath.Join(bin, "gin-agent"), "--source", "sim:dgx-h100", "--node-name", node, "--master", strings.Join(join, ","),
			"--heartbeat-interval", failoverHeartbeat, "--metrics-bind", a.metrics, "--log-level", "info",
			"--plan-socket", sock, "--plan-dir", filepath.Join(dir, "plans")}}}
	c.agents, c.n = append(c.agents, a), 1
	b.Cleanup(func() { a.kill() })
	a.start(b)
	c.waitWhole("the node's agent attached and its node up")

	// The prolog: the agent fetches each job's plan from the masters.
	sizes := []int{8, 72}
	jobs := map[int]string{}
	hashes := map[int]string{}
	for _, ranks := range sizes {
		job := fmt.Sprintf("jsn-%d-%d", ranks, time.Now().UnixNano())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r, err := plansock.Fetch(ctx, sock, plansock.Request{JobID: job, Nodes: node, GPUsPerNode: stormGPUsPerNode})
		cancel()
		if err != nil || r.Status != plansock.StatusOK {
			b.Fatalf("prolog for job %s: %v %s", job, err, r.Body)
		}
		jobs[ranks], hashes[ranks] = job, r.Hash
	}
	for _, m := range c.masters {
		if !m.kill() {
			b.Fatalf("master %s not reaped after SIGKILL", m.id)
		}
	}
	b.Logf("prolog done for jobs %v; all %d masters killed", jobs, len(c.masters))

	for _, ranks := range sizes {
		b.Run("ranks="+strconv.Itoa(ranks), func(b *testing.B) {
			var lat []float64
			failures := 0
			for b.Loop() {
				l, errs := nodeJobStart(ranks, sock, jobs[ranks], node, hashes[ranks])
				lat = append(lat, l...)
				for _, err := range errs {
					if err != nil {
						failures++
						b.Errorf("rank: %v", err)
					}
				}
			}
			b.ReportMetric(stormPct(lat, 0.5), "init_p50_ms")
			b.ReportMetric(stormPct(lat, 0.99), "init_p99_ms")
			b.ReportMetric(stormPct(lat, 1), "init_max_ms")
			b.ReportMetric(float64(failures), "failures")
		})
	}
	if !a.alive() {
		b.Fatal("the node's agent exited")
	}
}

// nodeJobStart releases ranks shim-like ranks at once on the agent's socket
// and returns each one's init latency (ms from the barrier) and error.
func nodeJobStart(ranks int, sock, job, nodes, hash string) ([]float64, []error) {
	req, err := plansock.AppendRequest(nil, plansock.Request{JobID: job, Nodes: nodes, GPUsPerNode: stormGPUsPerNode, Form: plansock.FormTable})
	if err != nil {
		return nil, []error{err}
	}
	lat := make([]float64, ranks)
	errs := make([]error, ranks)
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	var t0 time.Time
	for r := range ranks {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			buf := make([]byte, plantable.MaxBytes)
			ready.Done()
			<-start
			errs[r] = shimRank(sock, req, buf, job, hash)
			lat[r] = float64(time.Since(t0).Microseconds()) / 1000
		}()
	}
	ready.Wait()
	t0 = time.Now()
	close(start)
	done.Wait()
	return lat, errs
}

// shimRank is the C shim's gin_from_agent in the same system calls
// (internal/ncclplugin/shim/shim.c), blocking instead of polling.
func shimRank(sock string, req, buf []byte, job, hash string) error {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer syscall.Close(fd)
	tv := syscall.NsecToTimeval(stormInitTimeout.Nanoseconds())
	_ = syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	_ = syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &tv)
	if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	cred, err := syscall.GetsockoptUcred(fd, syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	if err != nil {
		return fmt.Errorf("who serves it: %w", err)
	}
	if cred.Uid != 0 && int(cred.Uid) != os.Getuid() {
		return fmt.Errorf("served by uid %d", cred.Uid)
	}
	if _, err := syscall.Write(fd, req); err != nil {
		return fmt.Errorf("request: %w", err)
	}
	read := func(b []byte) error {
		for done := 0; done < len(b); {
			n, err := syscall.Read(fd, b[done:])
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			if n == 0 {
				return errors.New("the agent closed the connection")
			}
			done += n
		}
		return nil
	}
	var hdr [6]byte
	var l2 [2]byte
	var l4 [4]byte
	if err := read(hdr[:]); err != nil {
		return fmt.Errorf("answer header: %w", err)
	}
	if string(hdr[:4]) != "GINA" || hdr[4] != 1 {
		return errors.New("not a GIN plan response")
	}
	if err := read(l2[:]); err != nil {
		return err
	}
	hl := int(binary.BigEndian.Uint16(l2[:]))
	if hl > plansock.MaxHash {
		return fmt.Errorf("content hash of %d bytes", hl)
	}
	if err := read(buf[:hl]); err != nil {
		return err
	}
	gotHash := string(buf[:hl])
	if err := read(l4[:]); err != nil {
		return err
	}
	bl := int(binary.BigEndian.Uint32(l4[:]))
	if bl > len(buf) {
		return fmt.Errorf("answer of %d bytes, over the limit", bl)
	}
	if err := read(buf[:bl]); err != nil {
		return err
	}
	if hdr[5] != 0 {
		return fmt.Errorf("status %d: %s", hdr[5], buf[:bl])
	}
	e, err := plantable.Decode(buf[:bl])
	if err != nil {
		return err
	}
	if e.JobID != job || e.Hash != gotHash || gotHash != hash {
		return fmt.Errorf("table of job %s plan %.12s, want job %s plan %.12s", e.JobID, e.Hash, job, hash)
	}
	return nil
}
