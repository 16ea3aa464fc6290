/*
 * profiler.c: libnccl-profiler-gin.so, GIN's NCCL profiler plugin (ABI v5
 * and v6, abi.h). It keeps per-communicator aggregates, never events, and
 * sends one report frame per communicator per interval (the wire format of
 * internal/rankreport, doc.go) to the node agent's socket.
 *
 * Rules (as for the tuner shim): C only, no Go runtime. Unless
 * NCCL_GIN_ENABLED=1 init stands aside (mask 0, no context) and starts
 * nothing: no thread, no socket, no allocation. Nothing here blocks or
 * fails NCCL: every failure (allocation, thread, socket, a full pool) is
 * a dropped event or frame, never an error code. Event handles come from
 * fixed per-communicator pools under a short per-communicator lock (Coll
 * events come on the user's thread, proxy events on NCCL's proxy thread);
 * one reporter thread per process, started by the first enabled init and
 * joined by the last finalize, swaps the windows out and sends the frames
 * with non-blocking sockets. Exports only ncclProfiler_v6 and _v5.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "abi.h"

/* Bounds of one report (internal/rankreport uses the same ones). */
#define GP_MAX_BODY 65536
#define GP_MAX_JOB 128
#define GP_MAX_COLLS 64
#define GP_MAX_PEERS 256
#define GP_MAX_ARRIVALS 64
#define GP_SAMPLE_EVERY 4
#define GP_HEADER 12

/* Wire sizes of the body's parts. */
#define GP_FIXED_BYTES (8 + 4 * 6 + 2 + GP_MAX_JOB + 8 * 6)
#define GP_COLL_BYTES 24
#define GP_PEER_BYTES 48
#define GP_ARRIVAL_BYTES 16
#define GP_BODY_MAX \
  (GP_FIXED_BYTES + 2 + GP_MAX_COLLS * GP_COLL_BYTES + 2 + GP_MAX_PEERS * GP_PEER_BYTES + 2 + GP_MAX_ARRIVALS * GP_ARRIVAL_BYTES)
_Static_assert(GP_BODY_MAX <= GP_MAX_BODY, "a full report must fit MaxBody");

/* Handle pools per communicator. */
#define GP_POOL_COLL 512
#define GP_POOL_OP 2048
#define GP_POOL_STEP 8192

/* Func ids (ncclFunc_t); kinds index the per-window table 0..5. */
#define GP_FUNC_OTHER 255
#define GP_KINDS 6

#define GP_LOG_WARN 2
#define GP_LOG_INFO 3
#define GP_FLAG_INIT 0x1UL

#define GP_DEFAULT_SOCKET "/run/gin/agent.sock"
#define GP_DEFAULT_INTERVAL_MS 1000
#define GP_MIN_INTERVAL_MS 50
#define GP_MAX_INTERVAL_MS 60000
#define GP_FAIL_LOG_NS (60ULL * 1000000000ULL)

/* Handle tags: the first member of every handle. */
#define GP_TAG_COLL 0x47436f6cu
#define GP_TAG_OP 0x47506f70u
#define GP_TAG_STEP 0x47537470u

typedef struct gp_comm gp_comm;

typedef struct {
  uint32_t tag;
  int16_t prev, next; /* the in-flight list, oldest first (pool indices, -1 none) */
  gp_comm *comm;
  uint64_t seq;
  uint64_t start; /* CLOCK_MONOTONIC ns */
  uint8_t func, log2, live;
} gp_coll;

typedef struct {
  uint32_t tag;
  int32_t peer;
  gp_comm *comm;
  uint8_t send, live;
} gp_op;

/* A step is written only by the thread that drives it (NCCL's proxy
 * thread): start and stop under the comm lock, states without it. */
typedef struct {
  uint32_t tag;
  int32_t peer;
  gp_comm *comm;
  uint8_t send, live;
  int8_t cur;     /* wait index of the current state, -1 none */
  uint64_t enter; /* when the current state began */
  uint64_t wait[3];
  uint64_t bytes;
} gp_step;

typedef struct {
  uint8_t func, log2;
  uint32_t count;
  uint64_t sum, max;
} gp_collagg;

typedef struct {
  uint32_t peer;
  uint8_t send;
  uint32_t steps;
  uint64_t bytes;
  uint64_t wait[3];
} gp_peeragg;

typedef struct {
  uint64_t seq, start;
} gp_arrival;

#define GP_PEER_HASH 512 /* 2 × MaxPeers: a probe always ends */

