package master

import "testing"

// When a master tells agents returning home that it takes sessions.
func TestSessionsWelcome(t *testing.T) {
	follower := sessionReadiness{leaderKnown: true, reportAccepted: true, commit: 1000, applied: 1000, queue: 1024}
	tests := []struct {
		name string
		mod  func(*sessionReadiness)
		want bool
	}{
		{"follower in sync", func(*sessionReadiness) {}, true},
		{"follower a few entries behind", func(r *sessionReadiness) { r.applied = 1000 - maxApplyLag }, true},
		{"follower replaying its log", func(r *sessionReadiness) { r.applied = 1000 - maxApplyLag - 1 }, false},
		{"no leader known", func(r *sessionReadiness) { r.leaderKnown = false }, false},
		{"no report accepted yet", func(r *sessionReadiness) { r.reportAccepted = false }, false},
		{"detached", func(r *sessionReadiness) { r.detached = true }, false},
		{"handshake queue half full", func(r *sessionReadiness) { r.waiting = 512 }, true},
		{"handshake queue more than half full", func(r *sessionReadiness) { r.waiting = 513 }, false},
		{"leader", func(r *sessionReadiness) { *r = sessionReadiness{leads: true, queue: 1024} }, true},
		{"leader in a handshake storm", func(r *sessionReadiness) { *r = sessionReadiness{leads: true, queue: 1024, waiting: 1000} }, false},
		{"no queue, none waiting", func(r *sessionReadiness) { r.queue = 0 }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := follower
			tc.mod(&r)
			if got := sessionsWelcome(r); got != tc.want {
				t.Fatalf("sessionsWelcome(%+v) = %v, want %v", r, got, tc.want)
			}
		})
	}
}
