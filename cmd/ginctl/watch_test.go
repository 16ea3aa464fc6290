package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// lineBuffer is a writer that reports when it holds n lines.
type lineBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	n    int
	done chan struct{}
}

func newLineBuffer(n int) *lineBuffer { return &lineBuffer{n: n, done: make(chan struct{})} }

func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	before := strings.Count(b.buf.String(), "\n")
	b.buf.Write(p)
	if after := strings.Count(b.buf.String(), "\n"); before < b.n && after >= b.n {
		close(b.done)
	}
	return len(p), nil
}

func (b *lineBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// watchUntil runs `ginctl watch args...` until stdout holds lines lines,
// calling during once stderr holds the header; it returns stdout and stderr.
func watchUntil(t *testing.T, master string, lines int, during func(), args ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errb := newLineBuffer(lines), newLineBuffer(1)
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, append([]string{"--master", master, "watch"}, args...), strings.NewReader(""), out, errb, func(string) string { return "" })
	}()
	deadline := time.After(30 * time.Second)
	select {
	case <-errb.done:
	case c := <-code:
		t.Fatalf("watch ended with %d before its header: %s", c, errb.String())
	case <-deadline:
		t.Fatal("no watch header on stderr")
	}
	if during != nil {
		during()
	}
	select {
	case <-out.done:
	case c := <-code:
		t.Fatalf("watch ended with %d: stdout %q stderr %q", c, out.String(), errb.String())
	case <-deadline:
		t.Fatalf("watch printed %q, want %d lines", out.String(), lines)
	}
	cancel()
	if c := <-code; c != 0 {
		t.Fatalf("watch exited %d after Ctrl-C: %s", c, errb.String())
	}
	return out.String(), errb.String()
}

// watchIndex hides the index column of watch lines.
var watchIndex = regexp.MustCompile(`(?m)^(\S+\s+)\d+ *`)

// TestWatch: the pinned and deleted plan appear, replayed with --since and
// live without it (no gap between the read of the index and the stream).
func TestWatch(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dev cluster")
	}
	cl := startDev(t)
	addr := cl.Master.Addr()
	r := ctl(context.Background(), addr, "", "plan", "--job", "7", "--nodes", "node[001-002]", "-o", "json")
	if r.code != 0 {
		t.Fatalf("plan: %s", r.stderr)
	}
	var p struct {
		CreatedIndex uint64 `json:"created_index"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil || p.CreatedIndex == 0 {
		t.Fatalf("plan -o json: %v %s", err, r.stdout)
	}
	if r := ctl(context.Background(), addr, "", "plan", "delete", "--job", "7"); r.code != 0 {
		t.Fatalf("plan delete: %s", r.stderr)
	}
	since := fmt.Sprint(p.CreatedIndex - 1)

	out, errOut := watchUntil(t, addr, 3, nil, "--since", since)
	golden(t, "watch-since", fmt.Sprintf("$ ginctl watch --since INDEX\n--- stdout\n%s--- stderr\n%s", watchIndex.ReplaceAllString(scrubText(out), "${1}N  "), scrubText(errOut)))

	out, _ = watchUntil(t, addr, 2, nil, "--since", since, "-o", "json")
	o := schemaFor(t, []string{"watch"})
	s := compileSchema(t, o)
	if err := validateLines(s, out); err != nil {
		t.Fatalf("watch -o json does not conform to its schema: %v\n%s", err, out)
	}
	golden(t, "watch-since-json", "$ ginctl watch --since INDEX -o json\n"+scrubJSON(t, out, true))

	// Live: a plan pinned right after the header is seen.
	out, errOut = watchUntil(t, addr, 2, func() {
		if r := ctl(context.Background(), addr, "", "plan", "--job", "8", "--nodes", "node003"); r.code != 0 {
			t.Errorf("plan: %s", r.stderr)
		}
	})
	if !strings.Contains(out, "plan_pinned      8        pinned") || !strings.Contains(errOut, "watching changes after index") {
		t.Fatalf("live watch: stdout %q, stderr %q", out, errOut)
	}
}

func TestWatchLine(t *testing.T) {
	at := timestamppb.New(time.Date(2026, 12, 1, 3, 45, 12, 0, time.UTC))
	node := &ginv1.NodeSummary{Name: "node002"}
	tests := []struct {
		ev   *ginv1.WatchResponse
		want string
	}{
		{&ginv1.WatchResponse{Index: 57, At: at, Kind: ginv1.WatchEventKind_WATCH_EVENT_KIND_NODE_STATE, Node: node,
			OldState: ginv1.NodeState_NODE_STATE_UP, NewState: ginv1.NodeState_NODE_STATE_DOWN, Reason: "missed 3 heartbeats"},
			"2026-12-01T03:45:12.000Z  57     node_state       node002  up → down (missed 3 heartbeats)"},
		{&ginv1.WatchResponse{Index: 58, At: at, Kind: ginv1.WatchEventKind_WATCH_EVENT_KIND_NODE_UPDATED, Node: node, OldGeneration: 1, NewGeneration: 2},
			"2026-12-01T03:45:12.000Z  58     node_updated     node002  generation 1 → 2"},
		{&ginv1.WatchResponse{Index: 59, At: at, Kind: ginv1.WatchEventKind_WATCH_EVENT_KIND_NODE_DELETED, Node: node, Reason: "deleted by request"},
			"2026-12-01T03:45:12.000Z  59     node_deleted     node002  deleted"},
		{&ginv1.WatchResponse{Index: 60, At: at, Kind: ginv1.WatchEventKind_WATCH_EVENT_KIND_PLAN_DELETED, JobId: "4242", Reason: "expired"},
			"2026-12-01T03:45:12.000Z  60     plan_deleted     4242     deleted (expired)"},
		{&ginv1.WatchResponse{Index: 61, Kind: ginv1.WatchEventKind_WATCH_EVENT_KIND_FABRIC_IMPORTED},
			"-                         61     fabric_imported  fabric   imported"},
	}
	for _, tc := range tests {
		if got := watchLine(tc.ev); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}