/* One window's aggregates. */
typedef struct {
  uint32_t ncoll, npeer, narr; /* narr: arrivals added (ring of the newest) */
  uint8_t collidx[GP_KINDS][64]; /* slot + 1, 0 none */
  uint16_t peerhash[GP_PEER_HASH]; /* slot + 1, 0 empty */
  gp_collagg coll[GP_MAX_COLLS];
  gp_peeragg peer[GP_MAX_PEERS];
  gp_arrival arr[GP_MAX_ARRIVALS];
} gp_window;

struct gp_comm {
  gp_comm *next; /* g_comms (g_lock) */
  int mask;
  /* identity, fixed at init */
  uint64_t id;
  uint32_t nranks, nnodes, rank, pid;
  int32_t local, gpu;
  uint16_t joblen;
  char job[GP_MAX_JOB + 1];
  struct sockaddr_un addr;
  socklen_t addrlen;
  gin_prof_logger_t logfn;
  uint64_t interval_ns;
  /* reporter state (g_lock) */
  uint64_t next_due; /* monotonic */
  uint64_t last_rt;  /* the next window's start */
  /* everything below: lock */
  pthread_mutex_t lock;
  uint64_t started, done, dropped;
  int16_t head, tail;
  gp_window *cur;
  uint32_t coll_nfree, coll_nnext, op_nfree, op_nnext, step_nfree, step_nnext;
  uint16_t coll_free[GP_POOL_COLL];
  uint16_t op_free[GP_POOL_OP];
  uint16_t step_free[GP_POOL_STEP];
  gp_window win[2];
  gp_coll colls[GP_POOL_COLL];
  gp_op ops[GP_POOL_OP];
  gp_step steps[GP_POOL_STEP];
};

/* ---- process state (g_lock) ---- */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond;
static pthread_once_t g_cond_once = PTHREAD_ONCE_INIT;
static gp_comm *g_comms;
static int g_running;      /* a reporter thread runs for g_gen */
static unsigned g_gen;     /* bumped to stop the reporter */
static pid_t g_thread_pid; /* the process the reporter runs in */
static pthread_t g_thread;
static int64_t g_rt_off; /* CLOCK_REALTIME − CLOCK_MONOTONIC, captured once */
static int g_have_off, g_said_hello;
static uint64_t g_frames_dropped, g_last_fail_log;
static int g_failed_once;
static unsigned char g_frame[GP_HEADER + GP_BODY_MAX];

static inline uint64_t gp_mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static inline uint64_t gp_rt(uint64_t mono) { return (uint64_t)((int64_t)mono + g_rt_off); }

