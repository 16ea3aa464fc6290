package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/jsonout/schematest"
)

// liveAnswer is one scripted GetJobLive answer: a response or an error.
type liveAnswer struct {
	resp *ginv1.GetJobLiveResponse
	err  error
}

// fakeLiveMaster serves LiveService from a script (one answer per call, the
// last repeated) and a CalibrationService with no measurements.
type fakeLiveMaster struct {
	ginv1.UnimplementedLiveServiceServer
	ginv1.UnimplementedCalibrationServiceServer
	mu     sync.Mutex
	script []liveAnswer
	jobs   []string
}

func (f *fakeLiveMaster) next(job string) (*ginv1.GetJobLiveResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jobs = append(f.jobs, job)
	a := f.script[0]
	if len(f.script) > 1 {
		f.script = f.script[1:]
	}
	return a.resp, a.err
}

func (f *fakeLiveMaster) GetJobLive(_ context.Context, req *ginv1.GetJobLiveRequest) (*ginv1.GetJobLiveResponse, error) {
	return f.next(req.GetJobId())
}

func (f *fakeLiveMaster) ListMeasurements(context.Context, *ginv1.ListMeasurementsRequest) (*ginv1.ListMeasurementsResponse, error) {
	return &ginv1.ListMeasurementsResponse{}, nil
}

func serveLive(t *testing.T, f *fakeLiveMaster) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	ginv1.RegisterLiveServiceServer(s, f)
	ginv1.RegisterCalibrationServiceServer(s, f)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

var (
	liveT0    = time.Date(2026, 12, 1, 3, 45, 0, 0, time.UTC)
	notFound  = status.Error(codes.NotFound, `no rank of job "9" reported in the last 2m0s (is the job running with NCCL_GIN_ENABLED=1, and gin-agent on its nodes?)`)
	noMasters = status.Error(codes.Unavailable, "no master answered (127.0.0.1:1: Unavailable: connection refused)")
)

// slowLink is node003's mlx5_2 sending at slowdown the job's median, rank
// 5 of communicator 0x5eed.
func slowLink(slowdown float64, confirmed bool) *ginv1.Suspect {
	return &ginv1.Suspect{Kind: "slow-link", Node: "node003", Component: "mlx5_2", Rank: 5, GpuIndex: 5, Nic: "mlx5_2",
		SwitchPort: "leaf07 (0x1), from port 1 of the NIC", Slowdown: slowdown, Since: timestamppb.New(liveT0.Add(-20 * time.Second)),
		Confirmed: confirmed, CommId: 0x5eed,
		Evidence: []string{"rank 5 (node003 gpu5 mlx5_2) sends at 1.80x the network time per byte of the job's median rank", "rank 6 (node004 gpu6 mlx5_3) receiving from it waits 1.62x the median receive"}}
}

func straggler(slowdown float64, confirmed bool) *ginv1.Suspect {
	return &ginv1.Suspect{Kind: "straggler", Node: "node001", Component: "gpu2", Rank: 2, GpuIndex: 2, Nic: "mlx5_1",
		Slowdown: slowdown, Since: timestamppb.New(liveT0.Add(-5 * time.Second)), Confirmed: confirmed, CommId: 0x5eed,
		Evidence: []string{"rank 2 (node001 gpu2 mlx5_1): its collectives take 800 µs, the job's median rank's 2100 µs"}}
}

func liveResp(suspects ...*ginv1.Suspect) *ginv1.GetJobLiveResponse {
	r := &ginv1.GetJobLiveResponse{JobId: "9", LastReport: timestamppb.New(liveT0), MissingRanks: 1, Suspects: suspects}
	for i, n := range []string{"node001", "node003", "node004"} {
		r.Ranks = append(r.Ranks, &ginv1.LiveRank{CommId: 0x5eed, Rank: uint32(2 - i), Node: n, GpuIndex: int32(i), Nic: "mlx5_" + string(rune('0'+i)),
			LastReport: timestamppb.New(liveT0), CollectivesDone: 1000, MeanCollectiveUs: 2100.456, SendUsPerMib: 12.5})
	}
	return r
}

