/*
 * profharness.c: loads an NCCL profiler plugin the way NCCL does and drives
 * it with a simulated multi-node job, with injectable faults.
 *
 *   profharness --lib PATH [--ranks R=16] [--nodes N=8] [--iters K | --duration-ms D]
 *               [--period-us P=2000] [--steps S=4] [--net-us U=250] [--bytes B=8388608]
 *               [--socket-dir DIR | --socket PATH] [--job ID=harness | --job -] [--seed X=1]
 *               [--fault SPEC]... [--shm PATH [--first-rank K=0] [--local-ranks M=R-K]]
 *               [--node-name NAME] [--footprint] [--bench N]
 *
 *   --fault slow:RANK:ITER:FACTOR   from ITER, RANK's network send time × FACTOR
 *   --fault straggle:RANK:ITER:MS   from ITER, RANK's compute phase + MS ms
 *   --fault hang:RANK:ITER          at ITER, before its Coll start, RANK stops calling
 *                                   anything and sleeps until the harness stops
 *   --fault stop:RANK:ITER          the same moment, RANK raise(SIGSTOP)s itself
 *
 * dlopen(RTLD_NOW|RTLD_LOCAL), ncclProfiler_v6 then _v5, then R forked rank
 * processes (rank r on node%03d, r / (R/N) + 1), each setting the per-rank
 * environment (agent socket DIR/nodeNNN.sock, SLURM_LOCALID,
 * CUDA_VISIBLE_DEVICES, NCCL_GIN_JOB_ID) and calling init; NCCL_GIN_ENABLED
 * is the harness's own. Every iteration: compute, Coll start, barrier A,
 * a send ProxyOp to (r + R/N) % R and a receive ProxyOp from
 * (r − R/N + R) % R with S steps each (a receive step completes only when
 * its upstream sender published it), barrier B, Coll stop. Only the event
 * types init's mask asks for are called. Barriers and step flags live in
 * shared memory (futex waits with a timeout, no busy spin) and are
 * abandoned when the shared stop flag is set.
 *
 * One job from several harness processes (e.g. one srun task per node):
 *   --shm PATH         the shared region is the file PATH mapped MAP_SHARED
 *                      instead of an anonymous mapping; every process of the
 *                      job names the same PATH (same machine: one kernel).
 *                      Whoever creates it (O_CREAT|O_EXCL) sizes it, sets it
 *                      up (the run's length, --iters/--duration-ms, is its
 *                      creator's) and publishes a magic word (release); the
 *                      others wait up to 30 s for that word and for the
 *                      geometry (--ranks, --nodes, --steps) to match theirs,
 *                      else exit 4 with a message, as for a region of a job
 *                      that already ended. Nobody removes PATH: the caller
 *                      does, and gives each job a fresh path (a file left by
 *                      a killed run is not told from a live one).
 *   --first-rank K --local-ranks M
 *                      this process forks ranks K..K+M-1 only (default 0 and
 *                      R-K; fewer than R need --shm); the barriers still
 *                      count all R. A rank's FAULT line comes from the
 *                      process that runs it. The stop flag (SIGTERM to any
 *                      process, a rank that died, the end of --iters or
 *                      --duration-ms) ends every process's ranks; a process
 *                      whose ranks ended well exits 0.
 *   --socket PATH      every rank of this process uses
 *                      NCCL_GIN_AGENT_SOCKET=PATH (not DIR/nodeNNN.sock).
 *   --node-name NAME   what this process prints as its ranks' node (FAULT
 *                      node=NAME, the log lines' prefix); nothing else.
 *   --job - (or "")    NCCL_GIN_JOB_ID is left as the environment has it:
 *                      unset, the plugin takes SLURM_JOB_ID.
 * E.g. under srun -N4 --ntasks-per-node=1, 16 ranks on 4 nodes:
 *   bash -c 'exec profharness --lib L --ranks 16 --nodes 4 --shm /shared/job.shm \
 *     --first-rank $((SLURM_PROCID*4)) --local-ranks 4 --job - \
 *     --socket /run/gin/$SLURMD_NODENAME.sock --node-name $SLURMD_NODENAME'
 *
 * SIGTERM/SIGINT: stop flag, stopped ranks SIGKILLed, children reaped,
 * exit 0. Exit: 0 ok, 1 a rank died or did not end, 2 init failed,
 * 3 load failed, 4 usage (or --shm not usable). --footprint and --bench
 * run in one process.
 * Build: cc -O2 -Wall -Wextra -pthread -rdynamic -o profharness profharness.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../profiler/abi.h"

#define COMM_ID 0x67696e2d6a6f6221ULL
#define MAX_FAULTS 64
#define MAX_RANKS 4096

enum { F_SLOW, F_STRAGGLE, F_HANG, F_STOP };
static const char *const fault_names[] = {"slow", "straggle", "hang", "stop"};

typedef struct {
  int kind, rank;
  long iter;
  double value; /* slow: factor; straggle: ms */
} fault_t;

