package main

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

func TestOffLeader(t *testing.T) {
	cases := []struct {
		name string
		r    *ginv1.ReadInfo
		want string
	}{
		{"no read info", nil, ""},
		{"the leader", &ginv1.ReadInfo{Leader: true}, ""},
		{"a follower", &ginv1.ReadInfo{Staleness: durationpb.New(1500 * time.Millisecond), Lag: 150},
			" (a follower: last heard from the leader 1.5s ago, 150 committed entries behind)"},
		// Issue #33 item 6: heard from 18 ms ago, yet far behind (its data
		// dir full); the figure is printed as the master reports it.
		{"a follower that cannot append", &ginv1.ReadInfo{Staleness: durationpb.New(18 * time.Millisecond), Lag: 10838},
			" (a follower: last heard from the leader 18ms ago, 10838 committed entries behind)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := offLeader(tc.r); got != tc.want {
				t.Fatalf("offLeader = %q, want %q", got, tc.want)
			}
		})
	}
}
