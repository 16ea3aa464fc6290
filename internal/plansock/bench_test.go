package plansock

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tableSource answers every job with one table-sized body, as the agent's
// store does from memory (no masters): the request path alone is measured.
type tableSource struct {
	body []byte
	hash string
}

func (s tableSource) Plan(_ context.Context, r Request) ([]byte, string, error) {
	return s.body, s.hash, nil
}

// benchBodyBytes is a compiled table of three shapes (internal/plantable:
// 4+3+2+len(job)+2+64+3×1,288+8 bytes), a typical plan's form-2 answer.
const benchBodyBytes = 4 + 3 + 2 + 8 + 2 + 64 + 3*(8+5*64*4) + 8

// shimClient is the plugin's C shim's agent path in raw system calls (no Go
// net, no goroutine, no allocation per request): socket, connect,
// SO_PEERCRED, one send of the request, reads of the answer's parts as the
// shim reads them (header, hash length, hash, body length, body), close.
type shimClient struct {
	addr syscall.SockaddrUnix
	req  []byte
	buf  []byte
}

func (c *shimClient) readFull(fd int, b []byte) error {
	for done := 0; done < len(b); {
		n, err := syscall.Read(fd, b[done:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return syscall.ECONNRESET
		}
		done += n
	}
	return nil
}

// fetch returns the answer's status and body length.
func (c *shimClient) fetch() (Status, int, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, 0, err
	}
	defer syscall.Close(fd)
	if err := syscall.Connect(fd, &c.addr); err != nil {
		return 0, 0, err
	}
	if _, err := syscall.GetsockoptUcred(fd, syscall.SOL_SOCKET, syscall.SO_PEERCRED); err != nil {
		return 0, 0, err
	}
	if _, err := syscall.Write(fd, c.req); err != nil {
		return 0, 0, err
	}
	hdr := c.buf[:6]
	if err := c.readFull(fd, hdr); err != nil {
		return 0, 0, err
	}
	st := Status(hdr[5])
	if err := c.readFull(fd, c.buf[:2]); err != nil {
		return 0, 0, err
	}
	hl := int(binary.BigEndian.Uint16(c.buf[:2]))
	if err := c.readFull(fd, c.buf[:hl]); err != nil {
		return 0, 0, err
	}
	if err := c.readFull(fd, c.buf[:4]); err != nil {
		return 0, 0, err
	}
	bl := int(binary.BigEndian.Uint32(c.buf[:4]))
	if bl > len(c.buf) {
		return 0, 0, syscall.EMSGSIZE
	}
	return st, bl, c.readFull(fd, c.buf[:bl])
}

// cpuNow is the user+system CPU time of this process (who =
// RUSAGE_SELF) or of its waited-for children (RUSAGE_CHILDREN).
func cpuNow(b *testing.B, who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkServeTable is one rank's plan request on the agent's socket, as
// the C shim makes it (form 2, the job's Slurm node list), answered from
// memory: accept, SO_PEERCRED, request read and checked, the source's
// answer, the response written, the connection closed. The client is a
// child process making the shim's system calls (shimClient), requests one
// after another. server-cpu-µs/op is this process's CPU time per request
// (getrusage), the figure that bounds how many ranks one agent core
// serves; client-cpu-µs/op the child's; allocs/op are the server's.
//
//	go test -run '^$' -bench BenchmarkServeTable -benchmem ./internal/plansock/
func BenchmarkServeTable(b *testing.B) {
	benchServe(b, func(body []byte, hash string) Source { return tableSource{body: body, hash: hash} })
}

// benchServe runs BenchmarkServeTable's cases on the Source src makes.
func benchServe(b *testing.B, src func(body []byte, hash string) Source) {
	for _, tc := range []struct {
		name  string
		nodes string
	}{
		{"nodes=short", "gpu[0001-2048]"},
		{"nodes=8KiB", strings.Repeat("g", MaxNodes)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			body := bytes.Repeat([]byte{0x5a}, benchBodyBytes)
			hash := strings.Repeat("ab", 32)
			path := sockPathB(b)
			s, err := Listen(path, src(body, hash), nil)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Serve(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					b.Errorf("Serve: %v", err)
				}
			}()
			// The ranks are another process (as on a node): this process's
			// CPU time is the server's alone, the child's the client's.
			n := b.N
			cmd := exec.Command(os.Args[0], "-test.run=^TestShimClientHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), "GIN_PLANSOCK_BENCH_CLIENT="+path, "GIN_PLANSOCK_BENCH_N="+strconv.Itoa(n),
				"GIN_PLANSOCK_BENCH_NODES="+tc.nodes, "GIN_PLANSOCK_BENCH_BODY="+strconv.Itoa(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0, child0 := cpuNow(b, syscall.RUSAGE_SELF), cpuNow(b, syscall.RUSAGE_CHILDREN)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("client process: %v\n%s", err, out)
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuNow(b, syscall.RUSAGE_SELF)-cpu0).Nanoseconds())/1000/float64(n), "server-cpu-µs/op")
			b.ReportMetric(float64((cpuNow(b, syscall.RUSAGE_CHILDREN)-child0).Nanoseconds())/1000/float64(n), "client-cpu-µs/op")
		})
	}
}

// TestShimClientHelper is BenchmarkServeTable's client process (skipped
// unless the benchmark starts it): N requests made one after another.
func TestShimClientHelper(t *testing.T) {
	path := os.Getenv("GIN_PLANSOCK_BENCH_CLIENT")
	if path == "" {
		t.Skip("started by BenchmarkServeTable only")
	}
	n, _ := strconv.Atoi(os.Getenv("GIN_PLANSOCK_BENCH_N"))
	want, _ := strconv.Atoi(os.Getenv("GIN_PLANSOCK_BENCH_BODY"))
	req, err := AppendRequest(nil, Request{JobID: "12345678", Nodes: os.Getenv("GIN_PLANSOCK_BENCH_NODES"), GPUsPerNode: 8, Form: FormTable})
	if err != nil {
		t.Fatal(err)
	}
	c := &shimClient{addr: syscall.SockaddrUnix{Name: path}, req: req, buf: make([]byte, 1<<16)}
	for range n {
		st, got, err := c.fetch()
		if err != nil || st != StatusOK || got != want {
			t.Fatalf("fetch = %v, %d bytes (want %d), %v", st, got, want, err)
		}
	}
}

// BenchmarkFetchTable is the same request made with this package's Go
// client (what the e2e job-start benchmark's ranks use in place of the
// shim): Fetch and the response decoded.
func BenchmarkFetchTable(b *testing.B) {
	body := bytes.Repeat([]byte{0x5a}, benchBodyBytes)
	path := sockPathB(b)
	s, err := Listen(path, tableSource{body: body, hash: strings.Repeat("ab", 32)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	req := Request{JobID: "12345678", Nodes: "gpu[0001-2048]", GPUsPerNode: 8, Form: FormTable}
	b.ReportAllocs()
	cpu0 := cpuNow(b, syscall.RUSAGE_SELF)
	for b.Loop() {
		r, err := Fetch(ctx, path, req)
		if err != nil || r.Status != StatusOK || len(r.Body) != len(body) {
			b.Fatalf("Fetch = %+v, %v", r.Status, err)
		}
	}
	b.ReportMetric(float64((cpuNow(b, syscall.RUSAGE_SELF)-cpu0).Nanoseconds())/1000/float64(b.N), "cpu-µs/op")
}

func sockPathB(b *testing.B) string {
	b.Helper()
	d := b.TempDir()
	if len(d) > 80 {
		b.Skipf("temp dir %s too long for a socket path", d)
	}
	return d + "/a.sock"
}