/* ---- options ---- */
static const char *o_lib, *o_sockdir, *o_job = "harness", *o_shm, *o_socket, *o_node_name;
static int o_ranks = 16, o_nodes = 8, o_steps = 4, o_footprint, o_first_rank = 0, o_local_ranks = -1;
static long o_iters = -1, o_duration_ms = -1, o_period_us = 2000, o_net_us = 250, o_bench = -1;
static uint64_t o_bytes = 8388608, o_seed = 1;
static fault_t o_faults[MAX_FAULTS];
static int o_nfaults;

static gin_profiler_t *P;
static const char *P_sym;
static int g_rank = -1, g_rpn = 1;

/* node_label is what is printed as rank r's node: --node-name, else nodeNNN. */
static const char *node_label(int r, char *buf, size_t n) {
  if (o_node_name != NULL) return o_node_name;
  snprintf(buf, n, "node%03d", r / g_rpn + 1);
  return buf;
}

/* ---- output: one write per line (ranks share stdout and stderr) ---- */
static void outf(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void outf(int fd, const char *fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n >= sizeof buf) n = sizeof buf - 1;
  for (ssize_t off = 0; off < n;) {
    ssize_t k = write(fd, buf + off, (size_t)(n - off));
    if (k <= 0) {
      if (k < 0 && errno == EINTR) continue;
      return;
    }
    off += k;
  }
}

/* ncclDebugLogger_t: NCCL's line shape, on stderr. */
static void harness_log(int level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
  char msg[1536];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  int r = g_rank < 0 ? 0 : g_rank;
  char nb[32];
  const char *node = node_label(r, nb, sizeof nb);
  const char *lv = level == 2 ? "WARN" : level == 3 ? "INFO" : level == 1 ? "VERSION" : "TRACE";
  if (level == 2)
    outf(2, "%s:%d:%ld [%d] NCCL %s %s:%d %s [flags=0x%lx]\n", node, (int)getpid(), (long)syscall(SYS_gettid), r,
         lv, file ? file : "?", line, msg, flags);
  else
    outf(2, "%s:%d:%ld [%d] NCCL %s %s\n", node, (int)getpid(), (long)syscall(SYS_gettid), r, lv, msg);
}