static void gp_log(gin_prof_logger_t fn, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void gp_log(gin_prof_logger_t fn, int level, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  if (fn == NULL) return;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fn(level, GP_FLAG_INIT, "gin-profiler", 0, "%s", msg);
}

/* ---- environment ---- */

static int gp_env_is(const char *name, const char *want) {
  const char *v = getenv(name);
  return v != NULL && strcmp(v, want) == 0;
}

/* gp_parse_nonneg reads a whole non-negative decimal (≤ INT32_MAX); -1 otherwise. */
static int32_t gp_parse_nonneg(const char *s, size_t n) {
  int64_t v = 0;
  if (s == NULL || n == 0 || n > 10) return -1;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v > INT32_MAX ? -1 : (int32_t)v;
}

static int32_t gp_local_rank(void) {
  static const char *const names[] = {"SLURM_LOCALID", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"};
  for (int i = 0; i < 3; i++) {
    const char *v = getenv(names[i]);
    if (v == NULL) continue;
    int32_t r = gp_parse_nonneg(v, strlen(v));
    if (r >= 0) return r;
  }
  return -1;
}

/* gp_gpu is the GPU index: CUDA_VISIBLE_DEVICES when it is a comma list of
 * non-negative integers (one: that one; several: [local % n] when the
 * local rank is known), the local rank when it is unset, else -1. */
static int32_t gp_gpu(int32_t local) {
  const char *v = getenv("CUDA_VISIBLE_DEVICES");
  if (v == NULL) return local;
  int32_t first = -1, pick = -1;
  int n = 0;
  const char *p = v;
  for (;;) {
    size_t l = strcspn(p, ",");
    int32_t d = gp_parse_nonneg(p, l);
    if (d < 0) return -1;
    if (n == 0) first = d;
    n++;
    if (p[l] == 0) break;
    p += l + 1;
  }
  if (n == 1) return first;
  if (local < 0) return -1;
  int want = local % n, i = 0;
  for (p = v;; i++) {
    size_t l = strcspn(p, ",");
    if (i == want) {
      pick = gp_parse_nonneg(p, l);
      break;
    }
    p += l + 1;
  }
  return pick;
}

/* gp_job copies the job id (NCCL_GIN_JOB_ID, else SLURM_JOB_ID): printable
 * ASCII only, at most MaxJobID bytes. */
static uint16_t gp_job(char *out) {
  const char *v = getenv("NCCL_GIN_JOB_ID");
  if (v == NULL || *v == 0) v = getenv("SLURM_JOB_ID");
  uint16_t n = 0;
  if (v != NULL)
    for (; *v && n < GP_MAX_JOB; v++)
      if ((unsigned char)*v >= 0x20 && (unsigned char)*v < 0x7f) out[n++] = *v;
  out[n] = 0;
  return n;
}

static int gp_interval_ms(gin_prof_logger_t logfn) {
  const char *v = getenv("NCCL_GIN_PROFILER_INTERVAL_MS");
  if (v == NULL || *v == 0) return GP_DEFAULT_INTERVAL_MS;
  size_t l = strlen(v);
  int64_t ms = 0;
  if (l > 12 || strspn(v, "0123456789") != l) {
    gp_log(logfn, GP_LOG_WARN, "GIN profiler: NCCL_GIN_PROFILER_INTERVAL_MS=\"%.32s\" is not whole milliseconds; using %d",
           v, GP_DEFAULT_INTERVAL_MS);
    return GP_DEFAULT_INTERVAL_MS;
  }
  for (size_t i = 0; i < l; i++) ms = ms * 10 + (v[i] - '0');
  if (ms < GP_MIN_INTERVAL_MS) ms = GP_MIN_INTERVAL_MS;
  if (ms > GP_MAX_INTERVAL_MS) ms = GP_MAX_INTERVAL_MS;
  return (int)ms;
}

/* ---- descriptors ---- */

static uint8_t gp_func(const char *f) {
  if (f == NULL) return GP_FUNC_OTHER;
  switch (f[0]) {
  case 'B': return strcmp(f, "Broadcast") == 0 ? 0 : GP_FUNC_OTHER;
  case 'R':
    if (strcmp(f, "Reduce") == 0) return 1;
    return strcmp(f, "ReduceScatter") == 0 ? 3 : GP_FUNC_OTHER;
  case 'A':
    if (strcmp(f, "AllReduce") == 0) return 4;
    return strcmp(f, "AllGather") == 0 ? 2 : GP_FUNC_OTHER;
  default: return GP_FUNC_OTHER;
  }
}

/* gp_dtsize is a datatype's size from the bit width in its name
 * ("ncclFloat32" 4, "ncclFloat8e4m3" 1); 1 when there is none. */
static uint64_t gp_dtsize(const char *d) {
  if (d == NULL) return 1;
  while (*d && (*d < '0' || *d > '9')) d++;
  unsigned bits = 0;
  for (int i = 0; i < 4 && *d >= '0' && *d <= '9'; i++, d++) bits = bits * 10 + (unsigned)(*d - '0');
  return bits >= 8 && bits % 8 == 0 ? bits / 8 : 1;
}

static uint8_t gp_log2(uint64_t n) { return n == 0 ? 0 : (uint8_t)(63 - __builtin_clzll(n)); }

/* gp_wait_index maps a step state to its wait slot (-1: not a wait). */
static int8_t gp_wait_index(int send, int state) {
  if (send) switch (state) {
    case GIN_PROF_STEP_SEND_GPU_WAIT: return 0;
    case GIN_PROF_STEP_SEND_PEER_WAIT: return 1;
    case GIN_PROF_STEP_SEND_WAIT: return 2;
    default: return -1;
    }
  switch (state) {
  case GIN_PROF_STEP_RECV_WAIT: return 0;
  case GIN_PROF_STEP_RECV_FLUSH_WAIT: return 1;
  case GIN_PROF_STEP_RECV_GPU_WAIT: return 2;
  default: return -1;
  }
}

/* ---- pools and windows (comm lock held) ---- */

static int gp_pool_get(uint16_t *freel, uint32_t *nfree, uint32_t *nnext, uint32_t cap) {
  if (*nfree > 0) return freel[--*nfree];
  if (*nnext < cap) return (int)(*nnext)++;
  return -1;
}

static void gp_window_reset(gp_window *w) {
  w->ncoll = w->npeer = w->narr = 0;
  memset(w->collidx, 0, sizeof w->collidx);
  memset(w->peerhash, 0, sizeof w->peerhash);
}

static gp_peeragg *gp_peer_slot(gp_window *w, uint32_t peer, uint8_t send) {
  uint32_t h = ((peer * 2u + send) * 2654435761u) >> 23; /* 9 bits: GP_PEER_HASH */
  for (;;) {
    uint16_t e = w->peerhash[h];
    if (e == 0) {
      if (w->npeer >= GP_MAX_PEERS) return NULL;
      gp_peeragg *a = &w->peer[w->npeer];
      memset(a, 0, sizeof *a);
      a->peer = peer, a->send = send;
      w->peerhash[h] = (uint16_t)++w->npeer;
      return a;
    }
    gp_peeragg *a = &w->peer[e - 1];
    if (a->peer == peer && a->send == send) return a;
    h = (h + 1) & (GP_PEER_HASH - 1);
  }
}

static gp_collagg *gp_coll_slot(gp_window *w, uint8_t func, uint8_t log2) {
  int k = func < 5 ? func : 5;
  uint8_t e = w->collidx[k][log2];
  if (e != 0) return &w->coll[e - 1];
  if (w->ncoll >= GP_MAX_COLLS) return NULL;
  gp_collagg *a = &w->coll[w->ncoll];
  memset(a, 0, sizeof *a);
  a->func = func, a->log2 = log2;
  w->collidx[k][log2] = (uint8_t)++w->ncoll;
  return a;
}

static inline uint32_t gp_sat32(uint32_t v) { return v == UINT32_MAX ? v : v + 1; }

/* ---- the frame ---- */

static unsigned char *gp_put16(unsigned char *p, uint16_t v) {
  p[0] = (unsigned char)(v >> 8), p[1] = (unsigned char)v;
  return p + 2;
}
static unsigned char *gp_put32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16), p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
  return p + 4;
}
static unsigned char *gp_put64(unsigned char *p, uint64_t v) {
  p = gp_put32(p, (uint32_t)(v >> 32));
  return gp_put32(p, (uint32_t)v);
}

