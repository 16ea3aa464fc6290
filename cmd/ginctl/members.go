package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

func (a *app) membersCmd() *cobra.Command {
	var pending bool
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List the masters of the Raft cluster",
		Long: `List the masters: id, Raft address, client address, leader, voter, and
whether the leader hears from each (REACHABLE, LAST_CONTACT: how long ago its
last session report reached the leader). A follower answers with the leader's
view; "-" when no leader answered it. -o json prints an array of objects.

With --pending, the masters admitted (ginctl members add) that have not joined
yet: id, the Raft address they must join from ("any"), who admitted them.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			resp, err := a.clusterInfo(cmd.Context())
			if err != nil {
				return err
			}
			if pending {
				return a.printPending(resp.GetPending())
			}
			if a.output == "json" {
				return a.printJSON(resp.GetMembers())
			}
			t := a.newTable("ID", "RAFT_ADDRESS", "CLIENT_ADDRESS", "LEADER", "VOTER", "REACHABLE", "LAST_CONTACT")
			for _, m := range resp.GetMembers() {
				t.row(m.GetId(), m.GetAddress(), m.GetClientAddress(), m.GetLeader(), m.GetVoter(), reachable(m), lastContact(m))
			}
			if err := t.flush(); err != nil {
				return err
			}
			a.summary("cluster %s, term %d, commit index %d (as %s sees it)", dash(resp.GetClusterId()), resp.GetTerm(), resp.GetCommitIndex(), resp.GetServerId())
			return nil
		},
	}
	cmd.Flags().BoolVar(&pending, "pending", false, "list the admitted masters that have not joined yet")
	rm := &cobra.Command{
		Use:   "remove ID",
		Short: "Remove a master (a dead one, or one being decommissioned) from the cluster",
		Long: `Remove a master from the Raft configuration, or take back the admission of one
that has not joined yet. Its name then opens nothing: it joins again only after
ginctl members add ID. (Dead-server cleanup, which removes a master cut off by
a partition, admits it again itself, so that master comes back on its own.)`,
		Args: args("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp *ginv1.RemoveServerResponse
			if err := a.withAdmin(cmd.Context(), func(ctx context.Context, ac ginv1.AdminServiceClient) (err error) {
				resp, err = ac.RemoveServer(ctx, &ginv1.RemoveServerRequest{ServerId: args[0]})
				return err
			}); err != nil {
				return err
			}
			if a.output == "json" {
				return a.printJSON(resp)
			}
			fmt.Fprintf(a.stdout, "removed %s (commit index %d)\n", args[0], resp.GetIndex())
			return nil
		},
	}
	var address string
	add := &cobra.Command{
		Use:   "add ID",
		Short: "Admit a new master: its next join with a master certificate for ID is accepted",
		Long: `Admit a master that is not a member yet (admin role). Joining needs an admin's
word: without it the leader refuses a Join from any server that is not in the
Raft configuration, whatever master certificate it holds. Run this first, then
start the new master with --join (a master already waiting retries by itself).
The admission is used once: when the master has joined, and when it is removed
(members remove), its name opens nothing again. --address binds the admission to
the Raft address the join must name (HOST:PORT, as the master advertises it).
The masters of a first boot (--bootstrap-expect with the listed peers) need no
admission.`,
		Args: args("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp *ginv1.AdmitServerResponse
			if err := a.withAdmin(cmd.Context(), func(ctx context.Context, ac ginv1.AdminServiceClient) (err error) {
				resp, err = ac.AdmitServer(ctx, &ginv1.AdmitServerRequest{ServerId: args[0], RaftAddress: address})
				return err
			}); err != nil {
				return err
			}
			if a.output == "json" {
				return a.printJSON(resp)
			}
			at := ""
			if address != "" {
				at = " at Raft address " + address
			}
			fmt.Fprintf(a.stdout, "admitted %s%s (commit index %d): start it with --join, it joins once\n", args[0], at, resp.GetIndex())
			return nil
		},
	}
	add.Flags().StringVar(&address, "address", "", "the Raft address (HOST:PORT) the new master's join must name; default any")
	cmd.AddCommand(add, rm)
	return cmd
}

// reachable is whether the leader hears from m ("-": the answer came from
// a follower, which does not know).
func reachable(m *ginv1.Member) string {
	if m.Reachable == nil {
		return "-"
	}
	return fmt.Sprint(m.GetReachable())
}

// lastContact is how long ago the leader last heard from m ("-": unknown,
// or never since the leader was elected).
func lastContact(m *ginv1.Member) string {
	if m.LastContactMs == nil {
		return "-"
	}
	return (time.Duration(m.GetLastContactMs()) * time.Millisecond).Round(100 * time.Millisecond).String()
}

// printPending lists admissions not used up yet (members --pending).
func (a *app) printPending(ps []*ginv1.PendingMember) error {
	if a.output == "json" {
		if ps == nil {
			ps = []*ginv1.PendingMember{}
		}
		return a.printJSON(ps)
	}
	t := a.newTable("ID", "RAFT_ADDRESS", "ADMITTED_BY")
	for _, p := range ps {
		addr := p.GetRaftAddress()
		if addr == "" {
			addr = "any"
		}
		t.row(p.GetId(), addr, dash(p.GetAdmittedBy()))
	}
	if err := t.flush(); err != nil {
		return err
	}
	a.summary("%d admitted master(s) not joined yet", len(ps))
	return nil
}