/* ---- time, sleep, PRNG ---- */
static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns) {
  if (ns == 0) return;
  struct timespec ts = {(time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static uint64_t rng_state;
static uint64_t splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
static double rng_unit(void) { return (double)(splitmix(&rng_state) >> 11) / 9007199254740992.0; }

/* ---- shared memory: stop flag, the barrier, step flags ---- */
#define SHM_MAGIC 0x31687370686e6967ULL /* "ginphsh1" */
typedef struct {
  /* --shm: SHM_MAGIC once the creator has set up everything below
   * (release); the geometry the others check theirs against. */
  _Atomic uint64_t magic;
  int32_t ranks, nodes, steps, pad;
  _Atomic int stop;   /* abandon everything (the harness's parent sets it) */
  _Atomic int finish; /* set by barrier B's last arrival: this was the last iteration */
  uint64_t deadline;  /* monotonic ns, 0: none */
  long iters;
  _Atomic uint32_t bcount, bgen;
  _Atomic uint32_t joined; /* ranks the job's processes have claimed */
  /* per rank: steps it has sent ([0, R)), then 1 once a process runs it
   * ([R, 2R), CLAIM) */
  _Atomic uint32_t sent[];
} shm_t;
#define CLAIM(r) (&S->sent[o_ranks + (r)])

static shm_t *S;

static void futex_wait(_Atomic uint32_t *a, uint32_t v, long ns) {
  struct timespec ts = {0, ns};
  syscall(SYS_futex, (uint32_t *)a, FUTEX_WAIT, v, &ts, NULL, 0);
}
static void futex_wake(_Atomic uint32_t *a) { syscall(SYS_futex, (uint32_t *)a, FUTEX_WAKE, INT_MAX, NULL, NULL, 0); }

#define WAIT_SLICE_NS 20000000L /* futex timeout: the stop flag is seen within it */

/* barrier waits for all ranks; -1 when abandoned. The last arrival at
 * barrier B (last_b) decides whether the run ends after iteration i. */
static int barrier(int n, int last_b, long i) {
  uint32_t g = atomic_load(&S->bgen);
  if (atomic_fetch_add(&S->bcount, 1) + 1 == (uint32_t)n) {
    if (last_b && (i + 1 >= S->iters || (S->deadline && mono_ns() >= S->deadline))) atomic_store(&S->finish, 1);
    atomic_store(&S->bcount, 0);
    atomic_fetch_add(&S->bgen, 1);
    futex_wake(&S->bgen);
    return 0;
  }
  while (atomic_load(&S->bgen) == g) {
    if (atomic_load(&S->stop)) return -1;
    futex_wait(&S->bgen, g, WAIT_SLICE_NS);
  }
  return 0;
}

/* wait_sent waits until rank u has sent `want` steps; -1 when abandoned. */
static int wait_sent(int u, uint32_t want) {
  for (;;) {
    uint32_t v = atomic_load(&S->sent[u]);
    if ((int32_t)(v - want) >= 0) return 0;
    if (atomic_load(&S->stop)) return -1;
    futex_wait(&S->sent[u], v, WAIT_SLICE_NS);
  }
}

/* ---- plugin calls ---- */
static void *ctx;
static int mask;

static void *ev_start(gin_prof_descr_t *d) {
  void *h = NULL;
  if (!(mask & (int)d->type)) return NULL;
  P->startEvent(ctx, &h, d);
  return h;
}
static void ev_stop(int type, void *h) {
  if (mask & type) P->stopEvent(h);
}
static void ev_state(void *h, int state, size_t trans) {
  if (!(mask & GIN_PROF_PROXY_STEP)) return;
  gin_prof_state_args_t a;
  memset(&a, 0, sizeof a);
  a.proxyStep.transSize = trans;
  P->recordEventState(h, state, trans ? &a : NULL);
}

/* rank_env sets what a launcher and NCCL_GIN_* would give rank r. */
static void rank_env(int r) {
  char v[64], path[4096];
  if (o_socket != NULL) {
    setenv("NCCL_GIN_AGENT_SOCKET", o_socket, 1);
  } else if (o_sockdir != NULL) {
    snprintf(path, sizeof path, "%s/node%03d.sock", o_sockdir, r / g_rpn + 1);
    setenv("NCCL_GIN_AGENT_SOCKET", path, 1);
  }
  snprintf(v, sizeof v, "%d", r % g_rpn);
  setenv("SLURM_LOCALID", v, 1);
  setenv("CUDA_VISIBLE_DEVICES", v, 1);
  if (o_job != NULL) setenv("NCCL_GIN_JOB_ID", o_job, 1); /* NULL: --job - (the launcher's) */
}

static int rank_init(int r) {
  g_rank = r;
  rank_env(r);
  int rc = P->init(&ctx, COMM_ID, &mask, "harness", o_nodes, o_ranks, r, harness_log);
  if (rc != 0) {
    outf(1, "RANK %d init rc=%d\n", r, rc);
    ctx = NULL, mask = 0;
    return rc;
  }
  outf(1, "RANK %d mask=0x%x\n", r, (unsigned)mask);
  return 0;
}

static void print_fault(const fault_t *f, long i) {
  char nb[32];
  outf(1, "FAULT kind=%s rank=%d node=%s gpu=%d iter=%ld at_ns=%llu\n", fault_names[f->kind], f->rank,
       node_label(f->rank, nb, sizeof nb), f->rank % g_rpn, i, (unsigned long long)real_ns());
}

/* rank_main is rank r's process: init, the iterations, finalize. */
static int rank_main(int r) {
  int rc_init = rank_init(r);
  rng_state = o_seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(r + 1));
  const int R = o_ranks, St = o_steps;
  const int down = (r + g_rpn) % R, up = (r - g_rpn + R) % R;
  const size_t chunk = (size_t)(o_bytes / (uint64_t)St);
  long done = 0;
  for (long i = 0; i < S->iters && !atomic_load(&S->stop); i++) {
    double slow = 1.0, straggle_ms = 0;
    long slow_at = -1, strag_at = -1;
    for (int k = 0; k < o_nfaults; k++) {
      const fault_t *f = &o_faults[k];
      if (f->rank != r || f->iter > i) continue;
      if (f->iter == i) print_fault(f, i);
      if (f->kind == F_SLOW && f->iter >= slow_at) slow = f->value, slow_at = f->iter;
      if (f->kind == F_STRAGGLE && f->iter >= strag_at) straggle_ms = f->value, strag_at = f->iter;
      if (f->iter == i && (f->kind == F_HANG || f->kind == F_STOP)) {
        if (f->kind == F_STOP) raise(SIGSTOP);
        while (!atomic_load(&S->stop)) sleep_ns(WAIT_SLICE_NS);
        goto out;
      }
    }
    /* compute */
    double ph = (double)o_period_us * 1000.0 * (0.95 + 0.1 * rng_unit()) + straggle_ms * 1e6;
    sleep_ns((uint64_t)ph);
    gin_prof_descr_t d;
    memset(&d, 0, sizeof d);
    d.type = GIN_PROF_COLL;
    d.rank = r;
    d.coll.seqNumber = (uint64_t)i;
    d.coll.func = "AllReduce";
    d.coll.count = (size_t)(o_bytes / 4);
    d.coll.datatype = "ncclFloat32";
    d.coll.algo = "RING";
    d.coll.proto = "SIMPLE";
    d.coll.nChannels = 1;
    void *coll = ev_start(&d);
    if (barrier(R, 0, i) != 0) break;
    void *op[2]; /* 0 send, 1 recv */
    for (int k = 0; k < 2; k++) {
      memset(&d, 0, sizeof d);
      d.type = GIN_PROF_PROXY_OP;
      d.parentObj = coll;
      d.rank = r;
      d.proxyOp.pid = getpid();
      d.proxyOp.peer = k == 0 ? down : up;
      d.proxyOp.nSteps = St;
      d.proxyOp.chunkSize = (int)chunk;
      d.proxyOp.isSend = k == 0;
      op[k] = ev_start(&d);
    }
    for (int s = 0; s < St; s++) {
      memset(&d, 0, sizeof d);
      d.type = GIN_PROF_PROXY_STEP;
      d.rank = r;
      d.proxyStep.step = s;
      d.parentObj = op[0];
      void *ss = ev_start(&d);
      ev_state(ss, GIN_PROF_STEP_SEND_GPU_WAIT, 0);
      ev_state(ss, GIN_PROF_STEP_SEND_PEER_WAIT, 0);
      ev_state(ss, GIN_PROF_STEP_SEND_WAIT, chunk);
      d.parentObj = op[1];
      void *rs = ev_start(&d); /* the receive is posted while the send is on the wire */
      ev_state(rs, GIN_PROF_STEP_RECV_WAIT, chunk);
      /* The send is on the wire for net-us (× slow); like NCCL's proxy
       * progress loop, the receive completes as soon as its data arrives,
       * during the send or after it. */
      const uint32_t want = (uint32_t)(i * St + s + 1);
      const uint64_t wire_end = mono_ns() + (uint64_t)((double)o_net_us * 1000.0 * slow);
      int recvd = 0;
      for (uint64_t now = mono_ns(); now < wire_end; now = mono_ns()) {
        if (atomic_load(&S->stop)) goto out;
        if (recvd) {
          sleep_ns(wire_end - now);
          continue;
        }
        uint32_t v = atomic_load(&S->sent[up]);
        if ((int32_t)(v - want) >= 0) {
          ev_state(rs, GIN_PROF_STEP_RECV_FLUSH_WAIT, 0);
          ev_state(rs, GIN_PROF_STEP_RECV_GPU_WAIT, 0);
          ev_stop(GIN_PROF_PROXY_STEP, rs);
          recvd = 1;
          continue;
        }
        uint64_t left = wire_end - now;
        futex_wait(&S->sent[up], v, (long)(left < WAIT_SLICE_NS ? left : WAIT_SLICE_NS));
      }
      atomic_fetch_add(&S->sent[r], 1);
      futex_wake(&S->sent[r]);
      ev_stop(GIN_PROF_PROXY_STEP, ss);
      if (!recvd) {
        if (wait_sent(up, want) != 0) goto out;
        ev_state(rs, GIN_PROF_STEP_RECV_FLUSH_WAIT, 0);
        ev_state(rs, GIN_PROF_STEP_RECV_GPU_WAIT, 0);
        ev_stop(GIN_PROF_PROXY_STEP, rs);
      }
    }
    ev_stop(GIN_PROF_PROXY_OP, op[0]);
    ev_stop(GIN_PROF_PROXY_OP, op[1]);
    if (barrier(R, 1, i) != 0) break;
    ev_stop(GIN_PROF_COLL, coll);
    done++;
    if (atomic_load(&S->finish)) break;
  }
out:
  P->finalize(ctx);
  outf(1, "RANK %d done iters=%ld\n", r, done);
  return rc_init != 0 ? 2 : 0;
}

/* ---- footprint and bench (one process) ---- */
static long proc_status(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  size_t kl = strlen(key);
  if (f == NULL) return -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
      v = strtol(line + kl + 1, NULL, 10);
      break;
    }
  fclose(f);
  return v;
}

static void footprint(const char *stage) {
  printf("FOOTPRINT stage=%s threads=%ld rss_kb=%ld\n", stage, proc_status("Threads"), proc_status("VmRSS"));
  fflush(stdout);
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

static int run_bench(long n) {
  if (rank_init(0) != 0) return 2;
  size_t events = 0;
  uint32_t *t = NULL;
  if ((mask & GIN_PROF_PROXY_OP) && (mask & GIN_PROF_PROXY_STEP) && n > 0) {
    t = (uint32_t *)malloc(sizeof *t * (size_t)n * 5);
    if (t == NULL) {
      fprintf(stderr, "profharness: out of memory\n");
      return 4;
    }
    gin_prof_descr_t d;
    memset(&d, 0, sizeof d);
    d.type = GIN_PROF_PROXY_OP;
    d.proxyOp.pid = getpid();
    d.proxyOp.peer = g_rpn % o_ranks;
    d.proxyOp.nSteps = o_steps;
    d.proxyOp.chunkSize = (int)(o_bytes / (uint64_t)o_steps);
    d.proxyOp.isSend = 1;
    void *op = NULL;
    P->startEvent(ctx, &op, &d);
    gin_prof_state_args_t a;
    memset(&a, 0, sizeof a);
    a.proxyStep.transSize = (size_t)(o_bytes / (uint64_t)o_steps);
    for (long i = 0; i < n; i++) {
      void *h = NULL;
      uint64_t t0, t1;
      memset(&d, 0, sizeof d);
      d.type = GIN_PROF_PROXY_STEP;
      d.parentObj = op;
      d.proxyStep.step = (int)(i % o_steps);
      t0 = mono_ns();
      P->startEvent(ctx, &h, &d);
      t1 = mono_ns();
      t[events++] = (uint32_t)(t1 - t0);
      t0 = mono_ns();
      P->recordEventState(h, GIN_PROF_STEP_SEND_GPU_WAIT, NULL);
      t1 = mono_ns();
      t[events++] = (uint32_t)(t1 - t0);
      t0 = mono_ns();
      P->recordEventState(h, GIN_PROF_STEP_SEND_PEER_WAIT, NULL);
      t1 = mono_ns();
      t[events++] = (uint32_t)(t1 - t0);
      t0 = mono_ns();
      P->recordEventState(h, GIN_PROF_STEP_SEND_WAIT, &a);
      t1 = mono_ns();
      t[events++] = (uint32_t)(t1 - t0);
      t0 = mono_ns();
      P->stopEvent(h);
      t1 = mono_ns();
      t[events++] = (uint32_t)(t1 - t0);
    }
    P->stopEvent(op);
  }
  P->finalize(ctx);
  uint32_t med = 0, p99 = 0;
  if (events > 0) {
    qsort(t, events, sizeof *t, cmp_u32);
    med = t[events / 2];
    p99 = t[(events * 99) / 100];
  }
  printf("BENCH events=%zu median_ns=%u p99_ns=%u\n", events, med, p99);
  free(t);
  return 0;
}

/* ---- the parent ---- */
static volatile sig_atomic_t g_signalled;
static void on_signal(int sig) { g_signalled = sig; }

typedef struct {
  pid_t pid;
  int stopped, killed, reaped, checked, status;
} child_t;

static void usage(void) {
  fprintf(stderr,
          "usage: profharness --lib PATH [--ranks R=16] [--nodes N=8] [--iters K | --duration-ms D]\n"
          "         [--period-us P=2000] [--steps S=4] [--net-us U=250] [--bytes B=8388608]\n"
          "         [--socket-dir DIR | --socket PATH] [--job ID=harness | --job -] [--seed X=1] [--fault SPEC]...\n"
          "         [--shm PATH [--first-rank K=0] [--local-ranks M=R-K]] [--node-name NAME] [--footprint] [--bench N]\n"
          "  SPEC: slow:RANK:ITER:FACTOR | straggle:RANK:ITER:MS | hang:RANK:ITER | stop:RANK:ITER\n");
}

static int parse_long(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

static int parse_fault(const char *spec, fault_t *f) {
  char kind[16];
  int rank, n = 0;
  long iter;
  double val = 0;
  if (sscanf(spec, "%15[a-z]:%d:%ld%n", kind, &rank, &iter, &n) != 3) return -1;
  const char *rest = spec + n;
  int k = -1;
  for (int i = 0; i < 4; i++)
    if (strcmp(kind, fault_names[i]) == 0) k = i;
  if (k < 0 || rank < 0 || iter < 0) return -1;
  if (k == F_SLOW || k == F_STRAGGLE) {
    char *end;
    if (*rest != ':') return -1;
    val = strtod(rest + 1, &end);
    if (end == rest + 1 || *end || !(val >= 0) || (k == F_SLOW && val <= 0) || val > 1e6) return -1;
  } else if (*rest) return -1;
  f->kind = k, f->rank = rank, f->iter = iter, f->value = val;
  return 0;
}

/* stop_all abandons the run (every task's ranks, with --shm): flag, wake
 * waiters, SIGKILL this process's stopped ranks, reap them for up to 5 s.
 * ch[i] is rank o_first_rank + i. Returns the number that did not end. */
static int stop_all(child_t *ch, int n) {
  atomic_store(&S->stop, 1);
  futex_wake(&S->bgen);
  for (int r = 0; r < o_ranks; r++) futex_wake(&S->sent[r]);
  for (int r = 0; r < n; r++)
    if (!ch[r].reaped && ch[r].stopped) {
      kill(ch[r].pid, SIGKILL);
      kill(ch[r].pid, SIGCONT);
      ch[r].killed = 1;
    }
  uint64_t until = mono_ns() + 5000000000ULL;
  int left = n;
  while (left > 0) {
    left = 0;
    for (int r = 0; r < n; r++) {
      if (ch[r].reaped) continue;
      int st;
      pid_t p = waitpid(ch[r].pid, &st, WNOHANG | WUNTRACED);
      if (p == ch[r].pid && !WIFSTOPPED(st)) {
        ch[r].reaped = 1, ch[r].status = st;
        continue;
      }
      if (p == ch[r].pid && WIFSTOPPED(st)) {
        kill(ch[r].pid, SIGKILL);
        kill(ch[r].pid, SIGCONT);
        ch[r].killed = 1;
      }
      left++;
    }
    if (left == 0 || mono_ns() >= until) break;
    sleep_ns(5000000);
  }
  int stuck = 0;
  for (int r = 0; r < n; r++)
    if (!ch[r].reaped) {
      outf(2, "profharness: rank %d (pid %d) did not end within 5 s of the stop; killed\n", o_first_rank + r, (int)ch[r].pid);
      outf(1, "STUCK rank=%d pid=%d\n", o_first_rank + r, (int)ch[r].pid);
      kill(ch[r].pid, SIGKILL);
      kill(ch[r].pid, SIGCONT);
      waitpid(ch[r].pid, NULL, 0);
      ch[r].reaped = 1, ch[r].killed = 1;
      stuck++;
    }
  return stuck;
}

/* abnormal reports a rank that did not end well; 1 when it did not. */
static int abnormal(child_t *c, int r) {
  const int st = c->status;
  if (c->checked) return 0;
  c->checked = 1;
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
  if (c->killed && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) return 0;
  if (WIFEXITED(st)) {
    outf(2, "profharness: rank %d (pid %d) exited with status %d\n", r, (int)c->pid, WEXITSTATUS(st));
    outf(1, "DIED rank=%d pid=%d status=%d\n", r, (int)c->pid, WEXITSTATUS(st));
  } else {
    outf(2, "profharness: rank %d (pid %d) killed by signal %d (%s)\n", r, (int)c->pid, WTERMSIG(st), strsignal(WTERMSIG(st)));
    outf(1, "DIED rank=%d pid=%d signal=%d\n", r, (int)c->pid, WTERMSIG(st));
  }
  return 1;
}

/* shm_open_region maps --shm PATH (see the header comment): the task that
 * creates the file (O_EXCL) sizes it, sets it up and publishes SHM_MAGIC;
 * the others wait up to 30 s for it and check its geometry against
 * theirs. NULL (after a message) when the region cannot be used. */
#define SHM_JOIN_NS 30000000000ULL
static shm_t *shm_open_region(const char *path, size_t sz, int *created) {
  *created = 0;
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) {
    if (ftruncate(fd, (off_t)sz) != 0) {
      outf(2, "profharness: --shm %s: ftruncate: %s\n", path, strerror(errno));
      close(fd);
      return NULL;
    }
    void *m = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
      outf(2, "profharness: --shm %s: mmap: %s\n", path, strerror(errno));
      return NULL;
    }
    *created = 1;
    return (shm_t *)m; /* zero-filled: the caller sets it up and publishes */
  }
  if (errno != EEXIST) {
    outf(2, "profharness: --shm %s: %s\n", path, strerror(errno));
    return NULL;
  }
  const uint64_t until = mono_ns() + SHM_JOIN_NS;
  fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    outf(2, "profharness: --shm %s: %s\n", path, strerror(errno));
    return NULL;
  }
  /* Its creator sizes it right after creating it: wait for a size, then
   * for the magic word (the region set up), then compare. */
  struct stat st;
  for (;;) {
    if (fstat(fd, &st) != 0) {
      outf(2, "profharness: --shm %s: fstat: %s\n", path, strerror(errno));
      close(fd);
      return NULL;
    }
    if ((size_t)st.st_size >= sizeof(shm_t)) break;
    if (mono_ns() >= until) {
      outf(2, "profharness: --shm %s: still %lld bytes after 30 s (its creator died? remove the file)\n", path, (long long)st.st_size);
      close(fd);
      return NULL;
    }
    sleep_ns(1000000);
  }
  size_t have = (size_t)st.st_size;
  shm_t *m = (shm_t *)mmap(NULL, have, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) {
    outf(2, "profharness: --shm %s: mmap: %s\n", path, strerror(errno));
    return NULL;
  }
  while (atomic_load_explicit(&m->magic, memory_order_acquire) != SHM_MAGIC) {
    if (mono_ns() >= until) {
      outf(2, "profharness: --shm %s: not set up by its creator within 30 s (not a harness region, or its creator died; remove the file)\n", path);
      munmap(m, have);
      return NULL;
    }
    sleep_ns(1000000);
  }
  if (m->ranks != o_ranks || m->nodes != o_nodes || m->steps != o_steps || have != sz) {
    outf(2, "profharness: --shm %s: a job of %d ranks on %d nodes with %d steps (%zu bytes); this task has --ranks %d --nodes %d --steps %d\n",
         path, m->ranks, m->nodes, m->steps, have, o_ranks, o_nodes, o_steps);
    munmap(m, have);
    return NULL;
  }
  if (atomic_load(&m->stop) || atomic_load(&m->finish)) {
    outf(2, "profharness: --shm %s: that job has already ended (a file left from an earlier run? use a fresh path)\n", path);
    munmap(m, have);
    return NULL;
  }
  return m;
}