/* gp_build swaps c's window out and writes its frame into buf (g_lock
 * held; the comm lock only for the swap); returns the frame's length. */
static size_t gp_build(gp_comm *c, unsigned char *buf) {
  pthread_mutex_lock(&c->lock);
  gp_window *w = c->cur;
  c->cur = w == &c->win[0] ? &c->win[1] : &c->win[0];
  uint64_t started = c->started, done = c->done, dropped = c->dropped;
  uint64_t oldest = c->head >= 0 ? gp_rt(c->colls[c->head].start) : 0;
  uint64_t end = gp_rt(gp_mono());
  pthread_mutex_unlock(&c->lock);
  /* w is the reporter's alone until the next swap. */
  uint64_t start = c->last_rt <= end ? c->last_rt : end;
  c->last_rt = end;

  unsigned char *p = buf + GP_HEADER;
  p = gp_put64(p, c->id);
  p = gp_put32(p, c->nranks);
  p = gp_put32(p, c->nnodes);
  p = gp_put32(p, c->rank);
  p = gp_put32(p, (uint32_t)c->local);
  p = gp_put32(p, (uint32_t)c->gpu);
  p = gp_put32(p, c->pid);
  p = gp_put16(p, c->joblen);
  memcpy(p, c->job, c->joblen);
  p += c->joblen;
  p = gp_put64(p, start);
  p = gp_put64(p, end);
  p = gp_put64(p, started);
  p = gp_put64(p, done);
  p = gp_put64(p, oldest);
  p = gp_put64(p, dropped);
  uint32_t n = w->ncoll < GP_MAX_COLLS ? w->ncoll : GP_MAX_COLLS;
  p = gp_put16(p, (uint16_t)n);
  for (uint32_t i = 0; i < n; i++) {
    const gp_collagg *a = &w->coll[i];
    *p++ = a->func;
    *p++ = a->log2;
    p = gp_put16(p, 0);
    p = gp_put32(p, a->count);
    p = gp_put64(p, a->sum);
    p = gp_put64(p, a->max);
  }
  n = w->npeer < GP_MAX_PEERS ? w->npeer : GP_MAX_PEERS;
  p = gp_put16(p, (uint16_t)n);
  for (uint32_t i = 0; i < n; i++) {
    const gp_peeragg *a = &w->peer[i];
    p = gp_put32(p, a->peer);
    *p++ = a->send;
    *p++ = 0;
    p = gp_put16(p, 0);
    p = gp_put64(p, a->bytes);
    p = gp_put32(p, a->steps);
    p = gp_put32(p, 0);
    for (int k = 0; k < 3; k++) p = gp_put64(p, a->wait[k]);
  }
  n = w->narr < GP_MAX_ARRIVALS ? w->narr : GP_MAX_ARRIVALS;
  uint32_t first = w->narr - n; /* oldest kept */
  p = gp_put16(p, (uint16_t)n);
  for (uint32_t i = 0; i < n; i++) {
    const gp_arrival *a = &w->arr[(first + i) % GP_MAX_ARRIVALS];
    p = gp_put64(p, a->seq);
    p = gp_put64(p, gp_rt(a->start));
  }
  gp_window_reset(w);

  size_t body = (size_t)(p - buf) - GP_HEADER;
  memcpy(buf, "GINP", 4);
  buf[4] = 1, buf[5] = 0;
  gp_put16(buf + 6, 0);
  gp_put32(buf + 8, (uint32_t)body);
  return GP_HEADER + body;
}

