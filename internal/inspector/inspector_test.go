package inspector

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// line is one object as inspector_json.cc writes it: compact, one per line.
func line(comm string, rank, nRanks, nNodes int, host, coll string, bytes, us uint64, bus float64) string {
	return fmt.Sprintf(`{"header":{"id":"%s","comm_name":"DP Group 0","rank":%d,"n_ranks":%d,"nnodes":%d},`+
		`"metadata":{"inspector_output_format_version":"v4.0","git_rev":"","rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":1752867229276385,"hostname":"%s","pid":4242},`+
		`"coll_perf":{"coll":"%s","coll_sn":7,"coll_msg_size_bytes":%d,"coll_exec_time_us":%d,"coll_timing_source":"kernel_gpu","coll_algobw_gbs":1.5,"coll_busbw_gbs":%g}}`+"\n",
		comm, rank, nRanks, nNodes, host, coll, bytes, us, bus)
}

const p2pLine = `{"header":{"id":"0x1","comm_name":"","rank":0,"n_ranks":2,"nnodes":1},"metadata":{"inspector_output_format_version":"v4.0","git_rev":"","rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":1,"hostname":"h","pid":1},"p2p_perf":{"p2p":"Send","p2p_sn":1,"p2p_peer":1,"p2p_msg_size_bytes":8192,"p2p_exec_time_us":3,"p2p_timing_source":"kernel_gpu","p2p_algobw_gbs":1,"p2p_busbw_gbs":1}}` + "\n"

func TestReadmeExamples(t *testing.T) {
	for _, tc := range []struct {
		file           string
		coll, bucket   int
		bytes          uint64
		us, bus        float64
		timing, commID string
	}{
		{"readme-example.log", 4, 34, 17179869184, 61974, 485.119099, "", "0x7f8c496ae9f661"},
		{"readme-example-verbose.log", 3, 31, 2147483648, 41057, 366.134533, "kernel_gpu", "0xe62dedaa97644a"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			a, err := ReadPath(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			gs := a.Groups()
			if len(gs) != 1 || a.Records != 1 || a.Versions["v4.0"] != 1 {
				t.Fatalf("%d groups, %d records, versions %v", len(gs), a.Records, a.Versions)
			}
			g := gs[0]
			if g.Coll != tc.coll || g.Bucket != tc.bucket || g.MeanBytes() != tc.bytes || g.MeanUs() != tc.us || g.MeanBusBW() != tc.bus ||
				g.NRanks != 8 || g.NNodes != 1 || g.CommID != tc.commID {
				t.Fatalf("group %+v: mean %d B %.0f µs %.6f GB/s", g.GroupKey, g.MeanBytes(), g.MeanUs(), g.MeanBusBW())
			}
			if tc.timing != "" && g.TimingSources[tc.timing] != 1 {
				t.Fatalf("timing sources %v", g.TimingSources)
			}
			if h := a.Hosts(); len(h) != 1 || h[0] != "example-hostname" {
				t.Fatalf("hosts %v", h)
			}
		})
	}
}

// TestDirectory: a directory of <host>-pid<pid>.log files, compact lines,
// two hosts, p2p objects skipped; the per-host times name the slow host.
func TestDirectory(t *testing.T) {
	dir := t.TempDir()
	var a, b strings.Builder
	for i := range 10 {
		a.WriteString(line("0xabc", 0, 2, 2, "gb-a", "AllReduce", 16<<30, 100000, 300))
		b.WriteString(line("0xabc", 1, 2, 2, "gb-b", "AllReduce", 16<<30, 130000, 230))
		if i%3 == 0 {
			a.WriteString(p2pLine)
		}
	}
	os.WriteFile(filepath.Join(dir, "gb-a-pid1.log"), []byte(a.String()), 0o644)
	os.WriteFile(filepath.Join(dir, "gb-b-pid2.log"), []byte(b.String()), 0o644)
	agg, err := ReadPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	if agg.Files != 2 || agg.Records != 20 || agg.Skipped != 4 {
		t.Fatalf("files %d records %d skipped %d", agg.Files, agg.Records, agg.Skipped)
	}
	g := agg.Groups()[0]
	hs := g.Hosts()
	if g.MeanUs() != 115000 || hs["gb-b"].SumUs/float64(hs["gb-b"].Count) != 130000 || hs["gb-a"].Count != 10 {
		t.Fatalf("mean %v hosts %v", g.MeanUs(), hs)
	}
}

