/*
 * shim.c: libnccl-tuner-gin.so, the library NCCL dlopens. It is C only: it
 * exports the tuner structs (v6..v2), init/finalize and the pure C
 * getCollInfo hot path, and starts nothing (no thread, no runtime) while
 * GIN is off. Only an init with NCCL_GIN_ENABLED=1, in the process that
 * loaded it, dlopens the Go plan loader (libnccl-tuner-gin-go.so, the same
 * directory) and calls its ginGoLoad; Go is never entered from getCollInfo
 * or finalize, nor in a child that forked without exec.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tuner.h"

/* The pid that loaded the library; init in any other pid is a forked child. */
static pid_t gin_load_pid;

__attribute__((constructor)) static void gin_record_pid(void) { gin_load_pid = getpid(); }

__attribute__((visibility("hidden"))) void gin_log(gin_logger_t fn, int level, unsigned long flags, const char *msg) {
  if (fn == NULL || msg == NULL) return;
  fn(level, flags, "ncclplugin", 0, "%s", msg);
}

static int gin_env_is(const char *name, const char *want) {
  const char *v = getenv(name);
  return v != NULL && strcmp(v, want) == 0;
}

/* gin_go_loader dlopens the Go plan loader next to this library, once per
 * process, and returns its ginGoLoad; NULL (after a WARN naming the cause)
 * when it cannot be loaded. It is never unloaded (a Go runtime cannot be). */
static gin_go_load_t gin_go_loader(gin_logger_t logFn) {
  static gin_go_load_t cached;
  gin_go_load_t fn = __atomic_load_n(&cached, __ATOMIC_ACQUIRE);
  if (fn != NULL) return fn;
  char path[4096], msg[4352];
  Dl_info info;
  const char *dir_end = NULL;
  if (dladdr((const void *)&gin_go_loader, &info) != 0 && info.dli_fname != NULL) dir_end = strrchr(info.dli_fname, '/');
  if (dir_end != NULL)
    snprintf(path, sizeof path, "%.*s/%s", (int)(dir_end - info.dli_fname), info.dli_fname, GIN_GO_LIBRARY);
  else
    snprintf(path, sizeof path, "%s", GIN_GO_LIBRARY);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (h != NULL) fn = (gin_go_load_t)dlsym(h, "ginGoLoad");
  if (fn == NULL) {
    const char *why = dlerror();
    snprintf(msg, sizeof msg, "GIN: %s: cannot load the plan loader %s: %s",
             gin_env_is("NCCL_GIN_STRICT", "1") ? "strict mode (NCCL_GIN_STRICT=1), failing communicator init"
                                                : "standing aside, NCCL tunes alone",
             path, why ? why : "no ginGoLoad");
    gin_log(logFn, GIN_LOG_WARN, GIN_FLAG_INIT | GIN_FLAG_TUNING, msg);
    return NULL;
  }
  __atomic_store_n(&cached, fn, __ATOMIC_RELEASE);
  return fn;
}

/* gin_init is the body of every version's init. */
static int gin_init(size_t nRanks, size_t nNodes, uint64_t commId, gin_logger_t logFn, void **context) {
  if (context == NULL) return ginNcclSuccess;
  *context = NULL;
  if (!gin_env_is("NCCL_GIN_ENABLED", "1")) return ginNcclSuccess; /* stand aside silently */

  pid_t pid = getpid();
  if (pid != gin_load_pid) {
    char msg[256];
    int strict = gin_env_is("NCCL_GIN_STRICT", "1");
    snprintf(msg, sizeof msg,
             "GIN: %s: init in a forked child (pid %d, library loaded by pid %d); "
             "the Go runtime cannot run after fork without exec",
             strict ? "strict mode (NCCL_GIN_STRICT=1), failing communicator init" : "standing aside, NCCL tunes alone",
             (int)pid, (int)gin_load_pid);
    gin_log(logFn, GIN_LOG_WARN, GIN_FLAG_INIT | GIN_FLAG_TUNING, msg);
    return strict ? ginNcclSystemError : ginNcclSuccess;
  }

  gin_go_load_t load = gin_go_loader(logFn);
  if (load == NULL) return gin_env_is("NCCL_GIN_STRICT", "1") ? ginNcclSystemError : ginNcclSuccess;
  gin_table *t = NULL;
  int rc = load((void *)logFn, (uint64_t)nRanks, (uint64_t)nNodes, commId, (void **)&t);
  if (rc == GIN_LOAD_OK && t != NULL) {
    *context = t;
    return ginNcclSuccess;
  }
  free(t);
  return rc == GIN_LOAD_FAIL ? ginNcclSystemError : ginNcclSuccess;
}

/* gin_cell_for returns the communicator's cell, or NULL to leave NCCL alone. */
static inline const gin_cell *gin_cell_for(void *context, int collType, size_t nBytes) {
  const gin_table *t = (const gin_table *)context;
  if (t == NULL || t->cur == NULL || collType < 0 || collType >= GIN_NUM_COLLS) return NULL;
  int b = nBytes <= 1 ? 0 : 63 - __builtin_clzll((unsigned long long)nBytes);
  return &t->cur->cell[collType][b];
}

/* gin_apply forces the planned cell of a float[numAlgo][numProto] cost
 * table by writing 0.0 into it, unless it is out of bounds or IGNORE. */
