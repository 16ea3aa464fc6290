package nodelabels

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Prefix is the prefix of every label key GIN owns.
const Prefix = "gin.topology/"

// The label keys GIN writes. Values are the names the Slurm exports give
// (leaf01, spine01, block01 or the switch's own name), made valid label
// values (Value).
const (
	// KeyLeaf is the node's leaf switch (group), SlurmTree's level 1.
	KeyLeaf = Prefix + "leaf"
	// KeySpine is the switch above the leaf, when the fabric has one.
	KeySpine = Prefix + "spine"
	// KeyCore is the switch above the spine, in a three-tier fabric.
	KeyCore = Prefix + "core"
	// KeyBlock is the node's SlurmBlock block (one per MNNVL NVLink domain).
	KeyBlock = Prefix + "block"
	// KeyNVLinkDomain is the MNNVL domain, "<cluster uuid>.<clique id>".
	KeyNVLinkDomain = Prefix + "nvlink-domain"
	// KeyHealth is the node's health verdict: pass, warn or fail.
	KeyHealth = Prefix + "health"
)

// Topograph's keys (NVIDIA topograph), written with Options.Topograph so
// that schedulers set up for topograph read GIN's topology unchanged.
const (
	TopographTier0  = "fabric.topograph.run/tier-0"      // the leaf
	TopographTier1  = "fabric.topograph.run/tier-1"      // the spine
	TopographTier2  = "fabric.topograph.run/tier-2"      // the core
	TopographDomain = "accelerator.topograph.run/domain" // the NVLink domain
)

// Taint is what a failing node gets with Options.TaintFail: key KeyHealth,
// value "fail", effect NoSchedule.
const (
	TaintKey    = KeyHealth
	TaintValue  = string(Fail)
	TaintEffect = "NoSchedule"
)

// FieldManager is the server-side apply field manager of GIN's labels.
const FieldManager = "gin-master"

// Verdict is a node's health verdict.
type Verdict string

// The verdicts, as ginctl check prints them.
const (
	Pass Verdict = "pass"
	Warn Verdict = "warn"
	Fail Verdict = "fail"
)

// Owned returns the keys of labels GIN owns with these options.
func Owned(labels map[string]string, topograph bool) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if strings.HasPrefix(k, Prefix) || topograph && isTopographKey(k) {
			out[k] = v
		}
	}
	return out
}

func isTopographKey(k string) bool {
	switch k {
	case TopographTier0, TopographTier1, TopographTier2, TopographDomain:
		return true
	}
	return false
}

// maxValue is the longest label value Kubernetes accepts.
const maxValue = 63

// Value makes s a valid label value: characters outside [A-Za-z0-9._-]
// become '-', the ends are alphanumeric, and a value longer than 63
// characters keeps its first 54 and a hash of the whole ("" stays "").
func Value(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	v := strings.Trim(string(b), "-._")
	if len(v) > maxValue {
		sum := sha256.Sum256([]byte(s))
		v = strings.TrimRight(v[:min(len(v), maxValue-9)], "-._") + "-" + hex.EncodeToString(sum[:4])
	}
	return v
}