// TestJobReportLive: the report of a running job from the masters' live
// view alone (no production measurements), and the one error when GIN
// knows nothing of the job.
func TestJobReportLive(t *testing.T) {
	for _, tc := range []struct {
		name     string
		answer   liveAnswer
		args     []string
		wantCode int
		check    func(t *testing.T, stdout, stderr string)
	}{
		{"table", liveAnswer{resp: liveResp(slowLink(1.8, false), straggler(2.5, false), slowLink(1.3, true))}, nil, 0, func(t *testing.T, stdout, _ string) {
			// Both slow-link suspects are rank 5 of 0x5eed in this script:
			// the report prints what the masters hold, confirmed first.
			want := "job 9 on node[001,003-004]: 0 rows\n" +
				"live: 3 ranks reporting (1 missing), last report 03:45:00Z\n" +
				"suspect slow-link node003 mlx5_2: 1.3x since 03:44:40Z, confirmed\n" +
				"  rank 5 (node003 gpu5 mlx5_2) sends at 1.80x the network time per byte of the job's median rank\n" +
				"  rank 6 (node004 gpu6 mlx5_3) receiving from it waits 1.62x the median receive\n" +
				"suspect straggler node001 gpu2: 2.5x since 03:44:55Z\n" +
				"  rank 2 (node001 gpu2 mlx5_1): its collectives take 800 µs, the job's median rank's 2100 µs\n" +
				"suspect slow-link node003 mlx5_2: 1.8x since 03:44:40Z\n" +
				"  rank 5 (node003 gpu5 mlx5_2) sends at 1.80x the network time per byte of the job's median rank\n" +
				"  rank 6 (node004 gpu6 mlx5_3) receiving from it waits 1.62x the median receive\n"
			if stdout != want {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout, want)
			}
		}},
		{"json", liveAnswer{resp: liveResp(slowLink(1.8, false), straggler(2.5, false), slowLink(1.3, true))}, []string{"-o", "json"}, 0, func(t *testing.T, stdout, _ string) {
			var r struct {
				Job      string                     `json:"job"`
				Nodes    []string                   `json:"nodes"`
				Rows     []json.RawMessage          `json:"rows"`
				Suspects []map[string]any           `json:"suspects"`
				Live     map[string]json.RawMessage `json:"live"`
			}
			if err := json.Unmarshal([]byte(stdout), &r); err != nil {
				t.Fatal(err)
			}
			if r.Job != "9" || strings.Join(r.Nodes, ",") != "node001,node003,node004" || r.Rows == nil || len(r.Rows) != 0 {
				t.Errorf("job %q nodes %v rows %v", r.Job, r.Nodes, r.Rows)
			}
			var order []string
			for _, s := range r.Suspects {
				for _, k := range []string{"node", "component", "kind", "slowdown", "since", "confirmed", "evidence", "rank", "gpu", "nic", "switch", "what", "comm"} {
					if _, ok := s[k]; !ok {
						t.Errorf("suspect without %q: %v", k, s)
					}
				}
				order = append(order, s["kind"].(string)+"/"+jsonNumber(s["slowdown"]))
			}
			if got := strings.Join(order, " "); got != "slow-link/1.3 straggler/2.5 slow-link/1.8" {
				t.Errorf("suspects in order %s, want confirmed first, then by slowdown", got)
			}
			s := r.Suspects[0]
			if s["confirmed"] != true || s["since"] != "2026-12-01T03:44:40Z" || s["rank"] != 5.0 || s["gpu"] != 5.0 || s["nic"] != "mlx5_2" ||
				s["switch"] != "leaf07 (0x1), from port 1 of the NIC" || s["comm"] != "0x5eed" || len(s["evidence"].([]any)) != 2 ||
				s["what"] != "slow-link mlx5_2 on node003 (rank 5): 1.3x the time of the job's healthy ranks, confirmed" {
				t.Errorf("first suspect %v", s)
			}
			if string(r.Live["running"]) != "true" || string(r.Live["ranks_reporting"]) != "3" || string(r.Live["missing_ranks"]) != "1" ||
				string(r.Live["last_report"]) != `"2026-12-01T03:45:00Z"` {
				t.Errorf("live %s", stdout)
			}
			var ranks []map[string]any
			if err := json.Unmarshal(r.Live["ranks"], &ranks); err != nil || len(ranks) != 3 {
				t.Fatalf("live.ranks %s: %v", r.Live["ranks"], err)
			}
			if ranks[0]["comm"] != "0x5eed" || ranks[0]["rank"] != 0.0 || ranks[0]["node"] != "node004" || ranks[0]["mean_collective_us"] != 2100.46 ||
				ranks[0]["send_us_per_mib"] != 12.5 || ranks[0]["collectives_done"] != 1000.0 || ranks[0]["last_report"] != "2026-12-01T03:45:00Z" {
				t.Errorf("live.ranks[0] %v (want ranks sorted by comm and rank)", ranks[0])
			}
		}},
		{"no live suspects", liveAnswer{resp: liveResp()}, []string{"-o", "json"}, 0, func(t *testing.T, stdout, _ string) {
			if !strings.Contains(stdout, `"suspects": []`) || !strings.Contains(stdout, `"running": true`) {
				t.Errorf("stdout %s", stdout)
			}
		}},
		{"neither", liveAnswer{err: notFound}, nil, exitErr, func(t *testing.T, _, stderr string) {
			want := "ginctl: job 9: GIN knows nothing of it: no rank reported while it ran (within the last 2m0s; is it running with NCCL_GIN_ENABLED=1 and gin-agent on its nodes?) and no production measurements (import its NCCL Inspector dump: ginctl calibrate import --nccl-inspector PATH --job 9)\n"
			if stderr != want {
				t.Errorf("stderr %q, want %q", stderr, want)
			}
		}},
		{"older masters", liveAnswer{err: status.Error(codes.Unimplemented, "unknown service gin.v1.LiveService")}, nil, exitErr, func(t *testing.T, _, stderr string) {
			if !strings.Contains(stderr, "no production measurements") || !strings.Contains(stderr, "older than live job reports") {
				t.Errorf("stderr %q", stderr)
			}
		}},
		{"other errors are errors", liveAnswer{err: status.Error(codes.PermissionDenied, "no")}, nil, exitErr, func(t *testing.T, _, stderr string) {
			if stderr != "ginctl: the master refused: no\n" {
				t.Errorf("stderr %q", stderr)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeLiveMaster{script: []liveAnswer{tc.answer}}
			args := append([]string{"job", "report", "--job", "9"}, tc.args...)
			r := ctl(context.Background(), serveLive(t, f), "", args...)
			if r.code != tc.wantCode {
				t.Fatalf("exit %d, want %d; stderr %s", r.code, tc.wantCode, r.stderr)
			}
			if isJSON(args) {
				o := schemaFor(t, args)
				if err := schematest.Validate(compileSchema(t, o), []byte(r.stdout), o.lines); err != nil {
					t.Errorf("does not conform to docs/json-schema/%s.json: %v", o.file, err)
				}
			}
			tc.check(t, r.stdout, r.stderr)
		})
	}
}

