/*
 * abi.h: the NCCL profiler plugin ABI (ncclProfiler_v5 and _v6, NCCL 2.28+)
 * as GIN uses it, declared from the layouts of NCCL's published headers
 * (src/include/plugin/nccl_profiler.h, profiler/profiler_v5.h, _v6.h), not
 * copied from them. Only the descriptor members GIN reads are declared: a
 * union's members all start at its first byte, so leaving members out moves
 * no offset, and NCCL, not the plugin, allocates the descriptor.
 */
#ifndef GIN_PROFILER_ABI_H
#define GIN_PROFILER_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef int gin_prof_result_t; /* ncclResult_t: 0 is ncclSuccess */
#define GIN_PROF_SUCCESS 0
#define GIN_PROF_INTERNAL_ERROR 3
#define GIN_PROF_INVALID_ARGUMENT 4

/* Event type bits (descriptor .type and the activation mask). */
#define GIN_PROF_GROUP (1 << 0)
#define GIN_PROF_COLL (1 << 1)
#define GIN_PROF_P2P (1 << 2)
#define GIN_PROF_PROXY_OP (1 << 3)
#define GIN_PROF_PROXY_STEP (1 << 4)
#define GIN_PROF_PROXY_CTRL (1 << 5)
#define GIN_PROF_KERNEL_CH (1 << 6)
#define GIN_PROF_NET_PLUGIN (1 << 7)

/* Proxy step states (ncclProfilerEventState_t values). A send step goes
 * GPU wait (data not produced yet) -> peer wait (no credit from the
 * receiver) -> send wait (posted to the network, not completed); a receive
 * step goes receive wait (posted, no data yet) -> flush wait -> GPU wait
 * (data not consumed yet). */
#define GIN_PROF_STEP_SEND_GPU_WAIT 8
#define GIN_PROF_STEP_SEND_WAIT 9
#define GIN_PROF_STEP_RECV_WAIT 10
#define GIN_PROF_STEP_RECV_FLUSH_WAIT 11
#define GIN_PROF_STEP_RECV_GPU_WAIT 12
#define GIN_PROF_STEP_SEND_PEER_WAIT 20

/* ncclDebugLogger_t */
typedef void (*gin_prof_logger_t)(int level, unsigned long flags, const char *file, int line, const char *fmt, ...);

/* ncclProfilerEventDescr_v5_t / _v6_t: same header, same offsets for the
 * members below (v6 adds CE members to the union). */
typedef struct {
  uint64_t type;
  void *parentObj;
  int rank;
  union {
    struct {
      uint64_t seqNumber;
      const char *func;
      void const *sendBuff;
      void *recvBuff;
      size_t count;
      int root;
      const char *datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char *algo;
      const char *proto;
      void *parentGroup;
    } coll;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void *data;
    } netPlugin;
  };
} gin_prof_descr_t;

/* ncclProfilerEventStateArgs_v5_t (v6 is the same type). */
typedef union {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void *data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;
} gin_prof_state_args_t;

/* ncclProfiler_v5_t and ncclProfiler_v6_t have one layout. */
typedef struct {
  const char *name;
  gin_prof_result_t (*init)(void **context, uint64_t commId, int *eActivationMask, const char *commName, int nNodes,
                            int nranks, int rank, gin_prof_logger_t logfn);
  gin_prof_result_t (*startEvent)(void *context, void **eHandle, gin_prof_descr_t *eDescr);
  gin_prof_result_t (*stopEvent)(void *eHandle);
  gin_prof_result_t (*recordEventState)(void *eHandle, int eState, gin_prof_state_args_t *eStateArgs);
  gin_prof_result_t (*finalize)(void *context);
} gin_profiler_t;

#endif