/* gp_send sends one frame on a fresh non-blocking connection (g_lock
 * held); any failure drops it, logged first at once, then every 60 s. */
static void gp_send(gp_comm *c, const unsigned char *buf, size_t n) {
  const char *why = NULL;
  int err = 0;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) why = "socket", err = errno;
  else if (connect(fd, (const struct sockaddr *)&c->addr, c->addrlen) != 0) why = "connect", err = errno;
  else {
    ssize_t k = send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0) why = "send", err = errno;
    else if ((size_t)k != n) why = "short write";
  }
  if (fd >= 0) close(fd);
  if (why == NULL) return;
  g_frames_dropped++;
  uint64_t now = gp_mono();
  if (!g_failed_once) {
    g_failed_once = 1;
    g_last_fail_log = now;
    gp_log(c->logfn, GP_LOG_INFO, "GIN profiler: cannot report to %s: %s: %s; dropping reports while the agent does not answer",
           c->addr.sun_path, why, err ? strerror(err) : "partial send");
  } else if (now - g_last_fail_log >= GP_FAIL_LOG_NS) {
    g_last_fail_log = now;
    gp_log(c->logfn, GP_LOG_INFO, "GIN profiler: %llu report frames dropped so far (last: %s: %s: %s)",
           (unsigned long long)g_frames_dropped, c->addr.sun_path, why, err ? strerror(err) : "partial send");
  }
}

static void gp_report(gp_comm *c) {
  size_t n = gp_build(c, g_frame);
  gp_send(c, g_frame, n);
}

/* ---- the reporter thread ---- */

static void gp_cond_init(void) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(&g_cond, &a);
  pthread_condattr_destroy(&a);
}

static void *gp_reporter(void *arg) {
  unsigned gen = (unsigned)(uintptr_t)arg;
  pthread_setname_np(pthread_self(), "gin-profiler");
  pthread_mutex_lock(&g_lock);
  while (g_gen == gen) {
    uint64_t now = gp_mono(), next = now + GP_MAX_INTERVAL_MS * 1000000ULL;
    for (gp_comm *c = g_comms; c != NULL; c = c->next) {
      if (now >= c->next_due) {
        gp_report(c);
        c->next_due += c->interval_ns;
        if (c->next_due <= now) c->next_due = now + c->interval_ns;
      }
      if (c->next_due < next) next = c->next_due;
    }
    struct timespec ts = {(time_t)(next / 1000000000ULL), (long)(next % 1000000000ULL)};
    pthread_cond_timedwait(&g_cond, &g_lock, &ts);
  }
  pthread_mutex_unlock(&g_lock);
  return NULL;
}

/* gp_start_reporter starts the thread (g_lock held), signals blocked in it. */
static int gp_start_reporter(void) {
  pthread_attr_t attr;
  sigset_t all, old;
  if (pthread_attr_init(&attr) != 0) return -1;
  pthread_attr_setstacksize(&attr, 256 * 1024);
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&g_thread, &attr, gp_reporter, (void *)(uintptr_t)g_gen);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  if (rc != 0) return -1;
  g_running = 1;
  g_thread_pid = getpid();
  return 0;
}

/* ---- entry points ---- */

/* gp_aside makes init stand aside. The activation mask NCCL passes is its
 * process-wide one: it is cleared only when no other communicator of this
 * process is reporting (a NULL context alone keeps this one silent). */
static gin_prof_result_t gp_aside(int *mask) {
  pthread_mutex_lock(&g_lock);
  if (g_comms == NULL) *mask = 0;
  pthread_mutex_unlock(&g_lock);
  return GIN_PROF_SUCCESS;
}

