package health

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// Check names: the stable names findings carry and Thresholds.Set takes.
const (
	CheckNodeDown        = "node-down"
	CheckNVLinkDown      = "nvlink-down"
	CheckNVLinkErrors    = "nvlink-errors"
	CheckPortDown        = "ib-port-down"
	CheckPortErrors      = "ib-port-errors"
	CheckPCIeWidth       = "pcie-width-downtrained"
	CheckPCIeSpeed       = "pcie-speed-downtrained"
	CheckACS             = "acs-redirect"
	CheckIOMMU           = "iommu-translated"
	CheckGPUDirect       = "gpudirect-rdma-missing"
	CheckXID             = "xid"
	CheckECC             = "ecc-uncorrected"
	CheckRowRemap        = "row-remap"
	CheckThrottle        = "clock-throttle"
	CheckFabric          = "mnnvl-fabric"
	CheckDriverMismatch  = "driver-mismatch"
	CheckVBIOSMismatch   = "vbios-mismatch"
	CheckNICFwMismatch   = "nic-firmware-mismatch"
	CheckNICSlowerOnLeaf = "nic-slower-than-leaf"
)

// Checks lists every check name.
var Checks = []string{
	CheckNodeDown, CheckNVLinkDown, CheckNVLinkErrors, CheckPortDown, CheckPortErrors,
	CheckPCIeWidth, CheckPCIeSpeed, CheckACS, CheckIOMMU, CheckGPUDirect, CheckXID,
	CheckECC, CheckRowRemap, CheckThrottle, CheckFabric, CheckDriverMismatch,
	CheckVBIOSMismatch, CheckNICFwMismatch, CheckNICSlowerOnLeaf,
}

// Thresholds configure the rules. The zero value is the documented
// defaults (docs/HEALTH.md, with the source of each).
type Thresholds struct {
	// Severity overrides a check's severity ("pass" turns it off). A check
	// absent from the map has its default severity.
	Severity map[string]ginv1.Verdict
	// FatalXIDs fail a node; IgnoredXIDs are left out (errors of the
	// application, not of the GPU); any other XID warns. nil: the defaults.
	FatalXIDs, IgnoredXIDs []uint32
	// MinPeers is the smallest group (nodes of one system model, ports on
	// one leaf) in which a cluster rule names the odd one out; 0: 3.
	MinPeers int
}

// Defaults, after NVIDIA's XID catalog (docs.nvidia.com/deploy/xid-errors):
// 48 double-bit ECC, 62 internal micro-controller halt, 64 row-remapping
// failure, 74 NVLink error, 79 GPU fallen off the bus, 95 uncontained ECC,
// 119/120 GSP timeout/error, 140 unrecovered ECC need a GPU reset or
// service; 13 graphics engine exception, 31 memory page fault, 43 GPU
// stopped processing and 45 preemptive cleanup are raised by applications.
var (
	defaultFatalXIDs   = []uint32{48, 62, 64, 74, 79, 95, 119, 120, 140}
	defaultIgnoredXIDs = []uint32{13, 31, 43, 45}
	defaultMinPeers    = 3
)

