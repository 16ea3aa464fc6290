package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/jsonout"
)

func (a *app) watchCmd() *cobra.Command {
	var since uint64
	cmd := &cobra.Command{
		Use:   "watch [--since INDEX]",
		Short: "Stream changes: node inventories and states, fabric imports, plans",
		Long: `Stream changes as they are committed, one line each, until interrupted:
time, Raft index, kind, subject and what changed (old → new):

  TIME                      INDEX  KIND             SUBJECT  CHANGE
  2026-12-01T03:45:12.408Z  57     node_state       node002  up → down (missed heartbeats)
  2026-12-01T03:45:20.001Z  58     node_updated     node002  generation 1 → 2
  2026-12-01T03:46:01.733Z  59     plan_pinned      42       pinned
  2026-12-01T03:50:00.020Z  60     plan_deleted     42       deleted (expired)
  2026-12-01T03:51:00.000Z  61     fabric_imported  fabric   imported

Without --since, ginctl reads the current index first and streams every
change after it (a header on stderr says which). --since INDEX replays the
changes after INDEX that the master still keeps (its most recent 4096),
then streams new ones. -o json prints one JSON object per line (docs/JSON.md).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("since") && since == 0 {
				return usagef("--since 0: want a Raft index, 1 or more")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			defer c.Close()
			// No deadline: a watch lasts until interrupted. When the
			// master goes away and the client moves to another, the watch
			// resumes after the last index printed (no gap, no repeat).
			// One index can carry many events (a batch of node state
			// changes is one Raft entry): the watch resumes from the index
			// before the last and skips the events of the last it printed.
			var last uint64
			var atLast int // events printed at index last
			headerDone := false
			return c.Do(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn) error {
				tc := ginv1.NewTopologyServiceClient(conn)
				from, skip := since, 0
				switch {
				case last > 0:
					from, skip = last-1, atLast
					fmt.Fprintf(a.stderr, "resuming after index %d on %s\n", last, conn.Target())
				case !cmd.Flags().Changed("since"):
					rctx, cancel := context.WithTimeout(ctx, a.timeout)
					resp, err := tc.ListNodes(rctx, &ginv1.ListNodesRequest{Consistency: a.consistency()})
					cancel()
					if err != nil {
						return err
					}
					from = resp.GetRead().GetIndex()
					fmt.Fprintf(a.stderr, "watching changes after index %d (served by %s); Ctrl-C to stop\n", from, resp.GetRead().GetServedBy())
				default:
					fmt.Fprintf(a.stderr, "watching changes after index %d (the kept ones first); Ctrl-C to stop\n", from)
				}
				st, err := tc.Watch(ctx, &ginv1.WatchRequest{SinceIndex: from})
				if err != nil {
					return err
				}
				if a.output != "json" && !headerDone && !a.noHeaders {
					fmt.Fprintf(a.stdout, watchFormat+"\n", "TIME", "INDEX", "KIND", "SUBJECT", "CHANGE")
				}
				headerDone = true
				for {
					ev, err := st.Recv()
					if err != nil {
						if cmd.Context().Err() != nil || err == io.EOF {
							return nil
						}
						return err
					}
					idx := ev.GetIndex()
					if idx < last || (idx == last && skip > 0) {
						if idx == last {
							skip--
						}
						continue // printed before a move to another master
					}
					if a.output == "json" {
						err = a.printLine(ev)
					} else {
						_, err = fmt.Fprintln(a.stdout, escapeText(watchLine(ev)))
					}
					if err != nil {
						return err
					}
					if idx > last {
						last, atLast = idx, 0
					}
					atLast++
				}
			})
		},
	}
	cmd.Flags().Uint64Var(&since, "since", 0, "replay the changes after this Raft index first (the master keeps its most recent 4096)")
	return cmd
}

// watchFormat lays out a watch line; its last column may hold spaces.
const watchFormat = "%-24s  %-5s  %-15s  %-7s  %s"

// watchTime is RFC 3339 in UTC with milliseconds, fixed width.
const watchTime = "2006-01-02T15:04:05.000Z"

// watchLine is one event as `ginctl watch` prints it: single-token time,
// index, kind and subject, then the change in words.
func watchLine(ev *ginv1.WatchResponse) string {
	at := "-"
	if ev.GetAt() != nil {
		at = ev.GetAt().AsTime().UTC().Format(watchTime)
	}
	kind := jsonout.EnumWord(ev.GetKind().Descriptor(), ev.GetKind().Number())
	subject, change := "-", ""
	switch ev.GetKind() {
	case ginv1.WatchEventKind_WATCH_EVENT_KIND_NODE_STATE:
		subject = ev.GetNode().GetName()
		change = stateName(ev.GetOldState()) + " → " + stateName(ev.GetNewState())
		if ev.GetReason() != "" {
			change += " (" + ev.GetReason() + ")"
		}
	case ginv1.WatchEventKind_WATCH_EVENT_KIND_NODE_UPDATED:
		subject = ev.GetNode().GetName()
		change = fmt.Sprintf("generation %d → %d", ev.GetOldGeneration(), ev.GetNewGeneration())
	case ginv1.WatchEventKind_WATCH_EVENT_KIND_NODE_DELETED:
		subject, change = ev.GetNode().GetName(), "deleted"
	case ginv1.WatchEventKind_WATCH_EVENT_KIND_PLAN_PINNED:
		subject, change = ev.GetJobId(), "pinned"
	case ginv1.WatchEventKind_WATCH_EVENT_KIND_PLAN_DELETED:
		subject, change = ev.GetJobId(), "deleted"
		if ev.GetReason() != "" {
			change += " (" + ev.GetReason() + ")"
		}
	case ginv1.WatchEventKind_WATCH_EVENT_KIND_FABRIC_IMPORTED:
		subject, change = "fabric", "imported"
	}
	if subject == "" {
		subject = "-"
	}
	return fmt.Sprintf(watchFormat, at, fmt.Sprint(ev.GetIndex()), kind, subject, change)
}