static gin_prof_result_t gp_init(void **context, uint64_t commId, int *eActivationMask, const char *commName, int nNodes,
                                 int nranks, int rank, gin_prof_logger_t logfn) {
  (void)commName;
  if (context != NULL) *context = NULL;
  if (!gp_env_is("NCCL_GIN_ENABLED", "1")) {
    if (eActivationMask != NULL) *eActivationMask = 0;
    return GIN_PROF_SUCCESS;
  }
  if (context == NULL || eActivationMask == NULL) return GIN_PROF_SUCCESS;
  if (nranks <= 0 || rank < 0 || rank >= nranks || nNodes <= 0 || nNodes > nranks) {
    gp_log(logfn, GP_LOG_WARN, "GIN profiler: rank %d of %d ranks on %d nodes is not a communicator; standing aside", rank,
           nranks, nNodes);
    return gp_aside(eActivationMask);
  }
  const char *sock = getenv("NCCL_GIN_AGENT_SOCKET");
  if (sock == NULL || *sock == 0) sock = GP_DEFAULT_SOCKET;
  struct sockaddr_un probe;
  if (strlen(sock) >= sizeof probe.sun_path) {
    gp_log(logfn, GP_LOG_WARN, "GIN profiler: NCCL_GIN_AGENT_SOCKET is %zu bytes, over the %zu a socket path may have; standing aside",
           strlen(sock), sizeof probe.sun_path - 1);
    return gp_aside(eActivationMask);
  }
  gp_comm *c = (gp_comm *)calloc(1, sizeof *c);
  if (c == NULL) {
    gp_log(logfn, GP_LOG_WARN, "GIN profiler: out of memory for a communicator; standing aside");
    return gp_aside(eActivationMask);
  }
  if (pthread_mutex_init(&c->lock, NULL) != 0) {
    free(c);
    return gp_aside(eActivationMask);
  }
  c->mask = GIN_PROF_COLL | GIN_PROF_PROXY_OP | GIN_PROF_PROXY_STEP;
  c->id = commId;
  c->nranks = (uint32_t)nranks, c->nnodes = (uint32_t)nNodes, c->rank = (uint32_t)rank;
  c->pid = (uint32_t)getpid();
  c->local = gp_local_rank();
  c->gpu = gp_gpu(c->local);
  c->joblen = gp_job(c->job);
  c->addr.sun_family = AF_UNIX;
  memcpy(c->addr.sun_path, sock, strlen(sock) + 1);
  c->addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(sock) + 1);
  c->logfn = logfn;
  int interval = gp_interval_ms(logfn);
  c->interval_ns = (uint64_t)interval * 1000000ULL;
  c->head = c->tail = -1;
  c->cur = &c->win[0];

  pthread_once(&g_cond_once, gp_cond_init);
  pthread_mutex_lock(&g_lock);
  if (g_running && g_thread_pid != getpid()) {
    /* A child forked after its parent's init: the parent's reporter and
     * communicators are not this process's. */
    g_running = 0;
    g_comms = NULL;
  }
  if (!g_have_off) {
    struct timespec rt;
    uint64_t m = gp_mono();
    clock_gettime(CLOCK_REALTIME, &rt);
    g_rt_off = (int64_t)((uint64_t)rt.tv_sec * 1000000000ULL + (uint64_t)rt.tv_nsec) - (int64_t)m;
    g_have_off = 1;
  }
  uint64_t now = gp_mono();
  c->last_rt = gp_rt(now);
  c->next_due = now + c->interval_ns;
  if (!g_running && gp_start_reporter() != 0) {
    pthread_mutex_unlock(&g_lock);
    gp_log(logfn, GP_LOG_WARN, "GIN profiler: cannot start the reporter thread; standing aside");
    pthread_mutex_destroy(&c->lock);
    free(c);
    return gp_aside(eActivationMask);
  }
  c->next = g_comms;
  g_comms = c;
  int hello = !g_said_hello;
  g_said_hello = 1;
  pthread_cond_broadcast(&g_cond);
  pthread_mutex_unlock(&g_lock);
  if (hello)
    gp_log(logfn, GP_LOG_INFO, "GIN profiler: reporting to %s every %d ms (job %s)", sock, interval,
           c->joblen ? c->job : "unknown");
  *eActivationMask = c->mask;
  *context = c;
  return GIN_PROF_SUCCESS;
}

