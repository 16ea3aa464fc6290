package master

import (
	"testing"
	"time"
)

func TestDeadServersBookkeeping(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	timeout := 10 * time.Second
	tests := []struct {
		name    string
		steps   func(d *deadServers)
		now     time.Time
		want    string
		failing int
	}{
		{"nothing failing", func(*deadServers) {}, t0, "", 0},
		{"failing, not yet overdue", func(d *deadServers) { d.fail("m2", t0) }, t0.Add(5 * time.Second), "", 1},
		{"overdue", func(d *deadServers) { d.fail("m2", t0) }, t0.Add(11 * time.Second), "m2", 1},
		{"a later failure keeps the first time", func(d *deadServers) { d.fail("m2", t0); d.fail("m2", t0.Add(9*time.Second)) }, t0.Add(11 * time.Second), "m2", 1},
		{"resumed", func(d *deadServers) { d.fail("m2", t0); d.resume("m2") }, t0.Add(time.Hour), "", 0},
		{"never contacted is not overdue", func(d *deadServers) { d.fail("m2", time.Time{}) }, t0.Add(time.Hour), "", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var d deadServers
			tc.steps(&d)
			id, n := d.overdue(tc.now, timeout)
			if id != tc.want || n != tc.failing {
				t.Fatalf("overdue = %q, %d failing; want %q, %d", id, n, tc.want, tc.failing)
			}
		})
	}
}