func TestBadInput(t *testing.T) {
	ok := line("0xabc", 0, 2, 1, "h", "AllReduce", 1<<20, 10, 1)
	for _, tc := range []struct {
		name, in, want string
	}{
		{"not JSON", ok + "{nope", "object 2 (byte "},
		{"alltoall", strings.Replace(ok, "AllReduce", "AllToAll", 1), "not a collective NCCL's tuner sees"},
		{"rank past n_ranks", strings.Replace(ok, `"rank":0`, `"rank":2`, 1), "rank"},
		{"no rank", strings.Replace(ok, `"rank":0,`, ``, 1), "rank"},
		{"zero time", strings.Replace(ok, `"coll_exec_time_us":10`, `"coll_exec_time_us":0`, 1), "coll_exec_time_us"},
		{"no size", strings.Replace(ok, `"coll_msg_size_bytes":1048576,`, ``, 1), "coll_msg_size_bytes"},
		{"nodes above ranks", strings.Replace(ok, `"nnodes":1`, `"nnodes":3`, 1), "nnodes"},
		{"hostname with a slash", strings.Replace(ok, `"hostname":"h"`, `"hostname":"a/b"`, 1), "hostname"},
		{"neither perf", `{"header":{},"metadata":{}}`, "neither coll_perf nor p2p_perf"},
		{"huge object", `{"header":{"id":"` + strings.Repeat("x", 2*MaxObjectBytes) + `"}}`, "longer than"},
		{"a string, not an object", `"x"`, "cannot unmarshal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := NewAggregate().Read("f", strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Read = %v, want %q", err, tc.want)
			}
		})
	}
}

// dump generates n collectives over 8 ranks as compact lines, without
// holding them.
type dump struct {
	n, i int
	buf  []byte
}

func (d *dump) Read(p []byte) (int, error) {
	for len(d.buf) == 0 {
		if d.i == d.n {
			return 0, io.EOF
		}
		size := uint64(1) << (20 + d.i%12)
		d.buf = []byte(line(fmt.Sprintf("0x%x", d.i/12%4), d.i%8, 8, 2, fmt.Sprintf("node%d", d.i%8/4), "AllReduce", size, uint64(100+d.i%50), 200))
		d.i++
	}
	n := copy(p, d.buf)
	d.buf = d.buf[n:]
	return n, nil
}

// TestManyBounded: 200,000 collectives aggregate in the memory of their
// 48 groups (4 communicators × 12 sizes): the heap after reading is within
// a few MiB of before, whatever the count (BenchmarkMillion reads a
// million).
func TestManyBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("200,000 objects")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	a := NewAggregate()
	if err := a.Read("dump", &dump{n: 200_000}); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if a.Records != 200_000 || len(a.Groups()) != 48 {
		t.Fatalf("%d records, %d groups", a.Records, len(a.Groups()))
	}
	if grow := int64(after.HeapAlloc) - int64(before.HeapAlloc); grow > 4<<20 {
		t.Fatalf("heap grew by %d bytes for 200,000 objects", grow)
	}
}

// BenchmarkMillion: time and allocation to aggregate a million compact
// objects (generated on the fly, ~480 bytes each).
func BenchmarkMillion(b *testing.B) {
	for b.Loop() {
		a := NewAggregate()
		if err := a.Read("dump", &dump{n: 1_000_000}); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzRead: any bytes aggregate within bounds or fail with an error.
func FuzzRead(f *testing.F) {
	for _, name := range []string{"readme-example.log", "readme-example-verbose.log"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(line("0xabc", 0, 2, 1, "h", "AllReduce", 1<<20, 10, 1) + p2pLine))
	f.Fuzz(func(t *testing.T, in []byte) {
		a := NewAggregate()
		if err := a.Read("fuzz", strings.NewReader(string(in))); err != nil {
			return
		}
		for _, g := range a.Groups() {
			if g.Count == 0 || g.Bucket < 0 || g.Bucket > MaxLog2Bytes || g.NRanks < 1 || g.NNodes < 1 || g.MeanUs() <= 0 {
				t.Fatalf("bad group %+v", g)
			}
		}
		if len(a.Groups()) > MaxGroups || len(a.Hosts()) > MaxHosts {
			t.Fatal("unbounded aggregate")
		}
	})
}