static gin_prof_result_t gp_start_event(void *context, void **eHandle, gin_prof_descr_t *d) {
  if (eHandle == NULL) return GIN_PROF_SUCCESS;
  *eHandle = NULL;
  gp_comm *c = (gp_comm *)context;
  if (c == NULL || d == NULL || !(d->type & (uint64_t)c->mask)) return GIN_PROF_SUCCESS;
  int idx;
  switch (d->type) {
  case GIN_PROF_COLL: {
    uint8_t func = gp_func(d->coll.func);
    uint64_t bytes;
    if (__builtin_mul_overflow((uint64_t)d->coll.count, gp_dtsize(d->coll.datatype), &bytes)) bytes = UINT64_MAX;
    uint8_t log2 = gp_log2(bytes);
    uint64_t seq = d->coll.seqNumber;
    uint64_t t = gp_mono();
    pthread_mutex_lock(&c->lock);
    idx = gp_pool_get(c->coll_free, &c->coll_nfree, &c->coll_nnext, GP_POOL_COLL);
    if (idx < 0) {
      c->dropped++;
      pthread_mutex_unlock(&c->lock);
      return GIN_PROF_SUCCESS;
    }
    gp_coll *h = &c->colls[idx];
    h->tag = GP_TAG_COLL, h->comm = c, h->seq = seq, h->start = t, h->func = func, h->log2 = log2, h->live = 1;
    /* In-flight list, by start time: almost always appended. */
    int16_t p = c->tail;
    while (p >= 0 && c->colls[p].start > t) p = c->colls[p].prev;
    h->prev = p;
    h->next = p >= 0 ? c->colls[p].next : c->head;
    if (h->next >= 0) c->colls[h->next].prev = (int16_t)idx;
    else c->tail = (int16_t)idx;
    if (p >= 0) c->colls[p].next = (int16_t)idx;
    else c->head = (int16_t)idx;
    c->started++;
    pthread_mutex_unlock(&c->lock);
    *eHandle = h;
    return GIN_PROF_SUCCESS;
  }
  case GIN_PROF_PROXY_OP: {
    int peer = d->proxyOp.peer;
    if (peer < 0 || (uint32_t)peer >= c->nranks) return GIN_PROF_SUCCESS;
    pthread_mutex_lock(&c->lock);
    idx = gp_pool_get(c->op_free, &c->op_nfree, &c->op_nnext, GP_POOL_OP);
    if (idx < 0) {
      c->dropped++;
      pthread_mutex_unlock(&c->lock);
      return GIN_PROF_SUCCESS;
    }
    gp_op *h = &c->ops[idx];
    h->tag = GP_TAG_OP, h->comm = c, h->peer = peer, h->send = d->proxyOp.isSend != 0, h->live = 1;
    pthread_mutex_unlock(&c->lock);
    *eHandle = h;
    return GIN_PROF_SUCCESS;
  }
  case GIN_PROF_PROXY_STEP: {
    uintptr_t par = (uintptr_t)d->parentObj, base = (uintptr_t)c->ops;
    if (par < base || par >= base + sizeof c->ops || (par - base) % sizeof(gp_op) != 0) return GIN_PROF_SUCCESS;
    const gp_op *op = (const gp_op *)d->parentObj;
    pthread_mutex_lock(&c->lock);
    if (!op->live) {
      pthread_mutex_unlock(&c->lock);
      return GIN_PROF_SUCCESS;
    }
    idx = gp_pool_get(c->step_free, &c->step_nfree, &c->step_nnext, GP_POOL_STEP);
    if (idx < 0) {
      c->dropped++;
      pthread_mutex_unlock(&c->lock);
      return GIN_PROF_SUCCESS;
    }
    gp_step *s = &c->steps[idx];
    s->tag = GP_TAG_STEP, s->comm = c, s->peer = op->peer, s->send = op->send, s->live = 1, s->cur = -1;
    s->enter = 0, s->wait[0] = s->wait[1] = s->wait[2] = 0, s->bytes = 0;
    pthread_mutex_unlock(&c->lock);
    *eHandle = s;
    return GIN_PROF_SUCCESS;
  }
  default: return GIN_PROF_SUCCESS;
  }
}

static inline void gp_step_close(gp_step *s, uint64_t t) {
  if (s->cur >= 0 && t > s->enter) s->wait[s->cur] += t - s->enter;
}

static gin_prof_result_t gp_record(void *eHandle, int eState, gin_prof_state_args_t *args) {
  gp_step *s = (gp_step *)eHandle;
  if (s == NULL || s->tag != GP_TAG_STEP || !s->live) return GIN_PROF_SUCCESS;
  uint64_t t = gp_mono();
  gp_step_close(s, t);
  s->cur = gp_wait_index(s->send, eState);
  s->enter = t;
  if (args != NULL && ((s->send && eState == GIN_PROF_STEP_SEND_WAIT) || (!s->send && eState == GIN_PROF_STEP_RECV_WAIT)))
    s->bytes += args->proxyStep.transSize;
  return GIN_PROF_SUCCESS;
}

