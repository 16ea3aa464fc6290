package main

import (
	"context"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/fakemaster"
	"github.com/gin-topology/gin/internal/planread"
)

// TestPlanWarnsOfFailingNodes: ginctl plan pins the plan all the same
// (exit 0) and names on stderr each of its nodes that fails its health
// check, one line each.
func TestPlanWarnsOfFailingNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dev cluster")
	}
	addr := startFaulty(t, "node003/GPU3/nvlink7=down", "node004/GPU2/xid=94")
	const warning = "warning: node003 fails its health check (nvlink-down GPU3/nvlink7): the plan uses it; ginctl check --nodes node003\n"
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"created on a failing node", []string{"plan", "--job", "51", "--nodes", "node[001-003]"}, warning},
		{"existing, -o json", []string{"plan", "--job", "51", "--nodes", "node[001-003]", "-o", "json"}, warning},
		{"a warning node is not named", []string{"plan", "--job", "52", "--nodes", "node[001-002,004]"}, ""},
		// Only shown (no --nodes): no check asked.
		{"shown", []string{"plan", "--job", "51"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ctl(context.Background(), addr, "", tc.args...)
			if r.code != 0 || r.stderr != tc.stderr {
				t.Fatalf("exit %d, stderr %q; want exit 0, stderr %q\nstdout %s", r.code, r.stderr, tc.stderr, r.stdout)
			}
			if job := tc.args[2]; !strings.Contains(r.stdout, `"`+job+`"`) && !strings.Contains(r.stdout, "plan for job "+job) {
				t.Errorf("the plan is not printed:\n%s", r.stdout)
			}
		})
	}

	// A master without CheckService (or none that answers it): the plan,
	// no extra line.
	plans := &fakemaster.Plans{Plan: func(job string) *ginv1.Plan {
		p := &ginv1.Plan{FormatVersion: planread.FormatVersion, JobId: job, Nodes: []string{"node003"}}
		p.ContentHash = planread.Hash(p)
		return p
	}}
	r := ctl(context.Background(), fakemaster.Serve(t, plans), "", "plan", "--job", "53", "--nodes", "node003")
	if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, "plan for job 53") {
		t.Errorf("without verdicts: exit %d, stderr %q, stdout %s; want exit 0, the plan, nothing on stderr", r.code, r.stderr, r.stdout)
	}
}
