package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/livejob"
)

// minWatchInterval bounds --interval: the leader re-evaluates suspects
// once a second, so faster polls only load it.
const minWatchInterval = 500 * time.Millisecond

// jobWatchEvent is one line of `ginctl job watch -o json`.
type jobWatchEvent struct {
	// Event: "start" (the first answer), "suspect" (a new suspect),
	// "confirmed" (a suspect newly confirmed), "cleared" (a suspect gone),
	// "ended" (no rank reported within the live horizon any more).
	Event string `json:"event"`
	Time  string `json:"time"` // RFC 3339: when ginctl saw it
	Job   string `json:"job"`
	// RanksReporting: the job's ranks in the answer (0 for "ended").
	RanksReporting int `json:"ranks_reporting"`
	// Suspect: as `ginctl job report` writes one; for "start" and "ended",
	// an empty one (kind "", rank and gpu -1).
	Suspect jobSuspect `json:"suspect"`
}

// noSuspect is the suspect of the events about the job itself.
var noSuspect = jobSuspect{Rank: -1, GPU: -1, Evidence: []string{}}

func (a *app) jobWatchCmd() *cobra.Command {
	var job string
	var interval time.Duration
	var once bool
	cmd := &cobra.Command{
		Use:   "watch --job ID [--interval 2s] [--once]",
		Short: "Follow a running job's live suspects: one line as each appears, is confirmed or clears",
		Long: `Ask the masters every --interval what they see of a running job (its ranks
report through the profiler plugin and gin-agent, docs/LIVE.md) and print one
line per change, until the job ends or Ctrl-C:

  $ ginctl job watch --job 4242
  watching job 4242: 32 ranks reporting
  + slow-link node003 mlx5_2 1.8x: rank 21 (node003 gpu5 mlx5_2) sends at 1.80x the network time per byte of the job's median rank (...)
  ! confirmed slow-link node003 mlx5_2
  - slow-link node003 mlx5_2
  job 4242 ended (no rank reported for 2m0s)

"+" is a new suspect (kind, node, component, how many times slower, its first
piece of evidence; ginctl job report --job ID prints all of it), "!" a suspect
newly confirmed (seen in enough consecutive windows to act on), "-" a suspect
gone. A suspect is one rank of one communicator, of one kind.

Before any rank of the job reported, ginctl waits for one (saying so once on
stderr); once the job was seen, no rank reporting for 2 minutes ends the watch
(exit 0). A master that does not answer is asked again at the next interval;
another error ends the watch with it. --once prints the current suspects and
exits (1 when no rank of the job is reporting). -o json prints one JSON object
per line: {"event": "start"|"suspect"|"confirmed"|"cleared"|"ended", "time",
"job", "ranks_reporting", "suspect"} (docs/JSON.md).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if job == "" {
				return usagef("--job ID is required")
			}
			if interval < minWatchInterval {
				return usagef("--interval %s: must be at least %s (the masters re-evaluate suspects once a second)", interval, minWatchInterval)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			w := a.newJobWatcher(job, func(ctx context.Context) (resp *ginv1.GetJobLiveResponse, err error) {
				ctx, cancel := context.WithTimeout(ctx, a.timeout)
				defer cancel()
				err = c.Do(ctx, func(ctx context.Context, conn *grpc.ClientConn) (err error) {
					resp, err = ginv1.NewLiveServiceClient(conn).GetJobLive(ctx, &ginv1.GetJobLiveRequest{JobId: job})
					return err
				})
				return resp, err
			})
			w.once, w.interval = once, interval
			t := time.NewTicker(interval)
			defer t.Stop()
			return w.run(ctx, t.C)
		},
	}
	cmd.Flags().StringVar(&job, "job", "", "the job id")
	cmd.Flags().DurationVar(&interval, "interval", 2*time.Second, "how often to ask the masters (at least 500ms)")
	cmd.Flags().BoolVar(&once, "once", false, "print the current suspects and exit")
	return cmd
}

// suspectKey is one suspect across answers: a rank of a communicator, of
// one kind.
type suspectKey struct {
	comm string
	rank int64
	kind string
}

// jobWatcher turns successive GetJobLive answers into change lines.
type jobWatcher struct {
	a        *app
	job      string
	get      func(context.Context) (*ginv1.GetJobLiveResponse, error)
	now      func() time.Time
	once     bool
	interval time.Duration

	seen            bool // the job answered once
	waitingSaid     bool
	unavailableSaid bool
	known           map[suspectKey]jobSuspect
}

func (a *app) newJobWatcher(job string, get func(context.Context) (*ginv1.GetJobLiveResponse, error)) *jobWatcher {
	return &jobWatcher{a: a, job: job, get: get, now: time.Now, interval: 2 * time.Second, known: map[suspectKey]jobSuspect{}}
}

// run asks at once, then at each tick, until the job ends, ctx ends (nil:
// Ctrl-C is how a watch stops), an error other than an unavailable master,
// or, with once, after the first answer.
func (w *jobWatcher) run(ctx context.Context, ticks <-chan time.Time) error {
	for {
		done, err := w.poll(ctx)
		if done || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticks:
		}
	}
}

// poll asks once and prints what changed; done is true when the watch is
// over.
func (w *jobWatcher) poll(ctx context.Context) (done bool, err error) {
	resp, err := w.get(ctx)
	if ctx.Err() != nil {
		return true, nil
	}
	switch status.Code(err) {
	case codes.OK:
	case codes.NotFound:
		switch {
		case w.seen:
			return true, w.emit(jobWatchEvent{Event: "ended", Suspect: noSuspect}, fmt.Sprintf("job %s ended (no rank reported for %s)", w.job, livejob.Default().Horizon))
		case w.once:
			return true, err
		}
		if !w.waitingSaid && w.a.output != "json" {
			fmt.Fprintln(w.a.stderr, escapeText(fmt.Sprintf("waiting for job %s to report (no rank reported yet)", w.job)))
		}
		w.waitingSaid = true
		return false, nil
	case codes.Unavailable, codes.DeadlineExceeded:
		if w.once {
			return true, err
		}
		if !w.unavailableSaid {
			fmt.Fprintf(w.a.stderr, "%s; asking again every %s\n", describe(err), w.interval)
		}
		w.unavailableSaid = true
		return false, nil
	default:
		return true, err
	}
	w.unavailableSaid = false
	n := len(resp.GetRanks())
	if !w.seen {
		w.seen = true
		if err := w.emit(jobWatchEvent{Event: "start", RanksReporting: n, Suspect: noSuspect}, fmt.Sprintf("watching job %s: %d ranks reporting", w.job, n)); err != nil {
			return true, err
		}
	}
	now := map[suspectKey]jobSuspect{}
	for _, s := range liveSuspects(resp.GetSuspects()) {
		k := suspectKey{s.Comm, s.Rank, s.Kind}
		if _, dup := now[k]; dup {
			continue
		}
		now[k] = s
		before, had := w.known[k]
		if !had {
			line := fmt.Sprintf("+ %s %s %s %sx", cell(s.Kind), cell(s.Node), cell(s.Component), slowdownWord(s.Slowdown))
			if len(s.Evidence) > 0 {
				line += ": " + s.Evidence[0]
			}
			if err := w.emit(jobWatchEvent{Event: "suspect", RanksReporting: n, Suspect: s}, line); err != nil {
				return true, err
			}
		}
		if s.Confirmed && (!had || !before.Confirmed) {
			if err := w.emit(jobWatchEvent{Event: "confirmed", RanksReporting: n, Suspect: s},
				fmt.Sprintf("! confirmed %s %s %s", cell(s.Kind), cell(s.Node), cell(s.Component))); err != nil {
				return true, err
			}
		}
	}
	var gone []jobSuspect
	for k, s := range w.known {
		if _, ok := now[k]; !ok {
			gone = append(gone, s)
		}
	}
	sort.Slice(gone, func(i, j int) bool { return suspectBefore(gone[i], gone[j]) })
	for _, s := range gone {
		if err := w.emit(jobWatchEvent{Event: "cleared", RanksReporting: n, Suspect: s},
			fmt.Sprintf("- %s %s %s", cell(s.Kind), cell(s.Node), cell(s.Component))); err != nil {
			return true, err
		}
	}
	w.known = now
	return w.once, nil
}

// emit writes one event: a JSON line, or line.
func (w *jobWatcher) emit(ev jobWatchEvent, line string) error {
	if w.a.output == "json" {
		ev.Time = w.now().UTC().Format(time.RFC3339Nano)
		ev.Job = w.job
		return w.a.printLine(ev)
	}
	_, err := fmt.Fprintln(w.a.stdout, escapeText(line))
	return err
}