static gin_prof_result_t gp_stop_event(void *eHandle) {
  if (eHandle == NULL) return GIN_PROF_SUCCESS;
  uint32_t tag = *(const uint32_t *)eHandle;
  if (tag == GP_TAG_STEP) {
    gp_step *s = (gp_step *)eHandle;
    gp_comm *c = s->comm;
    if (!s->live) return GIN_PROF_SUCCESS;
    gp_step_close(s, gp_mono());
    s->cur = -1;
    pthread_mutex_lock(&c->lock);
    s->live = 0;
    gp_peeragg *a = gp_peer_slot(c->cur, (uint32_t)s->peer, s->send);
    if (a == NULL) c->dropped++;
    else {
      a->steps = gp_sat32(a->steps);
      a->bytes += s->bytes;
      for (int k = 0; k < 3; k++) a->wait[k] += s->wait[k];
    }
    c->step_free[c->step_nfree++] = (uint16_t)(s - c->steps);
    pthread_mutex_unlock(&c->lock);
  } else if (tag == GP_TAG_COLL) {
    gp_coll *h = (gp_coll *)eHandle;
    gp_comm *c = h->comm;
    uint64_t t = gp_mono();
    pthread_mutex_lock(&c->lock);
    if (!h->live) {
      pthread_mutex_unlock(&c->lock);
      return GIN_PROF_SUCCESS;
    }
    h->live = 0;
    uint64_t dur = t > h->start ? t - h->start : 0;
    if (h->prev >= 0) c->colls[h->prev].next = h->next;
    else c->head = h->next;
    if (h->next >= 0) c->colls[h->next].prev = h->prev;
    else c->tail = h->prev;
    c->done++;
    gp_window *w = c->cur;
    gp_collagg *a = gp_coll_slot(w, h->func, h->log2);
    if (a == NULL) c->dropped++;
    else {
      a->count = gp_sat32(a->count);
      a->sum += dur;
      if (dur > a->max) a->max = dur;
    }
    if (h->seq % GP_SAMPLE_EVERY == 0) {
      gp_arrival *r = &w->arr[w->narr % GP_MAX_ARRIVALS];
      r->seq = h->seq, r->start = h->start;
      w->narr++;
      if (w->narr >= 2 * GP_MAX_ARRIVALS) w->narr -= GP_MAX_ARRIVALS; /* same ring slots, no wrap */
    }
    c->coll_free[c->coll_nfree++] = (uint16_t)(h - c->colls);
    pthread_mutex_unlock(&c->lock);
  } else if (tag == GP_TAG_OP) {
    gp_op *h = (gp_op *)eHandle;
    gp_comm *c = h->comm;
    pthread_mutex_lock(&c->lock);
    if (h->live) {
      h->live = 0;
      c->op_free[c->op_nfree++] = (uint16_t)(h - c->ops);
    }
    pthread_mutex_unlock(&c->lock);
  }
  return GIN_PROF_SUCCESS;
}

static gin_prof_result_t gp_finalize(void *context) {
  gp_comm *c = (gp_comm *)context;
  if (c == NULL) return GIN_PROF_SUCCESS;
  if (c->pid != (uint32_t)getpid()) return GIN_PROF_SUCCESS; /* the parent's, in a forked child: leave it */
  int join = 0;
  pthread_t tid = 0;
  pthread_mutex_lock(&g_lock);
  gp_report(c);
  for (gp_comm **pp = &g_comms; *pp != NULL; pp = &(*pp)->next)
    if (*pp == c) {
      *pp = c->next;
      break;
    }
  if (g_comms == NULL && g_running) {
    g_gen++;
    g_running = 0;
    tid = g_thread;
    join = 1;
    pthread_cond_broadcast(&g_cond);
  }
  pthread_mutex_unlock(&g_lock);
  if (join) pthread_join(tid, NULL);
  pthread_mutex_destroy(&c->lock);
  free(c);
  return GIN_PROF_SUCCESS;
}

__attribute__((visibility("default"))) gin_profiler_t ncclProfiler_v6 = {
    "GIN", gp_init, gp_start_event, gp_stop_event, gp_record, gp_finalize};
__attribute__((visibility("default"))) gin_profiler_t ncclProfiler_v5 = {
    "GIN", gp_init, gp_start_event, gp_stop_event, gp_record, gp_finalize};
