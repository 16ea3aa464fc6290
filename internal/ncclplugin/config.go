package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Defaults of the plugin's environment.
const (
	defaultCacheTimeout = 300 * time.Second
	defaultInitTimeout  = 5000 * time.Millisecond
	cacheDirName        = "gin-nccl"
)

// config is the plugin's environment, read at every init.
type config struct {
	jobID, jobIDVar string
	nodes           string // hostlist expression for GetOrCreatePlan
	gpusPerNode     uint32
	masterList      string // raw NCCL_GIN_MASTER_HOST / GIN_MASTER_HOST
	masterVar       string
	cacheTimeout    time.Duration
	failover        bool
	strict          bool
	initTimeout     time.Duration
	cacheDir        string
	planFile        string
}

func configFromEnv() config { return configFrom(os.Getenv) }

func configFrom(getenv func(string) string) config {
	c := config{
		cacheTimeout: defaultCacheTimeout,
		failover:     true,
		initTimeout:  defaultInitTimeout,
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
	if v, err := strconv.ParseFloat(strings.TrimSpace(getenv("NCCL_GIN_CACHE_TIMEOUT")), 64); err == nil && v >= 0 {
		c.cacheTimeout = time.Duration(v * float64(time.Second))
	}
	if strings.TrimSpace(getenv("NCCL_GIN_FAILOVER")) == "0" {
		c.failover = false
	}
	c.strict = strings.TrimSpace(getenv("NCCL_GIN_STRICT")) == "1"
	if v, err := strconv.Atoi(strings.TrimSpace(getenv("NCCL_GIN_INIT_TIMEOUT_MS"))); err == nil && v > 0 {
		c.initTimeout = time.Duration(v) * time.Millisecond
	}
	c.cacheDir = strings.TrimSpace(getenv("NCCL_GIN_CACHE_DIR"))
	if c.cacheDir == "" {
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
			c.cacheDir = filepath.Join("/dev/shm", cacheDirName)
		} else {
			tmp := getenv("TMPDIR")
			if tmp == "" {
				tmp = os.TempDir()
			}
			c.cacheDir = filepath.Join(tmp, cacheDirName)
		}
	}
	c.planFile = strings.TrimSpace(getenv("NCCL_GIN_PLAN_FILE"))
	return c
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
