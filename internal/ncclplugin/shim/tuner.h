/*
 * tuner.h: the NCCL tuner plugin ABI (v2..v6) as GIN uses it, written from
 * the layouts in reference/nccl-plugin.md §1 (not copied from NCCL), and the
 * decision table shared by the C hot path and the Go loader.
 */
#ifndef GIN_TUNER_H
#define GIN_TUNER_H

#include <stddef.h>
#include <stdint.h>

/* ncclResult_t: 0..8 (ncclTimeout is new in 2.30). */
typedef enum {
  ginNcclSuccess = 0,
  ginNcclUnhandledCudaError = 1,
  ginNcclSystemError = 2,
  ginNcclInternalError = 3,
  ginNcclInvalidArgument = 4,
  ginNcclInvalidUsage = 5,
  ginNcclRemoteError = 6
} gin_nccl_result_t;

/* ncclFunc_t: the tuner is only consulted for 0..4. */
typedef int gin_nccl_func_t;
#define GIN_NUM_COLLS 5

/* NCCL_ALGO_* / NCCL_PROTO_* indices. */
#define GIN_ALGO_TREE 0
#define GIN_ALGO_RING 1
#define GIN_ALGO_COLLNET_DIRECT 2
#define GIN_ALGO_COLLNET_CHAIN 3
#define GIN_ALGO_NVLS 4
#define GIN_ALGO_NVLS_TREE 5
#define GIN_ALGO_PAT 6
#define GIN_MAX_ALGOS 7
#define GIN_PROTO_LL 0
#define GIN_PROTO_LL128 1
#define GIN_PROTO_SIMPLE 2
#define GIN_MAX_PROTOS 3
/* NCCL 2.21 (tuner v2) had 6 algorithms and 3 protocols. */
#define GIN_V2_NUM_ALGOS 6
#define GIN_V2_NUM_PROTOS 3
/* NCCL_ALGO_PROTO_IGNORE */
#define GIN_COST_IGNORE (-1.0f)

/* ncclDebugLogLevel and the subsystem flags GIN logs under. */
#define GIN_LOG_WARN 2
#define GIN_LOG_INFO 3
#define GIN_FLAG_INIT 0x1UL
#define GIN_FLAG_TUNING 0x40UL

/* ncclDebugLogger_t: variadic, so Go reaches it through gin_log only. */
typedef void (*gin_logger_t)(int level, unsigned long flags, const char *file, int line, const char *fmt, ...);

/* v5/v6 auxiliary structs (ncclNvlDomainInfo_v5_t, ncclTunerConstants_v5_t). */
typedef struct {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
} gin_nvl_domain_info_t;

typedef struct {
  double baseLatencies[7][3];
  double hwLatencies[3][7][3];
  double llMaxBws[4][3];
  double perChMaxRingLL128Bws[4][3];
  double perChMaxTreeLL128Bws[4][3];
  double perChMaxTreeBws[4][3];
  double perChMaxNVLSTreeBws[4][3];
} gin_tuner_constants_t; /* 1152 bytes */

/* ncclTuner_v2_t (NCCL 2.21). */
typedef struct {
  const char *name;
  int (*init)(size_t nRanks, size_t nNodes, gin_logger_t logFunction, void **context);
  int (*getCollInfo)(void *context, gin_nccl_func_t collType, size_t nBytes, int collNetSupport, int nvlsSupport,
                     int numPipeOps, int *algorithm, int *protocol, int *nChannels);
  int (*destroy)(void *context);
} gin_tuner_v2_t;

/* ncclTuner_v3_t (2.22-2.23). collCostTable is really float[numAlgo][numProto]. */
typedef struct {
  const char *name;
  int (*init)(size_t nRanks, size_t nNodes, gin_logger_t logFunction, void **context);
  int (*getCollInfo)(void *context, gin_nccl_func_t collType, size_t nBytes, int numPipeOps, float **collCostTable,
                     int numAlgo, int numProto, int *nChannels);
  int (*destroy)(void *context);
} gin_tuner_v3_t;

/* ncclTuner_v4_t (2.24-2.27): v3 plus regBuff. */
typedef struct {
  const char *name;
  int (*init)(size_t nRanks, size_t nNodes, gin_logger_t logFunction, void **context);
  int (*getCollInfo)(void *context, gin_nccl_func_t collType, size_t nBytes, int numPipeOps, float **collCostTable,
                     int numAlgo, int numProto, int regBuff, int *nChannels);
  int (*destroy)(void *context);
} gin_tuner_v4_t;

/* ncclTuner_v5_t (2.28-2.29): context first in init; destroy -> finalize. */
typedef struct {
  const char *name;
  int (*init)(void **context, uint64_t commId, size_t nRanks, size_t nNodes, gin_logger_t logFunction,
              gin_nvl_domain_info_t *nvlDomainInfo, gin_tuner_constants_t *constants);
  int (*getCollInfo)(void *context, gin_nccl_func_t collType, size_t nBytes, int numPipeOps, float **collCostTable,
                     int numAlgo, int numProto, int regBuff, int *nChannels);
  int (*finalize)(void *context);
} gin_tuner_v5_t;