static int run_job(void) {
  const int R = o_ranks, K = o_first_rank, M = o_local_ranks;
  size_t sz = sizeof(shm_t) + sizeof(_Atomic uint32_t) * 2 * (size_t)R;
  int created = 1;
  if (o_shm != NULL) {
    S = shm_open_region(o_shm, sz, &created);
    if (S == NULL) return 4;
  } else {
    S = (shm_t *)mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (S == MAP_FAILED) {
      perror("profharness: mmap");
      return 4;
    }
  }
  if (created) {
    S->ranks = R, S->nodes = o_nodes, S->steps = o_steps;
    S->iters = o_iters >= 0 ? o_iters : (o_duration_ms >= 0 ? LONG_MAX : 100);
    uint64_t t0 = mono_ns();
    S->deadline = o_duration_ms >= 0 ? t0 + (uint64_t)o_duration_ms * 1000000ULL : 0;
    if (S->deadline == 0 && o_duration_ms == 0) S->deadline = 1;
    atomic_store_explicit(&S->magic, SHM_MAGIC, memory_order_release);
  }
  for (int r = K; r < K + M; r++)
    if (atomic_exchange(CLAIM(r), 1) != 0) {
      outf(2, "profharness: rank %d is already run by another process of the job (--first-rank/--local-ranks overlap)\n", r);
      for (int q = K; q < r; q++) atomic_store(CLAIM(q), 0);
      return 4;
    }
  atomic_fetch_add(&S->joined, (uint32_t)M);
  /* --shm: every rank must be claimed within 30 s of this task's start,
   * or the ranks here would wait at the first barrier for ever. */
  uint64_t join_by = o_shm != NULL ? mono_ns() + SHM_JOIN_NS : 0;

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);

  child_t *ch = (child_t *)calloc((size_t)M, sizeof *ch);
  if (ch == NULL) return 4;
  pid_t parent = getpid();
  fflush(stdout);
  fflush(stderr);
  int forked = 0;
  for (int r = 0; r < M; r++) {
    pid_t p = fork();
    if (p < 0) {
      perror("profharness: fork");
      break;
    }
    if (p == 0) {
      signal(SIGTERM, SIG_IGN); /* the parent stops the ranks through the flag */
      signal(SIGINT, SIG_IGN);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      int rc = rank_main(K + r);
      fflush(stdout);
      _exit(rc);
    }
    ch[r].pid = p;
    forked++;
  }
  int exit_rc = 0, stopping = forked < M;
  uint64_t grace = S->deadline ? S->deadline + 2000000000ULL : 0;
  for (;;) {
    int live = 0;
    for (int r = 0; r < forked; r++) {
      if (ch[r].reaped) continue;
      int st;
      pid_t p = waitpid(ch[r].pid, &st, WNOHANG | WUNTRACED);
      if (p == ch[r].pid) {
        if (WIFSTOPPED(st)) ch[r].stopped = 1;
        else {
          ch[r].reaped = 1, ch[r].status = st;
          if (abnormal(&ch[r], K + r)) exit_rc = 1, stopping = 1;
          continue;
        }
      }
      live++;
    }
    if (live == 0) break;
    if (join_by && atomic_load(&S->joined) >= (uint32_t)R) join_by = 0;
    if (join_by && mono_ns() >= join_by && !stopping) {
      outf(2, "profharness: --shm %s: %u of the %d ranks joined within 30 s (a process of the job did not start?); stopping the job\n", o_shm,
           (unsigned)atomic_load(&S->joined), R);
      exit_rc = 1, stopping = 1;
    }
    /* S->stop: another task stopped the job (--shm). */
    if (g_signalled || stopping || atomic_load(&S->stop) || (grace && mono_ns() >= grace)) {
      if (stop_all(ch, forked) > 0) exit_rc = 1;
      for (int r = 0; r < forked; r++)
        if (abnormal(&ch[r], K + r)) exit_rc = 1;
      break;
    }
    sleep_ns(10000000);
  }
  if (forked < M) exit_rc = 1;
  free(ch);
  munmap(S, sz);
  return exit_rc;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    long n;
