package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/gin-topology/gin/internal/inventory"
)

// collectLoop collects at start and every CollectInterval until ctx is done,
// whether or not a master is reachable.
func (a *Agent) collectLoop(ctx context.Context) {
	t := time.NewTicker(a.cfg.CollectInterval)
	defer t.Stop()
	failing := false
	for {
		err := a.collectOnce(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			failing = true
			a.log.Warn("inventory collection failing; keeping the last good inventory and retrying every collect interval",
				slog.String("source", a.cfg.Source.Name()), slog.Any("err", err))
		case err != nil:
			a.log.Debug("inventory collection failed", slog.Any("err", err))
		case failing:
			failing = false
			a.log.Info("inventory collection recovered", slog.String("source", a.cfg.Source.Name()))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// collectOnce reads the source, and stores and announces the result when its
// content changed.
func (a *Agent) collectOnce(ctx context.Context) error {
	inv, err := a.cfg.Source.Collect(ctx)
	if err == nil && inv == nil {
		err = errors.New("source returned no inventory")
	}
	if err != nil {
		err = fmt.Errorf("agent: collect from %s: %w", a.cfg.Source.Name(), err)
		a.mu.Lock()
		a.status.Collections++
		a.status.CollectErrors++
		a.mu.Unlock()
		if ctx.Err() == nil {
			a.recordError(err)
		}
		return err
	}
	if inv.GetNodeName() != a.cfg.NodeName {
		// The source may be shared or replayed from another node's file:
		// the agent reports under its own name. Cloned so the source's
		// value is never modified.
		inv = proto.CloneOf(inv)
		inv.NodeName = a.cfg.NodeName
	}
	// One form for device identities from here on (sysfs writes GUIDs
	// "a088:c203:0045:2e10", NVML bus ids "00000000:07:00.0"): the hash,
	// the master and every client see the canonical one.
	inv, _ = inventory.Canonical(inv)
	hash, err := inventory.ContentHash(inv)
	if err != nil {
		err = fmt.Errorf("agent: collect from %s: %w", a.cfg.Source.Name(), err)
		a.recordError(err)
		return err
	}
	snap := &snapshot{inv: inv, hash: hash, at: time.Now()}

	a.mu.Lock()
	a.status.Collections++
	prev := a.latest
	changed := prev == nil || prev.hash != hash
	a.latest = snap
	a.mu.Unlock()

	if changed {
		if prev != nil {
			a.log.Info("inventory changed", slog.String("hash", short(hash)), slog.String("previous_hash", short(prev.hash)))
		} else {
			a.log.Info("inventory collected", slog.String("hash", short(hash)),
				slog.Int("gpus", len(inv.GetGpus())), slog.Int("hcas", len(inv.GetHcas())))
		}
		a.firstOnce.Do(func() { close(a.first) })
		select {
		case a.changed <- struct{}{}:
		default: // a signal is already pending; the reader takes the latest
		}
	}
	return nil
}

// short abbreviates a hex hash for logs.
func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
