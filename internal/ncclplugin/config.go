package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/plansock"
)

// Defaults and bounds of the plugin's environment.
const (
	defaultCacheTimeout = 300 * time.Second
	maxCacheTimeout     = 7 * 24 * time.Hour
	defaultInitTimeout  = 5000 * time.Millisecond
	maxInitTimeout      = 10 * time.Minute
)

// config is the plugin's environment, read at every init.
type config struct {
	jobID, jobIDVar string
	nodes           string // hostlist expression for GetOrCreatePlan
	gpusPerNode     uint32
	masterList      string // raw NCCL_GIN_MASTER_HOST / GIN_MASTER_HOST
	masterVar       string
	cacheTimeout    time.Duration // how long the process reuses a plan
	failover        bool
	strict          bool
	initTimeout     time.Duration
	planFile        string
	agentSocket     string
	// tls are the certificate files for the masters (fallback path only):
	// NCCL_GIN_TLS_CA/CERT/KEY when any is set, else GIN_TLS_*; none:
	// plaintext. tlsVar names the family, for messages.
	tls    pki.Files
	tlsVar string
	// warnings are settings that were out of range or unparsable and
	// were replaced by their defaults; init logs each as a WARN.
	warnings []string
}

func configFromEnv() config { return configFrom(os.Getenv) }

func configFrom(getenv func(string) string) config {
	c := config{
		cacheTimeout: defaultCacheTimeout,
		failover:     true,
		initTimeout:  defaultInitTimeout,
		agentSocket:  plansock.DefaultPath,
	}
	switch {
	case strings.TrimSpace(getenv("SLURM_JOB_ID")) != "":
		c.jobID, c.jobIDVar = strings.TrimSpace(getenv("SLURM_JOB_ID")), "SLURM_JOB_ID"
	case strings.TrimSpace(getenv("NCCL_GIN_JOB_ID")) != "":
		c.jobID, c.jobIDVar = strings.TrimSpace(getenv("NCCL_GIN_JOB_ID")), "NCCL_GIN_JOB_ID"
	}
	c.nodes = strings.TrimSpace(getenv("SLURM_JOB_NODELIST"))
	if c.nodes == "" {
		c.nodes = strings.TrimSpace(getenv("NCCL_GIN_NODES"))
	}
	for _, v := range []string{"SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE"} {
		if n, ok := gpuCount(getenv(v)); ok {
			c.gpusPerNode = n
			break
		}
	}
	c.masterList, c.masterVar = getenv("NCCL_GIN_MASTER_HOST"), "NCCL_GIN_MASTER_HOST"
	if strings.TrimSpace(c.masterList) == "" {
		c.masterList, c.masterVar = getenv("GIN_MASTER_HOST"), "GIN_MASTER_HOST"
	}
	if v := strings.TrimSpace(getenv("NCCL_GIN_CACHE_TIMEOUT")); v != "" {
		secs, err := strconv.ParseUint(v, 10, 32)
		if d := time.Duration(secs) * time.Second; err != nil || d > maxCacheTimeout {
			c.warn("NCCL_GIN_CACHE_TIMEOUT", v, fmt.Sprintf("whole seconds from 0 to %d", int(maxCacheTimeout.Seconds())), defaultCacheTimeout.String())
		} else {
			c.cacheTimeout = d
		}
	}
	c.failover = c.flag(getenv, "NCCL_GIN_FAILOVER", true)
	c.strict = c.flag(getenv, "NCCL_GIN_STRICT", false)
	if v := strings.TrimSpace(getenv("NCCL_GIN_INIT_TIMEOUT_MS")); v != "" {
		ms, err := strconv.ParseUint(v, 10, 32)
		if d := time.Duration(ms) * time.Millisecond; err != nil || d <= 0 || d > maxInitTimeout {
			c.warn("NCCL_GIN_INIT_TIMEOUT_MS", v, fmt.Sprintf("whole milliseconds from 1 to %d", maxInitTimeout.Milliseconds()), defaultInitTimeout.String())
		} else {
			c.initTimeout = d
		}
	}
	c.tls, c.tlsVar = tlsFilesFrom(getenv)
	c.planFile = strings.TrimSpace(getenv("NCCL_GIN_PLAN_FILE"))
	switch v := strings.TrimSpace(getenv("NCCL_GIN_AGENT_SOCKET")); v {
	case "":
	case "none":
		c.agentSocket = "" // do not ask an agent
	default:
		c.agentSocket = v
	}
	return c
}

// flag reads a 0/1 setting; anything else is a WARN and the default.
func (c *config) flag(getenv func(string) string, k string, def bool) bool {
	switch v := strings.TrimSpace(getenv(k)); v {
	case "":
		return def
	case "1":
		return true
	case "0":
		return false
	default:
		d := "0"
		if def {
			d = "1"
		}
		c.warn(k, v, "0 or 1", d)
		return def
	}
}

func (c *config) warn(k, v, want, def string) {
	c.warnings = append(c.warnings, fmt.Sprintf("GIN: %s=%q is not valid (want %s); using the default %s", k, v, want, def))
}

// gpuCount reads Slurm's GPU counts: "8", "gpu:8", "h100:8", "gpu:h100:8".
// Lists ("2(x3)" or "4,4") take the first count.
func gpuCount(v string) (uint32, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if i := strings.IndexAny(v, ",("); i >= 0 {
		v = v[:i]
	}
	if i := strings.LastIndexByte(v, ':'); i >= 0 {
		v = v[i+1:]
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return 0, false
	}
	return uint32(n), true
}

// tlsFilesFrom reads the plugin's certificate files: the NCCL_GIN_TLS_*
// family when any of it is set (a job may give its ranks a reader
// certificate while GIN_TLS_* name the user's own for ginctl), else
// GIN_TLS_*. The two families are never mixed.
func tlsFilesFrom(getenv func(string) string) (pki.Files, string) {
	get := func(prefix string) pki.Files {
		return pki.Files{CA: strings.TrimSpace(getenv(prefix + "CA")), Cert: strings.TrimSpace(getenv(prefix + "CERT")), Key: strings.TrimSpace(getenv(prefix + "KEY"))}
	}
	if f := get("NCCL_GIN_TLS_"); f.Given() {
		return f, "NCCL_GIN_TLS_*"
	}
	return get("GIN_TLS_"), "GIN_TLS_*"
}
