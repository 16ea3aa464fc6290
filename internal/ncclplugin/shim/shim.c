/*
 * shim.c: libnccl-tuner-gin.so, the library NCCL dlopens. It is C only: it
 * exports the tuner structs (v6..v2), init/finalize and the pure C
 * getCollInfo hot path, and starts nothing (no thread, no runtime) while
 * GIN is off. Only an init with NCCL_GIN_ENABLED=1, in the process that
 * loaded it, dlopens the Go plan loader (libnccl-tuner-gin-go.so, the same
 * directory) and calls its ginGoLoad; Go is never entered from getCollInfo
 * or finalize, nor in a child that forked without exec (where the agent
 * path, all C, still works).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
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

/* ---- the node agent, from C (no Go, no gRPC, no protobuf) ----
 *
 * The agent's plan socket (internal/plansock) in form 2 answers with the
 * plan's compiled decision table (internal/plantable): checked here for
 * length, FNV-1a checksum, job id, content hash and every cell. */

#define GIN_DEFAULT_SOCKET "/run/gin/agent.sock"
#define GIN_DEFAULT_TIMEOUT_MS 5000
#define GIN_MAX_TIMEOUT_MS 600000
#define GIN_MAX_ID 128
#define GIN_MAX_NODES 8192
#define GIN_MAX_MESSAGE 1024
#define GIN_SHAPE_BYTES (8 + GIN_NUM_COLLS * GIN_BUCKETS * 4)
#define GIN_TABLE_MAX (4 + 3 + 2 + GIN_MAX_ID + 2 + GIN_MAX_ID + GIN_MAX_SHAPES * GIN_SHAPE_BYTES + 8)

enum { GIN_AGENT_OK, GIN_AGENT_NONE, GIN_AGENT_FAIL };

static long long gin_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* gin_env_trim copies the variable without surrounding blanks; 0 when
 * unset, empty or too long. */
static int gin_env_trim(const char *name, char *buf, size_t n) {
  const char *v = getenv(name);
  if (v == NULL) return 0;
  while (*v && isspace((unsigned char)*v)) v++;
  size_t l = strlen(v);
  while (l > 0 && isspace((unsigned char)v[l - 1])) l--;
  if (l == 0 || l >= n) return 0;
  memcpy(buf, v, l);
  buf[l] = 0;
  return 1;
}

/* gin_timeout_ms is NCCL_GIN_INIT_TIMEOUT_MS, or its default (WARN) when
 * it is not whole milliseconds from 1 to 600000. */
static int gin_timeout_ms(gin_logger_t logFn) {
  char v[64], msg[256];
  const char *raw = getenv("NCCL_GIN_INIT_TIMEOUT_MS");
  if (raw == NULL || strspn(raw, " \t\n") == strlen(raw)) return GIN_DEFAULT_TIMEOUT_MS;
  if (gin_env_trim("NCCL_GIN_INIT_TIMEOUT_MS", v, sizeof v) && strspn(v, "0123456789") == strlen(v) && strlen(v) <= 6) {
    long ms = strtol(v, NULL, 10);
    if (ms >= 1 && ms <= GIN_MAX_TIMEOUT_MS) return (int)ms;
  }
  snprintf(msg, sizeof msg,
           "GIN: NCCL_GIN_INIT_TIMEOUT_MS=\"%.64s\" is not valid (want whole milliseconds from 1 to %d); using the default 5s",
           raw, GIN_MAX_TIMEOUT_MS);
  gin_log(logFn, GIN_LOG_WARN, GIN_FLAG_INIT | GIN_FLAG_TUNING, msg);
  return GIN_DEFAULT_TIMEOUT_MS;
}

/* gin_gpus is Slurm's GPU count: "8", "gpu:8", "h100:8"; lists take the first. */
static uint32_t gin_gpus(void) {
  const char *names[] = {"SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE"};
  for (int i = 0; i < 2; i++) {
    char v[128];
    if (!gin_env_trim(names[i], v, sizeof v)) continue;
    v[strcspn(v, ",(")] = 0;
    const char *d = strrchr(v, ':');
    d = d ? d + 1 : v;
    if (*d && strspn(d, "0123456789") == strlen(d) && strlen(d) <= 9) return (uint32_t)strtoul(d, NULL, 10);
  }
  return 0;
}

