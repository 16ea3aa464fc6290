package agent

import (
	"context"
	"errors"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// planSink records the plans it is given; refuse makes it refuse job "bad".
type planSink struct{ got []string }

func (p *planSink) Put(pl *ginv1.Plan) error {
	if pl.GetJobId() == "bad" {
		return errors.New("plan: content_hash does not match")
	}
	p.got = append(p.got, pl.GetJobId())
	return nil
}

// Plans pushed on the session reach the node's plan store, on any
// response; a plan the store refuses is logged and the session goes on.
func TestPushedPlansReachTheStore(t *testing.T) {
	var logs syncBuffer
	sink := &planSink{}
	cfg := testConfig(newFakeSource("H100"), &logs, "m1:5000")
	cfg.Plans = sink
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.collectOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := a.newSession(context.Background(), "m1:5000", &recordingStream{}, nil)
	defer s.stop()
	if err := s.sendHello(); err != nil {
		t.Fatal(err)
	}
	if err := s.onResponse(helloAck(0, true, "")); err != nil {
		t.Fatal(err)
	}
	push := &ginv1.SessionResponse{Plans: []*ginv1.Plan{{JobId: "7"}, {JobId: "bad"}, {JobId: "8"}}}
	if err := s.onResponse(push); err != nil {
		t.Fatalf("a push ended the session: %v", err)
	}
	if strings.Join(sink.got, ",") != "7,8" {
		t.Fatalf("store got %v, want 7,8", sink.got)
	}
	if !strings.Contains(logs.String(), "pushed plan not kept") || !strings.Contains(logs.String(), "job=bad") {
		t.Fatalf("the refused plan was not logged:\n%s", logs.String())
	}
}