static inline void gin_apply(void *context, int collType, size_t nBytes, float **collCostTable, int numAlgo,
                             int numProto, int *nChannels) {
  const gin_cell *c = gin_cell_for(context, collType, nBytes);
  if (c == NULL) return;
  if (c->algo < 0) { /* leave the algorithm to NCCL; maybe the channels */
    if (c->channels > 0 && nChannels != NULL) *nChannels = c->channels;
    return;
  }
  if (collCostTable == NULL || c->algo >= numAlgo || c->proto < 0 || c->proto >= numProto) return;
  float *cell = (float *)collCostTable + (size_t)c->algo * (size_t)numProto + (size_t)c->proto;
  if (*cell == GIN_COST_IGNORE) return; /* unsupported or disabled here: NCCL decides */
  *cell = 0.0f;
  if (c->channels > 0 && nChannels != NULL) *nChannels = c->channels;
}

/* ---- v2 ---- */
static int gin_init_v2(size_t nRanks, size_t nNodes, gin_logger_t logFn, void **context) {
  return gin_init(nRanks, nNodes, 0, logFn, context);
}

static int gin_get_coll_info_v2(void *context, gin_nccl_func_t collType, size_t nBytes, int collNetSupport,
                                int nvlsSupport, int numPipeOps, int *algorithm, int *protocol, int *nChannels) {
  (void)numPipeOps;
  const gin_cell *c = gin_cell_for(context, collType, nBytes);
  if (c == NULL) return ginNcclSuccess;
  if (c->algo < 0) {
    if (c->channels > 0 && nChannels != NULL) *nChannels = c->channels;
    return ginNcclSuccess;
  }
  if (algorithm == NULL || protocol == NULL) return ginNcclSuccess;
  if (c->algo >= GIN_V2_NUM_ALGOS || c->proto < 0 || c->proto >= GIN_V2_NUM_PROTOS) return ginNcclSuccess;
  if ((c->algo == GIN_ALGO_COLLNET_DIRECT || c->algo == GIN_ALGO_COLLNET_CHAIN) && !collNetSupport) return ginNcclSuccess;
  if ((c->algo == GIN_ALGO_NVLS || c->algo == GIN_ALGO_NVLS_TREE) && !nvlsSupport) return ginNcclSuccess;
  /* v2 gets no cost table to say which algorithms apply to a collective, so
   * keep to NCCL's applicability: Broadcast/Reduce run Ring only,
   * AllGather/ReduceScatter Ring, NVLS and CollNetDirect, AllReduce all. */
  if (collType != 4 && c->algo != GIN_ALGO_RING &&
      !((collType == 2 || collType == 3) && (c->algo == GIN_ALGO_NVLS || c->algo == GIN_ALGO_COLLNET_DIRECT)))
    return ginNcclSuccess;
  *algorithm = c->algo;
  *protocol = c->proto;
  if (c->channels > 0 && nChannels != NULL) *nChannels = c->channels;
  return ginNcclSuccess;
}

static int gin_finalize(void *context) {
  free(context);
  return ginNcclSuccess;
}

/* ---- v3 ---- */
static int gin_get_coll_info_v3(void *context, gin_nccl_func_t collType, size_t nBytes, int numPipeOps,
                                float **collCostTable, int numAlgo, int numProto, int *nChannels) {
  (void)numPipeOps;
  gin_apply(context, collType, nBytes, collCostTable, numAlgo, numProto, nChannels);
  return ginNcclSuccess;
}

/* ---- v4, v5, v6 (regBuff is never read: it can differ between ranks) ---- */
static int gin_get_coll_info_v4(void *context, gin_nccl_func_t collType, size_t nBytes, int numPipeOps,
                                float **collCostTable, int numAlgo, int numProto, int regBuff, int *nChannels) {
  (void)numPipeOps;
  (void)regBuff;
  gin_apply(context, collType, nBytes, collCostTable, numAlgo, numProto, nChannels);
  return ginNcclSuccess;
}

static int gin_init_v5(void **context, uint64_t commId, size_t nRanks, size_t nNodes, gin_logger_t logFn,
                       gin_nvl_domain_info_t *nvlDomainInfo, gin_tuner_constants_t *constants) {
  (void)nvlDomainInfo;
  (void)constants; /* NCCL's model constants are left as NCCL set them */
  return gin_init(nRanks, nNodes, commId, logFn, context);
}

__attribute__((visibility("default"))) const gin_tuner_v6_t ncclTunerPlugin_v6 = {
    "GIN", gin_init_v5, gin_get_coll_info_v4, gin_finalize, NULL};
__attribute__((visibility("default"))) const gin_tuner_v5_t ncclTunerPlugin_v5 = {
    "GIN", gin_init_v5, gin_get_coll_info_v4, gin_finalize};
__attribute__((visibility("default"))) const gin_tuner_v4_t ncclTunerPlugin_v4 = {
    "GIN", gin_init_v2, gin_get_coll_info_v4, gin_finalize};
__attribute__((visibility("default"))) const gin_tuner_v3_t ncclTunerPlugin_v3 = {
    "GIN", gin_init_v2, gin_get_coll_info_v3, gin_finalize};
__attribute__((visibility("default"))) const gin_tuner_v2_t ncclTunerPlugin_v2 = {
    "GIN", gin_init_v2, gin_get_coll_info_v2, gin_finalize};
