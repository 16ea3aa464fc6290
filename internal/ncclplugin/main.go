package main

/*
#include <stdlib.h>
#include "shim/tuner.h"
*/
import "C"

import (
	"context"
	"fmt"
	"time"
	"unsafe"
)

func main() {}

// logger wraps NCCL's logger function pointer.
type logger struct{ fn C.gin_logger_t }

func (l logger) log(level C.int, msg string) {
	if l.fn == nil {
		return
	}
	cs := C.CString(msg)
	defer C.free(unsafe.Pointer(cs))
	C.gin_log(l.fn, level, C.GIN_FLAG_TUNING|C.GIN_FLAG_INIT, cs)
}

func (l logger) Infof(format string, args ...any) {
	l.log(C.GIN_LOG_INFO, fmt.Sprintf(format, args...))
}
func (l logger) Warnf(format string, args ...any) {
	l.log(C.GIN_LOG_WARN, fmt.Sprintf(format, args...))
}

// ginGoLoad is called by the C init (never by getCollInfo) to obtain the
// job's plan as a C decision table. It returns GIN_LOAD_OK with *out set to a
// malloc'ed gin_table (freed by the C finalize), GIN_LOAD_STAND_ASIDE (NCCL
// tunes alone; the reason is logged), or GIN_LOAD_FAIL in strict mode.
//
//export ginGoLoad
func ginGoLoad(logFn unsafe.Pointer, nRanks, nNodes, commID uint64, out *unsafe.Pointer) C.int {
	l := logger{fn: C.gin_logger_t(logFn)}
	*out = nil
	cfg := configFromEnv()
	for _, w := range cfg.warnings {
		l.Warnf("%s", w)
	}
	start := time.Now()
	res, cells, err := loadWithin(cfg, l)
	if err != nil {
		if cfg.strict {
			l.Warnf("GIN: strict mode (NCCL_GIN_STRICT=1), failing communicator init: %v", err)
			return C.GIN_LOAD_FAIL
		}
		l.Warnf("GIN: standing aside, NCCL tunes alone: %v", err)
		return C.GIN_LOAD_STAND_ASIDE
	}
	if res.server != "" {
		l.Infof("GIN: Connected to topology service at %s", res.server)
	}
	t := (*C.gin_table)(C.calloc(1, C.size_t(unsafe.Sizeof(C.gin_table{}))))
	if t == nil {
		l.Warnf("GIN: standing aside, NCCL tunes alone: out of memory for the decision table")
		return C.GIN_LOAD_STAND_ASIDE
	}
	fill(t, cells)
	cur := -1
	for i, s := range cells.Shapes {
		if uint64(s.NRanks) == nRanks && uint64(s.NNodes) == nNodes {
			cur = i
			t.cur = &t.shape[i]
		}
	}
	l.Infof("GIN: plan %s for job %s (%d rules, %d shapes) from %s in %s", res.plan.GetContentHash(), res.plan.GetJobId(),
		len(res.plan.GetRules()), len(cells.Shapes), res.source, time.Since(start).Round(time.Microsecond))
	if cells.Dropped > 0 {
		l.Warnf("GIN: plan has %d communicator shapes; only the first %d are used", len(cells.Shapes)+cells.Dropped, C.GIN_MAX_SHAPES)
	}
	if cur < 0 {
		l.Infof("GIN: plan has no rules for nRanks=%d nNodes=%d (commId 0x%x); NCCL tunes this communicator", nRanks, nNodes, commID)
		C.free(unsafe.Pointer(t))
		return C.GIN_LOAD_STAND_ASIDE
	}
	*out = unsafe.Pointer(t)
	return C.GIN_LOAD_OK
}

// loadWithin finds, verifies and compiles the job's plan, all of it within
// cfg.initTimeout: when the deadline passes first, init goes on without it
// (the work left behind finishes or fails on its own and is dropped).
func loadWithin(cfg config, l logger) (*loaded, *compiled, error) {
	// The fetch gets a little less than the whole deadline, so that what
	// it waited for is the error reported, and compile its share of the
	// rest; the hard cut is the deadline itself.
	hard := time.NewTimer(cfg.initTimeout)
	defer hard.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.initTimeout-min(cfg.initTimeout/10, 200*time.Millisecond))
	defer cancel()
	type result struct {
		res   *loaded
		cells *compiled
		err   error
	}
	done := make(chan result, 1)
	go func() {
		res, err := loadPlan(ctx, cfg, l)
		if err != nil {
			done <- result{err: err}
			return
		}
		done <- result{res: res, cells: compile(res.plan)}
	}()
	select {
	case r := <-done:
		return r.res, r.cells, r.err
	case <-hard.C:
		return nil, nil, fmt.Errorf("init did not finish within its deadline of %s (NCCL_GIN_INIT_TIMEOUT_MS)", cfg.initTimeout)
	}
}

// fill copies the compiled cells into the C table.
func fill(t *C.gin_table, c *compiled) {
	t.nShapes = C.int(len(c.Shapes))
	for i, s := range c.Shapes {
		cs := &t.shape[i]
		cs.nRanks, cs.nNodes = C.uint32_t(s.NRanks), C.uint32_t(s.NNodes)
		for coll := range numColls {
			for b := range numBuckets {
				d := s.Cells[coll][b]
				cc := &cs.cell[coll][b]
				cc.n = C.uint8_t(d.N)
				for i, ch := range d.Choices[:d.N] {
					cc.c[i] = C.gin_choice{algo: C.int8_t(ch.Algo), proto: C.int8_t(ch.Proto), flags: C.uint8_t(ch.Flags),
						channels: C.int16_t(ch.Channels)}
					cs.ver[coll][b][i] = C.gin_versions{minVersion: C.uint32_t(ch.MinVersion), maxVersion: C.uint32_t(ch.MaxVersion)}
				}
			}
		}
	}
}