/* gin_io moves exactly n bytes (write when out, else read) before the deadline. */
static int gin_io(int fd, void *buf, size_t n, int out, long long deadline, char *err, size_t errlen) {
  size_t done = 0;
  while (done < n) {
    ssize_t k = out ? send(fd, (char *)buf + done, n - done, MSG_NOSIGNAL) : read(fd, (char *)buf + done, n - done);
    if (k > 0) {
      done += (size_t)k;
      continue;
    }
    if (k == 0) {
      snprintf(err, errlen, "the agent closed the connection");
      return -1;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      snprintf(err, errlen, "%s", strerror(errno));
      return -1;
    }
    long long left = deadline - gin_now_ms();
    if (left <= 0) {
      snprintf(err, errlen, "no answer in time");
      return -1;
    }
    struct pollfd p = {fd, out ? POLLOUT : POLLIN, 0};
    if (poll(&p, 1, (int)left) < 0 && errno != EINTR) {
      snprintf(err, errlen, "poll: %s", strerror(errno));
      return -1;
    }
  }
  return 0;
}

static uint64_t gin_fnv1a(const unsigned char *b, size_t n) {
  uint64_t h = 14695981039346656037ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}

static uint32_t gin_be32(const unsigned char *b) { return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]; }
static uint16_t gin_be16(const unsigned char *b) { return (uint16_t)(b[0] << 8 | b[1]); }

/* gin_parse_table checks an encoded table (plantable's C form) of job and
 * hash and returns it as a gin_table, or NULL with the cause. */
static gin_table *gin_parse_table(const unsigned char *b, size_t n, const char *job, const char *hash, int *dropped,
                                  char *err, size_t errlen) {
  if (n < 4 + 3 + 2 + 2 + 8 || n > GIN_TABLE_MAX) {
    snprintf(err, errlen, "table of %zu bytes", n);
    return NULL;
  }
  uint64_t sum = (uint64_t)gin_be32(b + n - 8) << 32 | gin_be32(b + n - 4);
  if (gin_fnv1a(b, n - 8) != sum) {
    snprintf(err, errlen, "table checksum mismatch (corrupt or truncated)");
    return NULL;
  }
  if (memcmp(b, "GINT", 4) != 0 || b[4] != 1 || b[5] > GIN_MAX_SHAPES) {
    snprintf(err, errlen, "not a GIN table of version 1");
    return NULL;
  }
  int nShapes = b[5];
  *dropped = b[6];
  size_t off = 7;
  const char *want[2] = {job, hash};
  for (int i = 0; i < 2; i++) {
    if (off + 2 > n - 8) goto truncated;
    size_t l = gin_be16(b + off);
    off += 2;
    if (off + l > n - 8 || l != strlen(want[i]) || memcmp(b + off, want[i], l) != 0) {
      snprintf(err, errlen, "the table is not of %s %s", i == 0 ? "job" : "plan", want[i]);
      return NULL;
    }
    off += l;
  }
  if (n - 8 - off != (size_t)nShapes * GIN_SHAPE_BYTES) goto truncated;
  gin_table *t = (gin_table *)calloc(1, sizeof *t);
  if (t == NULL) {
    snprintf(err, errlen, "out of memory for the decision table");
    return NULL;
  }
  t->nShapes = nShapes;
  for (int s = 0; s < nShapes; s++) {
    gin_shape *sh = &t->shape[s];
    sh->nRanks = gin_be32(b + off);
    sh->nNodes = gin_be32(b + off + 4);
    off += 8;
    for (int c = 0; c < GIN_NUM_COLLS; c++)
      for (int k = 0; k < GIN_BUCKETS; k++, off += 4) {
        gin_cell cell = {(int8_t)b[off], (int8_t)b[off + 1], (int16_t)gin_be16(b + off + 2)};
        if (cell.algo < -1 || cell.algo >= GIN_MAX_ALGOS || cell.proto < -1 || cell.proto >= GIN_MAX_PROTOS || cell.channels < 0) {
          free(t);
          snprintf(err, errlen, "table cell out of range");
          return NULL;
        }
        sh->cell[c][k] = cell;
      }
  }
  return t;
truncated:
  snprintf(err, errlen, "table truncated");
  return NULL;
}

/* gin_from_agent asks the node agent at sock for job's table before the
 * deadline. GIN_AGENT_NONE: no agent listens there (absent or refused). */