#define NEED_VALUE                                         \
  if (v == NULL) {                                         \
    fprintf(stderr, "profharness: %s needs a value\n", a); \
    return 4;                                              \
  }                                                        \
  i++;
#define NUM(lo, hi)                                                    \
  NEED_VALUE if (parse_long(v, lo, hi, &n) != 0) {                     \
    fprintf(stderr, "profharness: %s %s: not in [%ld, %ld]\n", a, v, (long)(lo), (long)(hi)); \
    return 4;                                                          \
  }
    if (strcmp(a, "--lib") == 0) {
      NEED_VALUE o_lib = v;
    } else if (strcmp(a, "--ranks") == 0) {
      NUM(1, MAX_RANKS) o_ranks = (int)n;
    } else if (strcmp(a, "--nodes") == 0) {
      NUM(1, MAX_RANKS) o_nodes = (int)n;
    } else if (strcmp(a, "--iters") == 0) {
      NUM(0, LONG_MAX) o_iters = n;
    } else if (strcmp(a, "--duration-ms") == 0) {
      NUM(0, 86400000L) o_duration_ms = n;
    } else if (strcmp(a, "--period-us") == 0) {
      NUM(0, 60000000L) o_period_us = n;
    } else if (strcmp(a, "--steps") == 0) {
      NUM(1, 1024) o_steps = (int)n;
    } else if (strcmp(a, "--net-us") == 0) {
      NUM(0, 60000000L) o_net_us = n;
    } else if (strcmp(a, "--bytes") == 0) {
      NUM(1, LONG_MAX) o_bytes = (uint64_t)n;
    } else if (strcmp(a, "--seed") == 0) {
      NUM(LONG_MIN, LONG_MAX) o_seed = (uint64_t)n;
    } else if (strcmp(a, "--bench") == 0) {
      NUM(0, 100000000L) o_bench = n;
    } else if (strcmp(a, "--socket-dir") == 0) {
      NEED_VALUE o_sockdir = v;
    } else if (strcmp(a, "--socket") == 0) {
      NEED_VALUE o_socket = v;
    } else if (strcmp(a, "--node-name") == 0) {
      NEED_VALUE o_node_name = v;
    } else if (strcmp(a, "--shm") == 0) {
      NEED_VALUE o_shm = v;
    } else if (strcmp(a, "--first-rank") == 0) {
      NUM(0, MAX_RANKS - 1) o_first_rank = (int)n;
    } else if (strcmp(a, "--local-ranks") == 0) {
      NUM(1, MAX_RANKS) o_local_ranks = (int)n;
    } else if (strcmp(a, "--job") == 0) {
      NEED_VALUE o_job = (*v == 0 || strcmp(v, "-") == 0) ? NULL : v;
    } else if (strcmp(a, "--fault") == 0) {
      NEED_VALUE if (o_nfaults >= MAX_FAULTS || parse_fault(v, &o_faults[o_nfaults]) != 0) {
        fprintf(stderr, "profharness: --fault %s: want slow:RANK:ITER:FACTOR, straggle:RANK:ITER:MS, hang:RANK:ITER or stop:RANK:ITER (at most %d)\n",
                v, MAX_FAULTS);
        return 4;
      }
      o_nfaults++;
    } else if (strcmp(a, "--footprint") == 0) {
      o_footprint = 1;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage();
      return 0;
    } else {
      fprintf(stderr, "profharness: unknown argument %s\n", a);
      usage();
      return 4;
    }
  }
  if (o_lib == NULL) {
    usage();
    return 4;
  }
  if (o_ranks % o_nodes != 0) {
    fprintf(stderr, "profharness: --ranks %d is not a multiple of --nodes %d\n", o_ranks, o_nodes);
    return 4;
  }
  if (o_bytes / (uint64_t)o_steps == 0 || o_bytes / (uint64_t)o_steps > INT_MAX) {
    fprintf(stderr, "profharness: --bytes / --steps must be 1..%d\n", INT_MAX);
    return 4;
  }
  for (int k = 0; k < o_nfaults; k++)
    if (o_faults[k].rank >= o_ranks) {
      fprintf(stderr, "profharness: a fault names rank %d of %d\n", o_faults[k].rank, o_ranks);
      return 4;
    }
  if (o_local_ranks < 0) o_local_ranks = o_ranks - o_first_rank;
  if (o_local_ranks < 1 || o_first_rank + o_local_ranks > o_ranks) {
    fprintf(stderr, "profharness: --first-rank %d --local-ranks %d: not within the %d ranks\n", o_first_rank, o_local_ranks, o_ranks);
    return 4;
  }
  if (o_local_ranks < o_ranks && o_shm == NULL) {
    fprintf(stderr, "profharness: --first-rank/--local-ranks run part of a job: the other ranks need --shm PATH to meet\n");
    return 4;
  }
  if (o_socket != NULL && o_sockdir != NULL) {
    fprintf(stderr, "profharness: --socket and --socket-dir: give one\n");
    return 4;
  }
  if (o_shm != NULL && *o_shm == 0) {
    fprintf(stderr, "profharness: --shm: an empty path\n");
    return 4;
  }
  g_rpn = o_ranks / o_nodes;

  if (o_footprint) footprint("before_dlopen");
  void *h = dlopen(o_lib, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    printf("DLOPEN_FAIL %s\n", dlerror());
    return 3;
  }
  if (o_footprint) footprint("after_dlopen");
  static const char *const syms[] = {"ncclProfiler_v6", "ncclProfiler_v5"};
  for (int i = 0; i < 2 && P == NULL; i++)
    if ((P = (gin_profiler_t *)dlsym(h, syms[i])) != NULL) P_sym = syms[i];
  if (P == NULL) {
    printf("NO_SYMBOL\n");
    return 3;
  }
  printf("LOADED symbol=%s name=%s\n", P_sym, P->name ? P->name : "(null)");
  fflush(stdout);
  if (P->init == NULL || P->startEvent == NULL || P->stopEvent == NULL || P->recordEventState == NULL || P->finalize == NULL) {
    printf("NO_SYMBOL a function pointer is NULL\n");
    return 3;
  }

  if (o_footprint) {
    int rc = rank_init(0);
    footprint("after_init");
    P->finalize(ctx);
    return rc != 0 ? 2 : 0;
  }
  if (o_bench >= 0) return run_bench(o_bench);
  return run_job();
}
