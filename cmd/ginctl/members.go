package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

func (a *app) membersCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List the masters of the Raft cluster",
		Long:  "List the masters: id, Raft address, client address, leader, voter. -o json prints an array of objects.",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			resp, err := a.clusterInfo(cmd.Context())
			if err != nil {
				return err
			}
			if a.output == "json" {
				return a.printJSON(resp.GetMembers())
			}
			t := a.newTable("ID", "RAFT_ADDRESS", "CLIENT_ADDRESS", "LEADER", "VOTER")
			for _, m := range resp.GetMembers() {
				t.row(m.GetId(), m.GetAddress(), m.GetClientAddress(), m.GetLeader(), m.GetVoter())
			}
			if err := t.flush(); err != nil {
				return err
			}
			a.summary("cluster %s, term %d, commit index %d (as %s sees it)", dash(resp.GetClusterId()), resp.GetTerm(), resp.GetCommitIndex(), resp.GetServerId())
			return nil
		},
	}
	rm := &cobra.Command{
		Use:   "remove ID",
		Short: "Remove a master (a dead one, or one being decommissioned) from the cluster",
		Long: `Remove a master from the Raft configuration. Stop the master first: a running
master started with --join notices within seconds that it was removed and joins
again (that is how a master cut off by a partition comes back after dead-server
cleanup).`,
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
	cmd.AddCommand(rm)
	return cmd
}
