package agent

import (
	"context"
	"log/slog"
	"time"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// DefaultFabricScanInterval is how often the scanner agent scans the fabric.
const DefaultFabricScanInterval = 10 * time.Minute

// FabricScanner scans the scale-out fabric (ibnetdiscover, LLDP).
type FabricScanner func(ctx context.Context) (*ginv1.FabricTopology, error)

// setScanner records the role the master gave this agent in a response.
func (a *Agent) setScanner(on bool) {
	a.mu.Lock()
	changed := a.status.FabricScanner != on
	a.status.FabricScanner = on
	a.mu.Unlock()
	if changed {
		a.log.Info("fabric scanner role changed", slog.Bool("scanner", on))
		if on {
			select {
			case a.scanNow <- struct{}{}:
			default:
			}
		}
	}
}

func (a *Agent) isScanner() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status.FabricScanner
}

// scanLoop scans while this agent holds the scanner role: at once when it
// gets the role, then every FabricScanInterval. Each result replaces any
// scan not yet sent (the session sends the newest).
func (a *Agent) scanLoop(ctx context.Context) {
	if a.cfg.FabricScanner == nil {
		return
	}
	t := time.NewTicker(a.cfg.FabricScanInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.scanNow:
		case <-t.C:
		}
		if !a.isScanner() {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, a.cfg.FabricScanInterval)
		start := time.Now()
		f, err := a.cfg.FabricScanner(sctx)
		cancel()
		if err != nil {
			a.log.Warn("fabric scan failed", slog.Any("err", err))
			a.mu.Lock()
			a.status.FabricScanErrors++
			a.mu.Unlock()
			continue
		}
		a.log.Info("fabric scanned", slog.Int("switches", len(f.GetSwitches())), slog.Int("links", len(f.GetLinks())),
			slog.Duration("took", time.Since(start)))
		select {
		case <-a.scanOut:
		default:
		}
		a.scanOut <- f
	}
}