/* ncclTuner_v6_t (2.30+): v5 plus the optional getChunkSize. */
typedef struct {
  const char *name;
  int (*init)(void **context, uint64_t commId, size_t nRanks, size_t nNodes, gin_logger_t logFunction,
              gin_nvl_domain_info_t *nvlDomainInfo, gin_tuner_constants_t *constants);
  int (*getCollInfo)(void *context, gin_nccl_func_t collType, size_t nBytes, int numPipeOps, float **collCostTable,
                     int numAlgo, int numProto, int regBuff, int *nChannels);
  int (*finalize)(void *context);
  int (*getChunkSize)(void *context, gin_nccl_func_t collType, size_t nBytes, int algo, int proto, int nChannels,
                      size_t *chunkSize);
} gin_tuner_v6_t;

/* The decision table. A cell is a bucket's ordered choices; the hot path
 * takes the first one NCCL's cost table marks usable (not IGNORE), else
 * leaves NCCL's choice. A choice with algo -1 is NCCL's choice,
 * unconditionally; with GIN_CHOICE_IF_OFFERED it is NCCL's choice when NCCL
 * offers algo (proto -1: any of its protocols); otherwise it forces
 * (algo, proto). channels 0 keeps NCCL's channel count. Buckets are
 * floor(log2(nBytes)), 0 for nBytes <= 1. minVersion/maxVersion
 * (NCCL_VERSION_CODE) bound the release series a measured choice covers
 * (0: it stands on no measurement); init applies the version rule once and
 * marks what it excludes GIN_CHOICE_SKIP, so getCollInfo never reads them. */
#define GIN_BUCKETS 64
#define GIN_MAX_SHAPES 8
#define GIN_MAX_CHOICES 4
#define GIN_CHOICE_IF_OFFERED 0x01
#define GIN_CHOICE_SKIP 0x80 /* set at init only */
/* gin_comm.resolved: 0 never called, 1+i choice i, GIN_RESOLVED_NCCL none usable. */
#define GIN_RESOLVED_NCCL 0xFF

/* What getCollInfo reads: 6 bytes a choice, 26 a cell, so that a cell's
 * choices share a cache line; the versions are read at init only. */
typedef struct {
  int8_t algo;
  int8_t proto;
  uint8_t flags;
  int16_t channels;
} gin_choice;

typedef struct {
  uint8_t n;
  gin_choice c[GIN_MAX_CHOICES];
} gin_cell;

typedef struct {
  uint32_t minVersion;
  uint32_t maxVersion;
} gin_versions;

typedef struct {
  uint32_t nRanks;
  uint32_t nNodes;
  gin_cell cell[GIN_NUM_COLLS][GIN_BUCKETS];
  gin_versions ver[GIN_NUM_COLLS][GIN_BUCKETS][GIN_MAX_CHOICES];
} gin_shape;

/* A decoded plan (the agent's table or the Go loader's). cur points into
 * shape[] at the communicator's shape, or is NULL when the plan has none
 * for it. Init binds it into a gin_comm and frees it. */
typedef struct {
  int nShapes;
  gin_shape shape[GIN_MAX_SHAPES];
  const gin_shape *cur;
} gin_table;

/* One per communicator (the init context): its shape's cells after the
 * version rule, what each bucket last resolved to (written by getCollInfo
 * with a relaxed store when it changes, read by finalize, which logs it
 * once), and what the logs name. */
typedef struct {
  uint32_t nRanks;
  uint32_t nNodes;
  gin_cell cell[GIN_NUM_COLLS][GIN_BUCKETS];
  uint8_t resolved[GIN_NUM_COLLS][GIN_BUCKETS];
  gin_logger_t logFn;
  uint64_t commId;
  uint32_t ncclVersion; /* NCCL_VERSION_CODE from ncclGetVersion; 0 unknown */
} gin_comm;

/* gin_log calls NCCL's variadic logger with "%s"; a NULL logger drops it. */
void gin_log(gin_logger_t fn, int level, unsigned long flags, const char *msg);

/* The Go plan loader: libnccl-tuner-gin-go.so next to the shim exports
 * ginGoLoad, dlopened by the shim only when NCCL_GIN_ENABLED=1. */
#define GIN_GO_LIBRARY "libnccl-tuner-gin-go.so"
typedef int (*gin_go_load_t)(void *logFn, uint64_t nRanks, uint64_t nNodes, uint64_t commId, void **out);

/* Results of the Go loader (ginGoLoad). */
#define GIN_LOAD_OK 0
#define GIN_LOAD_STAND_ASIDE 1
#define GIN_LOAD_FAIL 2

#endif /* GIN_TUNER_H */