static int gin_from_agent(const char *sock, const char *job, long long deadline, gin_table **out, char *hash,
                          int *dropped, char *err, size_t errlen) {
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  char nodes[GIN_MAX_NODES + 1] = "";
  unsigned char req[4 + 1 + 2 + GIN_MAX_ID + 2 + GIN_MAX_NODES + 4], hdr[6], lenb[4];
  unsigned char *body = NULL;
  int rc = GIN_AGENT_FAIL, fd = -1;
  *out = NULL;
  if (strlen(sock) >= sizeof addr.sun_path) {
    snprintf(err, errlen, "socket path too long");
    return GIN_AGENT_FAIL;
  }
  memcpy(addr.sun_path, sock, strlen(sock) + 1);
  if (!gin_env_trim("SLURM_JOB_NODELIST", nodes, sizeof nodes)) gin_env_trim("NCCL_GIN_NODES", nodes, sizeof nodes);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    snprintf(err, errlen, "socket: %s", strerror(errno));
    return GIN_AGENT_FAIL;
  }
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
    if (errno == ENOENT || errno == ECONNREFUSED) {
      snprintf(err, errlen, "connect: %s", strerror(errno));
      rc = GIN_AGENT_NONE;
      goto done;
    }
    if (errno != EAGAIN && errno != EINPROGRESS) {
      snprintf(err, errlen, "connect: %s", strerror(errno));
      goto done;
    }
    struct pollfd p = {fd, POLLOUT, 0};
    long long left = deadline - gin_now_ms();
    if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
      snprintf(err, errlen, "connect: no answer in time");
      goto done;
    }
  }
  struct ucred cred;
  socklen_t cl = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0) {
    snprintf(err, errlen, "who serves it: %s", strerror(errno));
    goto done;
  }
  if (cred.uid != 0 && cred.uid != getuid()) {
    snprintf(err, errlen, "served by uid %u (pid %d), neither root nor this user; not trusted", (unsigned)cred.uid, (int)cred.pid);
    goto done;
  }
  size_t jl = strlen(job), nl = strlen(nodes), off = 0;
  uint32_t gpn = gin_gpus();
  memcpy(req, "GINQ", 4);
  req[4] = 2; /* form 2: the table */
  req[5] = (unsigned char)(jl >> 8), req[6] = (unsigned char)jl;
  memcpy(req + 7, job, jl);
  off = 7 + jl;
  req[off] = (unsigned char)(nl >> 8), req[off + 1] = (unsigned char)nl;
  memcpy(req + off + 2, nodes, nl);
  off += 2 + nl;
  req[off] = (unsigned char)(gpn >> 24), req[off + 1] = (unsigned char)(gpn >> 16), req[off + 2] = (unsigned char)(gpn >> 8),
  req[off + 3] = (unsigned char)gpn;
  off += 4;
  if (gin_io(fd, req, off, 1, deadline, err, errlen) != 0) goto done;
  if (gin_io(fd, hdr, sizeof hdr, 0, deadline, err, errlen) != 0) goto done;
  if (memcmp(hdr, "GINA", 4) != 0 || hdr[4] != 1 || hdr[5] > 3) {
    snprintf(err, errlen, "not a GIN plan response");
    goto done;
  }
  unsigned char l2[2];
  if (gin_io(fd, l2, 2, 0, deadline, err, errlen) != 0) goto done;
  size_t hl = gin_be16(l2);
  if (hl > GIN_MAX_ID) {
    snprintf(err, errlen, "content hash of %zu bytes", hl);
    goto done;
  }
  if (gin_io(fd, hash, hl, 0, deadline, err, errlen) != 0) goto done;
  hash[hl] = 0;
  if (gin_io(fd, lenb, 4, 0, deadline, err, errlen) != 0) goto done;
  size_t bl = gin_be32(lenb);
  if (bl > (hdr[5] == 0 ? (size_t)GIN_TABLE_MAX : (size_t)GIN_MAX_MESSAGE)) {
    snprintf(err, errlen, "answer of %zu bytes, over the limit", bl);
    goto done;
  }
  body = (unsigned char *)malloc(bl + 1);
  if (body == NULL || gin_io(fd, body, bl, 0, deadline, err, errlen) != 0) {
    if (body == NULL) snprintf(err, errlen, "out of memory");
    goto done;
  }
  body[bl] = 0;
  if (hdr[5] != 0) {
    static const char *status[] = {"OK", "NOT_FOUND", "UNAVAILABLE", "BAD_REQUEST"};
    snprintf(err, errlen, "has no plan for job %s: %s: %s", job, status[hdr[5]], (const char *)body);
    goto done;
  }
  *out = gin_parse_table(body, bl, job, hash, dropped, err, errlen);
  if (*out != NULL) rc = GIN_AGENT_OK;
done:
  free(body);
  close(fd);
  return rc;
}