func jsonNumber(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestJobWatch drives the watch loop with a scripted master and ticks sent
// by the test: the lines of each change, and when the watch ends.
func TestJobWatch(t *testing.T) {
	// The job's life: not yet reporting; a slow link; it is confirmed and a
	// straggler appears (already confirmed); the masters are unreachable
	// for a tick; the slow link clears; the job ends.
	life := []liveAnswer{
		{err: notFound},
		{err: notFound},
		{resp: liveResp(slowLink(1.8, false))},
		{resp: liveResp(slowLink(1.9, true), straggler(2.5, true))},
		{err: noMasters},
		{err: noMasters},
		{resp: liveResp(straggler(2.4, true))},
		{err: notFound},
		{resp: liveResp()}, // not asked: the watch ended
	}
	for _, tc := range []struct {
		name       string
		output     string
		once       bool
		script     []liveAnswer
		wantErr    codes.Code
		wantStdout string
		wantStderr string
	}{
		{name: "table", output: "table", script: life, wantStdout: "watching job 9: 3 ranks reporting\n" +
			"+ slow-link node003 mlx5_2 1.8x: rank 5 (node003 gpu5 mlx5_2) sends at 1.80x the network time per byte of the job's median rank\n" +
			// The next answer, confirmed first.
			"+ straggler node001 gpu2 2.5x: rank 2 (node001 gpu2 mlx5_1): its collectives take 800 µs, the job's median rank's 2100 µs\n" +
			"! confirmed straggler node001 gpu2\n" +
			"! confirmed slow-link node003 mlx5_2\n" +
			"- slow-link node003 mlx5_2\n" +
			"job 9 ended (no rank reported for 2m0s)\n",
			wantStderr: "waiting for job 9 to report (no rank reported yet)\n" +
				"cannot reach a master: nothing listens at 127.0.0.1:1 (is gin-master running? set --master or GIN_MASTER_HOST); asking again every 2s\n"},
		{name: "json", output: "json", script: life, wantStdout: `{"event":"start","time":"2026-12-01T03:45:00Z","job":"9","ranks_reporting":3,"suspect":{"node":"","component":"","kind":"","slowdown":0,"since":"","confirmed":false,"evidence":[],"rank":-1,"gpu":-1,"nic":"","switch":"","what":"","comm":""}}
{"event":"suspect","time":"2026-12-01T03:45:00Z","job":"9","ranks_reporting":3,"suspect":{"node":"node003","component":"mlx5_2","kind":"slow-link","slowdown":1.8,"since":"2026-12-01T03:44:40Z","confirmed":false,"evidence":["rank 5 (node003 gpu5 mlx5_2) sends at 1.80x the network time per byte of the job's median rank","rank 6 (node004 gpu6 mlx5_3) receiving from it waits 1.62x the median receive"],"rank":5,"gpu":5,"nic":"mlx5_2","switch":"leaf07 (0x1), from port 1 of the NIC","what":"slow-link mlx5_2 on node003 (rank 5): 1.8x the time of the job's healthy ranks","comm":"0x5eed"}}
{"event":"suspect","time":"2026-12-01T03:45:00Z","job":"9","ranks_reporting":3,"suspect":{"node":"node001","component":"gpu2","kind":"straggler","slowdown":2.5,"since":"2026-12-01T03:44:55Z","confirmed":true,"evidence":["rank 2 (node001 gpu2 mlx5_1): its collectives take 800 µs, the job's median rank's 2100 µs"],"rank":2,"gpu":2,"nic":"mlx5_1","switch":"","what":"straggler gpu2 on node001 (rank 2): 2.5x the time of the job's healthy ranks, confirmed","comm":"0x5eed"}}
{"event":"confirmed","time":"2026-12-01T03:45:00Z","job":"9","ranks_reporting":3,"suspect":{"node":"node001","component":"gpu2","kind":"straggler","slowdown":2.5,"since":"2026-12-01T03:44:55Z","confirmed":true,"evidence":["rank 2 (node001 gpu2 mlx5_1): its collectives take 800 µs, the job's median rank's 2100 µs"],"rank":2,"gpu":2,"nic":"mlx5_1","switch":"","what":"straggler gpu2 on node001 (rank 2): 2.5x the time of the job's healthy ranks, confirmed","comm":"0x5eed"}}
{"event":"confirmed","time":"2026-12-01T03:45:00Z","job":"9","ranks_reporting":3,"suspect":{"node":"node003","component":"mlx5_2","kind":"slow-link","slowdown":1.9,"since":"2026-12-01T03:44:40Z","confirmed":true,"evidence":["rank 5 (node003 gpu5 mlx5_2) sends at 1.80x the network time per byte of the job's median rank","rank 6 (node004 gpu6 mlx5_3) receiving from it waits 1.62x the median receive"],"rank":5,"gpu":5,"nic":"mlx5_2","switch":"leaf07 (0x1), from port 1 of the NIC","what":"slow-link mlx5_2 on node003 (rank 5): 1.9x the time of the job's healthy ranks, confirmed","comm":"0x5eed"}}
{"event":"cleared","time":"2026-12-01T03:45:00Z","job":"9","ranks_reporting":3,"suspect":{"node":"node003","component":"mlx5_2","kind":"slow-link","slowdown":1.9,"since":"2026-12-01T03:44:40Z","confirmed":true,"evidence":["rank 5 (node003 gpu5 mlx5_2) sends at 1.80x the network time per byte of the job's median rank","rank 6 (node004 gpu6 mlx5_3) receiving from it waits 1.62x the median receive"],"rank":5,"gpu":5,"nic":"mlx5_2","switch":"leaf07 (0x1), from port 1 of the NIC","what":"slow-link mlx5_2 on node003 (rank 5): 1.9x the time of the job's healthy ranks, confirmed","comm":"0x5eed"}}
{"event":"ended","time":"2026-12-01T03:45:00Z","job":"9","ranks_reporting":0,"suspect":{"node":"","component":"","kind":"","slowdown":0,"since":"","confirmed":false,"evidence":[],"rank":-1,"gpu":-1,"nic":"","switch":"","what":"","comm":""}}
`, wantStderr: "cannot reach a master: nothing listens at 127.0.0.1:1 (is gin-master running? set --master or GIN_MASTER_HOST); asking again every 2s\n"},
		{name: "once", output: "table", once: true, script: []liveAnswer{{resp: liveResp(slowLink(1.8, false), straggler(2.5, true))}, {err: notFound}},
			wantStdout: "watching job 9: 3 ranks reporting\n" +
				"+ straggler node001 gpu2 2.5x: rank 2 (node001 gpu2 mlx5_1): its collectives take 800 µs, the job's median rank's 2100 µs\n" +
				"! confirmed straggler node001 gpu2\n" +
				"+ slow-link node003 mlx5_2 1.8x: rank 5 (node003 gpu5 mlx5_2) sends at 1.80x the network time per byte of the job's median rank\n"},
		{name: "once, not reporting", output: "table", once: true, script: []liveAnswer{{err: notFound}}, wantErr: codes.NotFound},
		{name: "once, no master", output: "table", once: true, script: []liveAnswer{{err: noMasters}}, wantErr: codes.Unavailable},
		{name: "another error ends the watch", output: "table", script: []liveAnswer{{resp: liveResp()}, {err: status.Error(codes.PermissionDenied, "no")}},
			wantErr: codes.PermissionDenied, wantStdout: "watching job 9: 3 ranks reporting\n"},
		{name: "waiting, quietly in json", output: "json", script: []liveAnswer{{err: notFound}, {err: notFound}, {err: status.Error(codes.Internal, "stop")}},
			wantErr: codes.Internal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			a := &app{globals: defaultGlobals(), stdout: &out, stderr: &errb}
			a.output = tc.output
			f := &fakeLiveMaster{script: tc.script}
			w := a.newJobWatcher("9", func(context.Context) (*ginv1.GetJobLiveResponse, error) { return f.next("9") })
			w.now = func() time.Time { return liveT0 }
			w.once = tc.once
			// Every answer but the first comes at a tick; the watch must end
			// before the ticks do (else the test would hang, and fails at
			// its deadline instead).
			ticks := make(chan time.Time, len(tc.script))
			for range len(tc.script) {
				ticks <- liveT0
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := w.run(ctx, ticks)
			if status.Code(err) != tc.wantErr {
				t.Fatalf("run = %v, want %v", err, tc.wantErr)
			}
			if ctx.Err() != nil {
				t.Fatal("the watch did not end")
			}
			if out.String() != tc.wantStdout {
				t.Errorf("stdout:\n%s\nwant:\n%s", out.String(), tc.wantStdout)
			}
			if errb.String() != tc.wantStderr {
				t.Errorf("stderr:\n%q\nwant:\n%q", errb.String(), tc.wantStderr)
			}
		})
	}
}

// TestJobWatchStopsOnCancel: Ctrl-C (the context ending) ends a watch
// without an error, whether it comes during a call or between ticks.
func TestJobWatchStopsOnCancel(t *testing.T) {
	for _, during := range []bool{true, false} {
		var out, errb bytes.Buffer
		a := &app{globals: defaultGlobals(), stdout: &out, stderr: &errb}
		ctx, cancel := context.WithCancel(context.Background())
		w := a.newJobWatcher("9", func(ctx context.Context) (*ginv1.GetJobLiveResponse, error) {
			if during {
				cancel()
				return nil, ctx.Err()
			}
			go cancel()
			return liveResp(), nil
		})
		if err := w.run(ctx, make(chan time.Time)); err != nil {
			t.Errorf("during a call %v: run = %v, want nil", during, err)
		}
	}
}

// TestJobWatchCommand: the command line, through ginctl's command tree
// against a scripted master.
func TestJobWatchCommand(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		script    []liveAnswer
		wantCode  int
		wantOut   string
		wantErrIn string
	}{
		{"interval too short", []string{"--job", "9", "--interval", "100ms"}, nil, exitUsage, "", "ginctl: --interval 100ms: must be at least 500ms (the masters re-evaluate suspects once a second)\n"},
		{"interval not a duration", []string{"--job", "9", "--interval", "2"}, nil, exitUsage, "", "--interval \"2\": want a duration"},
		{"no job", []string{"--once"}, nil, exitUsage, "", "ginctl: --job ID is required\n"},
		{"once", []string{"--job", "9", "--once"}, []liveAnswer{{resp: liveResp(slowLink(1.8, false))}}, 0,
			"watching job 9: 3 ranks reporting\n+ slow-link node003 mlx5_2 1.8x: rank 5 (node003 gpu5 mlx5_2) sends at 1.80x the network time per byte of the job's median rank\n", ""},
		{"once json", []string{"--job", "9", "--once", "-o", "json"}, []liveAnswer{{resp: liveResp(slowLink(1.8, false))}}, 0, "", ""},
		{"once, not reporting", []string{"--job", "9", "--once"}, []liveAnswer{{err: notFound}}, exitErr, "",
			"ginctl: no rank of job \"9\" reported in the last 2m0s (is the job running with NCCL_GIN_ENABLED=1, and gin-agent on its nodes?)\n"},
		{"until it ends", []string{"--job", "9", "--interval", "500ms"}, []liveAnswer{{resp: liveResp()}, {err: notFound}}, 0,
			"watching job 9: 3 ranks reporting\njob 9 ended (no rank reported for 2m0s)\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			master := "127.0.0.1:1"
			f := &fakeLiveMaster{script: tc.script}
			if tc.script != nil {
				master = serveLive(t, f)
			}
			args := append([]string{"job", "watch"}, tc.args...)
			r := ctl(context.Background(), master, "", args...)
			if r.code != tc.wantCode {
				t.Fatalf("exit %d, want %d; stderr %s", r.code, tc.wantCode, r.stderr)
			}
			if isJSON(args) {
				o := schemaFor(t, args)
				if !o.lines || o.file != "ginctl-job-watch" {
					t.Fatalf("schema %+v", o)
				}
				if err := validateLines(compileSchema(t, o), r.stdout); err != nil {
					t.Errorf("does not conform to docs/json-schema/%s.json: %v", o.file, err)
				}
				if n := strings.Count(r.stdout, "\n"); n != 2 || !strings.HasPrefix(r.stdout, `{"event":"start"`) || !strings.Contains(r.stdout, `{"event":"suspect"`) {
					t.Errorf("stdout %s", r.stdout)
				}
			} else if r.stdout != tc.wantOut {
				t.Errorf("stdout:\n%s\nwant:\n%s", r.stdout, tc.wantOut)
			}
			if tc.wantErrIn == "" && r.stderr != "" || !strings.Contains(r.stderr, tc.wantErrIn) {
				t.Errorf("stderr %q, want %q", r.stderr, tc.wantErrIn)
			}
			for _, j := range f.jobs {
				if j != "9" {
					t.Errorf("asked for job %q", j)
				}
			}
		})
	}
}
