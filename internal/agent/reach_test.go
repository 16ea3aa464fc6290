package agent

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/masteraddr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestReachPacesFailover(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := newReach(func() time.Time { return now })
	addrs := []string{"m1", "m2", "m3"}
	at := func(i int) string { return addrs[i%len(addrs)] }

	if r.alive() || r.pace(20*time.Second) != 20*time.Second {
		t.Fatal("with no answer yet, the backoff must not be capped")
	}
	r.failed("m1") // the leader died
	r.answered("m2")
	if !r.isDown("m1") || r.isDown("m2") || r.isDown("m3") {
		t.Fatalf("down: m1=%v m2=%v m3=%v", r.isDown("m1"), r.isDown("m2"), r.isDown("m3"))
	}
	if got := r.pace(20 * time.Second); got != liveRetryCap {
		t.Fatalf("pace while a master answers = %v, want %v", got, liveRetryCap)
	}
	if got := r.next(2, 3, at); got != 1 {
		t.Fatalf("next after m3 = %s, want m2 (m1 is down)", at(got))
	}
	if got := r.next(1, 3, at); got != 2 {
		t.Fatalf("next after m2 = %s, want m3", at(got))
	}
	r.failed("m2")
	r.failed("m3")
	if got := r.next(0, 3, at); got != 1 {
		t.Fatalf("next with every master down = %s, want plain rotation to m2", at(got))
	}
	now = now.Add(max(downMemory, aliveMemory) + time.Second)
	if r.isDown("m1") || r.alive() {
		t.Fatal("failures and answers are forgotten after their memory")
	}
	if r.pace(20*time.Second) != 20*time.Second {
		t.Fatal("no recent answer: the full backoff applies again")
	}
}

func TestMasterAnswered(t *testing.T) {
	tests := []struct {
		name string
		out  outcome
		want bool
	}{
		{"redirect", outcome{err: errors.New("x"), code: codes.FailedPrecondition, hint: "m2:5000"}, true},
		{"no leader known", outcome{err: status.Error(codes.FailedPrecondition, "no leader"), code: codes.FailedPrecondition}, true},
		{"refused inventory", outcome{err: status.Error(codes.InvalidArgument, "x"), code: codes.InvalidArgument}, true},
		{"connection refused", outcome{err: status.Error(codes.Unavailable, "connection refused"), code: codes.Unavailable}, false},
		{"session broke after it was established", outcome{established: true, err: status.Error(codes.Unavailable, "EOF"), code: codes.Unavailable}, false},
		{"ack timeout (local error)", outcome{established: true, err: errors.New("ack timeout")}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := masterAnswered(tc.out); got != tc.want {
				t.Fatalf("masterAnswered = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReachPassesOverExhaustedMasters(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := newReach(func() time.Time { return now })
	addrs := []string{"m1", "m2", "m3"}
	at := func(i int) string { return addrs[i%len(addrs)] }

	r.answered("m1")
	r.exhausted("m1") // m1 answered RESOURCE_EXHAUSTED
	if !r.avoid("m1") || r.isDown("m1") || r.avoid("m2") {
		t.Fatalf("avoid: m1=%v (down %v) m2=%v; want only m1 avoided, and not as down", r.avoid("m1"), r.isDown("m1"), r.avoid("m2"))
	}
	if got := r.next(2, 3, at); got != 1 {
		t.Fatalf("next after m3 = %s, want m2 (m1 is exhausted)", at(got))
	}
	r.exhausted("m2")
	r.exhausted("m3")
	if got := r.next(0, 3, at); got != 1 {
		t.Fatalf("next with every master exhausted = %s, want plain rotation to m2", at(got))
	}
	now = now.Add(busyMemory + time.Second)
	if r.avoid("m1") || r.avoid("m2") {
		t.Fatal("exhausted masters are tried again after busyMemory")
	}
	if got := r.next(2, 3, at); got != 0 {
		t.Fatalf("next after m3 = %s, want m1 again", at(got))
	}
}

// The agents of a failed master spread evenly over the other masters
// instead of all moving to the next one in the list.
func TestAgentsOfAFailedMasterSpreadOverTheOthers(t *testing.T) {
	for _, n := range []int{2, 3, 4, 5} {
		addrs := make([]string, n)
		for i := range addrs {
			addrs[i] = fmt.Sprintf("m%d", i+1)
		}
		at := func(i int) string { return addrs[i%n] }
		for home := range n {
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			r := newReach(func() time.Time { return now })
			r.failed(addrs[home])
			counts := make([]int, n)
			moved := 0
			for i := range 6000 {
				name := fmt.Sprintf("node%05d", i)
				if masteraddr.StartIndex(name, n) != home {
					continue
				}
				moved++
				counts[r.next(masteraddr.MoveFrom(name, home, n), n, at)]++
			}
			if counts[home] != 0 {
				t.Fatalf("%d masters: %d agents of failed m%d went back to it", n, counts[home], home+1)
			}
			for j, c := range counts {
				if want := moved / (n - 1); j != home && (c < want*85/100 || c > want*115/100) {
					t.Errorf("%d masters, m%d failed: m%d gets %d of its %d agents, want about %d (%v)", n, home+1, j+1, c, moved, want, counts)
				}
			}
		}
	}
}