/* gin_init_agent is init's agent path. It returns 1 when it decided
 * (*rc is init's result), 0 to go on with the Go loader (a plan file, no
 * job id, no agent on the node: the Go loader reports or asks the masters). */
static int gin_init_agent(size_t nRanks, size_t nNodes, uint64_t commId, gin_logger_t logFn, void **context, int *rc) {
  char job[GIN_MAX_ID + 1], sock[256], hash[GIN_MAX_ID + 1], err[1400], msg[2048];
  int strict = gin_env_is("NCCL_GIN_STRICT", "1");
  const char *pf = getenv("NCCL_GIN_PLAN_FILE");
  if (pf != NULL && strspn(pf, " \t\n") != strlen(pf)) return 0; /* a plan file: the Go loader reads it */
  if (!gin_env_trim("SLURM_JOB_ID", job, sizeof job) && !gin_env_trim("NCCL_GIN_JOB_ID", job, sizeof job)) return 0;
  if (!gin_env_trim("NCCL_GIN_AGENT_SOCKET", sock, sizeof sock)) snprintf(sock, sizeof sock, "%s", GIN_DEFAULT_SOCKET);
  if (strcmp(sock, "none") == 0) return 0;
  long long start = gin_now_ms();
  long long deadline = start + gin_timeout_ms(logFn);
  gin_table *t = NULL;
  int dropped = 0;
  switch (gin_from_agent(sock, job, deadline, &t, hash, &dropped, err, sizeof err)) {
  case GIN_AGENT_NONE:
    snprintf(msg, sizeof msg, "GIN: no node agent at %s (%s); asking the masters", sock, err);
    gin_log(logFn, GIN_LOG_INFO, GIN_FLAG_INIT | GIN_FLAG_TUNING, msg);
    return 0;
  case GIN_AGENT_FAIL:
    snprintf(msg, sizeof msg, "GIN: %s: node agent %s: %s",
             strict ? "strict mode (NCCL_GIN_STRICT=1), failing communicator init" : "standing aside, NCCL tunes alone", sock, err);
    gin_log(logFn, GIN_LOG_WARN, GIN_FLAG_INIT | GIN_FLAG_TUNING, msg);
    *rc = strict ? ginNcclSystemError : ginNcclSuccess;
    return 1;
  }
  snprintf(msg, sizeof msg, "GIN: Connected to topology service at unix:%s (node agent)", sock);
  gin_log(logFn, GIN_LOG_INFO, GIN_FLAG_INIT | GIN_FLAG_TUNING, msg);
  snprintf(msg, sizeof msg, "GIN: plan %s for job %s (%d shapes) from node agent unix:%s in %lld ms (C, no Go loaded)", hash, job,
           t->nShapes, sock, gin_now_ms() - start);
  gin_log(logFn, GIN_LOG_INFO, GIN_FLAG_INIT | GIN_FLAG_TUNING, msg);
  if (dropped > 0) {
    snprintf(msg, sizeof msg, "GIN: plan has %d communicator shapes; only the first %d are used", t->nShapes + dropped, GIN_MAX_SHAPES);
    gin_log(logFn, GIN_LOG_WARN, GIN_FLAG_INIT | GIN_FLAG_TUNING, msg);
  }
  for (int i = 0; i < t->nShapes; i++)
    if (t->shape[i].nRanks == nRanks && t->shape[i].nNodes == nNodes) t->cur = &t->shape[i];
  if (t->cur == NULL) {
    snprintf(msg, sizeof msg, "GIN: plan has no rules for nRanks=%zu nNodes=%zu (commId 0x%llx); NCCL tunes this communicator",
             nRanks, nNodes, (unsigned long long)commId);
    gin_log(logFn, GIN_LOG_INFO, GIN_FLAG_INIT | GIN_FLAG_TUNING, msg);
    free(t);
    *rc = ginNcclSuccess;
    return 1;
  }
  *context = t;
  *rc = ginNcclSuccess;
  return 1;
}

/* gin_init is the body of every version's init. */
static int gin_init(size_t nRanks, size_t nNodes, uint64_t commId, gin_logger_t logFn, void **context) {
  if (context == NULL) return ginNcclSuccess;
  *context = NULL;
  if (!gin_env_is("NCCL_GIN_ENABLED", "1")) return ginNcclSuccess; /* stand aside silently */

  /* The agent path is C only: safe in a child that forked without exec too. */
  int rc0;
  if (gin_init_agent(nRanks, nNodes, commId, logFn, context, &rc0)) return rc0;

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