// defaultSeverity is each check's severity unless overridden. A check
// whose finding can carry a finer severity (xid, row-remap, mnnvl-fabric,
// port and link errors) uses this as its ceiling.
var defaultSeverity = map[string]ginv1.Verdict{
	CheckNodeDown:        ginv1.Verdict_VERDICT_FAIL,
	CheckNVLinkDown:      ginv1.Verdict_VERDICT_FAIL,
	CheckNVLinkErrors:    ginv1.Verdict_VERDICT_FAIL,
	CheckPortDown:        ginv1.Verdict_VERDICT_FAIL,
	CheckPortErrors:      ginv1.Verdict_VERDICT_FAIL,
	CheckPCIeWidth:       ginv1.Verdict_VERDICT_FAIL,
	CheckPCIeSpeed:       ginv1.Verdict_VERDICT_WARN,
	CheckACS:             ginv1.Verdict_VERDICT_WARN,
	CheckIOMMU:           ginv1.Verdict_VERDICT_WARN,
	CheckGPUDirect:       ginv1.Verdict_VERDICT_WARN,
	CheckXID:             ginv1.Verdict_VERDICT_FAIL,
	CheckECC:             ginv1.Verdict_VERDICT_FAIL,
	CheckRowRemap:        ginv1.Verdict_VERDICT_FAIL,
	CheckThrottle:        ginv1.Verdict_VERDICT_WARN,
	CheckFabric:          ginv1.Verdict_VERDICT_FAIL,
	CheckDriverMismatch:  ginv1.Verdict_VERDICT_WARN,
	CheckVBIOSMismatch:   ginv1.Verdict_VERDICT_WARN,
	CheckNICFwMismatch:   ginv1.Verdict_VERDICT_WARN,
	CheckNICSlowerOnLeaf: ginv1.Verdict_VERDICT_WARN,
}

func (t Thresholds) withDefaults() Thresholds {
	if t.FatalXIDs == nil {
		t.FatalXIDs = defaultFatalXIDs
	}
	if t.IgnoredXIDs == nil {
		t.IgnoredXIDs = defaultIgnoredXIDs
	}
	if t.MinPeers <= 0 {
		t.MinPeers = defaultMinPeers
	}
	return t
}

// severity is a finding's severity: want is what the rule found (at most
// the check's default severity); an override replaces the default, so a
// finding at the default takes the override and a milder one keeps its own
// severity up to the override.
func (t Thresholds) severity(check string, want ginv1.Verdict) ginv1.Verdict {
	def := defaultSeverity[check]
	o, ok := t.Severity[check]
	switch {
	case !ok:
		return min(want, def)
	case want >= def:
		return o
	}
	return min(want, o)
}

// Set applies one NAME=VALUE setting (a flag's value):
//
//	<check>=pass|warn|fail   the check's severity (pass turns it off)
//	xid-fatal=48,79,...      the XIDs that fail a node
//	xid-ignore=13,31,...     the XIDs left out
//	min-peers=N              the smallest group a cluster rule compares
func (t *Thresholds) Set(kv string) error {
	k, val, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return fmt.Errorf("health threshold %q: want NAME=VALUE", kv)
	}
	switch k {
	case "xid-fatal", "xid-ignore":
		var ids []uint32
		for _, f := range strings.Split(val, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			n, err := strconv.ParseUint(f, 10, 16)
			if err != nil {
				return fmt.Errorf("health threshold %s: %q is not an XID", k, f)
			}
			ids = append(ids, uint32(n))
		}
		if ids == nil {
			ids = []uint32{}
		}
		if k == "xid-fatal" {
			t.FatalXIDs = ids
		} else {
			t.IgnoredXIDs = ids
		}
		return nil
	case "min-peers":
		n, err := strconv.Atoi(val)
		if err != nil || n < 2 || n > 1<<20 {
			return fmt.Errorf("health threshold min-peers: %q: want an integer from 2", val)
		}
		t.MinPeers = n
		return nil
	}
	if !slices.Contains(Checks, k) {
		return fmt.Errorf("health threshold %q: unknown check (one of %s, xid-fatal, xid-ignore, min-peers)", k, strings.Join(Checks, ", "))
	}
	var v ginv1.Verdict
	switch val {
	case "pass", "off":
		v = ginv1.Verdict_VERDICT_PASS
	case "warn":
		v = ginv1.Verdict_VERDICT_WARN
	case "fail":
		v = ginv1.Verdict_VERDICT_FAIL
	default:
		return fmt.Errorf("health threshold %s=%q: want pass, warn or fail", k, val)
	}
	if t.Severity == nil {
		t.Severity = map[string]ginv1.Verdict{}
	}
	t.Severity[k] = v
	return nil
}
