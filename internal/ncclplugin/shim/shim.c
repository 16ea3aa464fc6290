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
/* A choice on the wire (table version 2): i8 algo, i8 proto, u8 flags,
 * i16 channels, u32 min and max NCCL version; version 1's cell: i8 algo,
 * i8 proto, i16 channels. */
#define GIN_CHOICE_BYTES 13
#define GIN_V1_SHAPE_BYTES (8 + GIN_NUM_COLLS * GIN_BUCKETS * 4)
#define GIN_SHAPE_MAX_BYTES (8 + GIN_NUM_COLLS * GIN_BUCKETS * (1 + GIN_MAX_CHOICES * GIN_CHOICE_BYTES))
#define GIN_TABLE_MAX (4 + 3 + 2 + GIN_MAX_ID + 2 + GIN_MAX_ID + GIN_MAX_SHAPES * GIN_SHAPE_MAX_BYTES + 8)

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
  if (memcmp(b, "GINT", 4) != 0 || (b[4] != 1 && b[4] != 2) || b[5] > GIN_MAX_SHAPES) {
    snprintf(err, errlen, "not a GIN table of version 1 or 2");
    return NULL;
  }
  int v1 = b[4] == 1;
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
  if (v1 && n - 8 - off != (size_t)nShapes * GIN_V1_SHAPE_BYTES) goto truncated;
  gin_table *t = (gin_table *)calloc(1, sizeof *t);
  if (t == NULL) {
    snprintf(err, errlen, "out of memory for the decision table");
    return NULL;
  }
  size_t end = n - 8;
  t->nShapes = nShapes;
  for (int s = 0; s < nShapes; s++) {
    gin_shape *sh = &t->shape[s];
    if (off + 8 > end) goto truncated_free;
    sh->nRanks = gin_be32(b + off);
    sh->nNodes = gin_be32(b + off + 4);
    off += 8;
    for (int c = 0; c < GIN_NUM_COLLS; c++)
      for (int k = 0; k < GIN_BUCKETS; k++) {
        gin_cell *cell = &sh->cell[c][k];
        if (v1) {
          gin_choice one = {(int8_t)b[off], (int8_t)b[off + 1], 0, (int16_t)gin_be16(b + off + 2)};
          off += 4;
          if (one.algo < -1 || one.algo >= GIN_MAX_ALGOS || one.proto < -1 || one.proto >= GIN_MAX_PROTOS || one.channels < 0)
            goto range_free;
          if (one.algo < 0 || one.proto < 0) one.algo = one.proto = -1;
          if (one.algo >= 0 || one.channels > 0) cell->n = 1, cell->c[0] = one;
          continue;
        }
        if (off + 1 > end || b[off] > GIN_MAX_CHOICES || off + 1 + (size_t)b[off] * GIN_CHOICE_BYTES > end) goto truncated_free;
        cell->n = b[off++];
        for (int i = 0; i < cell->n; i++, off += GIN_CHOICE_BYTES) {
          gin_choice ch = {(int8_t)b[off], (int8_t)b[off + 1], b[off + 2], (int16_t)gin_be16(b + off + 3)};
          gin_versions v = {gin_be32(b + off + 5), gin_be32(b + off + 9)};
          if (ch.algo < -1 || ch.algo >= GIN_MAX_ALGOS || ch.proto < -1 || ch.proto >= GIN_MAX_PROTOS || ch.channels < 0 ||
              (ch.flags & ~GIN_CHOICE_IF_OFFERED) != 0 || (ch.algo < 0 && (ch.proto >= 0 || ch.flags != 0)) ||
              (ch.algo >= 0 && ch.proto < 0 && !(ch.flags & GIN_CHOICE_IF_OFFERED)) ||
              ((v.minVersion == 0) != (v.maxVersion == 0)) || v.minVersion > v.maxVersion)
            goto range_free;
          cell->c[i] = ch;
          sh->ver[c][k][i] = v;
        }
      }
  }
  if (off != end) goto truncated_free;
  return t;
range_free:
  free(t);
  snprintf(err, errlen, "table cell out of range");
  return NULL;
truncated_free:
  free(t);
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

/* ---- binding a plan to a communicator: the NCCL version and its rule ---- */

static const char *const gin_algo_names[GIN_MAX_ALGOS] = {"tree", "ring", "collnet_direct", "collnet_chain",
                                                          "nvls", "nvls_tree", "pat"};
static const char *const gin_proto_names[GIN_MAX_PROTOS] = {"ll", "ll128", "simple"};
static const char *const gin_coll_names[GIN_NUM_COLLS] = {"broadcast", "reduce", "all_gather", "reduce_scatter",
                                                          "all_reduce"};

typedef int (*gin_get_version_t)(int *version);

/* gin_nccl_version is the running NCCL's NCCL_VERSION_CODE, from NCCL's
 * own ncclGetVersion resolved in this process (the global scope, else a
 * libnccl already loaded locally, never loading one); 0 when neither has
 * it. ncclGetVersion only writes a constant, so calling it from inside
 * NCCL's communicator init is safe. */
static uint32_t gin_nccl_version(void) {
  gin_get_version_t fn = (gin_get_version_t)dlsym(RTLD_DEFAULT, "ncclGetVersion");
  void *h = NULL;
  if (fn == NULL) {
    h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL) h = dlopen("libnccl.so", RTLD_NOW | RTLD_NOLOAD);
    if (h != NULL) fn = (gin_get_version_t)dlsym(h, "ncclGetVersion");
  }
  int v = 0;
  if (fn == NULL || fn(&v) != 0 || v <= 0) v = 0;
  if (h != NULL) dlclose(h);
  return (uint32_t)v;
}

static void gin_version_name(uint32_t code, char *buf, size_t n) {
  if (code == 0) snprintf(buf, n, "unknown");
  else snprintf(buf, n, "%u.%u.%u", code / 10000, code / 100 % 100, code % 100);
}

/* gin_size_name writes bucket b's lower bound as "16G". */
static void gin_size_name(int b, char *buf, size_t n) {
  static const char unit[] = "BKMGTPE";
  snprintf(buf, n, "%llu%c", 1ULL << (b % 10), unit[b / 10]);
}

static void gin_range_name(int lo, int hi, char *buf, size_t n) {
  char a[16], z[16];
  gin_size_name(lo, a, sizeof a);
  if (hi >= GIN_BUCKETS - 1) snprintf(z, sizeof z, "inf");
  else gin_size_name(hi + 1, z, sizeof z);
  snprintf(buf, n, "%s-%s", lo == 0 ? "0" : a, z);
}

static void gin_choice_name(const gin_choice *c, char *buf, size_t n) {
  if (c->algo < 0) snprintf(buf, n, "nccl");
  else if (c->flags & GIN_CHOICE_IF_OFFERED && c->proto < 0) snprintf(buf, n, "nccl(%s)", gin_algo_names[c->algo]);
  else if (c->flags & GIN_CHOICE_IF_OFFERED) snprintf(buf, n, "nccl(%s/%s)", gin_algo_names[c->algo], gin_proto_names[c->proto]);
  else snprintf(buf, n, "%s/%s", gin_algo_names[c->algo], gin_proto_names[c->proto]);
}

/* gin_series_ok is the version rule (docs/CALIBRATION.md): a measured
 * choice applies on a running NCCL whose release series (major.minor) lies
 * from its oldest measurement's series to its newest's; any choice applies
 * where the running version is unknown. */
static int gin_series_ok(const gin_versions *v, uint32_t running) {
  if (v->minVersion == 0 || running == 0) return 1;
  uint32_t s = running / 100;
  return v->minVersion / 100 <= s && s <= v->maxVersion / 100;
}

/* gin_bind makes the communicator's context from a decoded plan whose cur
 * is set (and frees the plan): its shape's cells, with the choices the
 * version rule excludes marked GIN_CHOICE_SKIP, each such row logged once
 * with the reason. NULL (logged) when out of memory. */
static gin_comm *gin_bind(gin_table *t, uint64_t commId, gin_logger_t logFn) {
  char msg[1024], run[32], lo[32], hi[32], cn[48], rg[48];
  gin_comm *cm = (gin_comm *)calloc(1, sizeof *cm);
  if (cm == NULL) {
    gin_log(logFn, GIN_LOG_WARN, GIN_FLAG_INIT | GIN_FLAG_TUNING, "GIN: standing aside, NCCL tunes alone: out of memory for the communicator's table");
    free(t);
    return NULL;
  }
  const gin_shape *sh = t->cur;
  cm->nRanks = sh->nRanks;
  cm->nNodes = sh->nNodes;
  memcpy(cm->cell, sh->cell, sizeof cm->cell);
  cm->logFn = logFn;
  cm->commId = commId;
  cm->ncclVersion = gin_nccl_version();
  gin_version_name(cm->ncclVersion, run, sizeof run);
  int measured = 0, skipped = 0;
  for (int c = 0; c < GIN_NUM_COLLS; c++)
    for (int b = 0; b < GIN_BUCKETS;) {
      const gin_cell *cell = &sh->cell[c][b];
      int e = b;
      while (e + 1 < GIN_BUCKETS && memcmp(&sh->cell[c][e + 1], cell, sizeof *cell) == 0 &&
             memcmp(sh->ver[c][e + 1], sh->ver[c][b], sizeof sh->ver[c][b]) == 0)
        e++;
      for (int i = 0; i < cell->n; i++) {
        const gin_versions *v = &sh->ver[c][b][i];
        if (v->minVersion == 0) continue;
        measured++;
        if (gin_series_ok(v, cm->ncclVersion)) continue;
        skipped++;
        gin_choice_name(&cell->c[i], cn, sizeof cn);
        gin_version_name(v->minVersion, lo, sizeof lo);
        gin_version_name(v->maxVersion, hi, sizeof hi);
        gin_range_name(b, e, rg, sizeof rg);
        snprintf(msg, sizeof msg,
                 "GIN: commId 0x%llx %s %s: choice %d (%s) was measured on NCCL %s..%s; running %s is another release series, "
                 "so the measured override is not applied here (version rule: same major.minor series only)",
                 (unsigned long long)commId, gin_coll_names[c], rg, i + 1, cn, lo, hi, run);
        gin_log(logFn, GIN_LOG_INFO, GIN_FLAG_INIT | GIN_FLAG_TUNING, msg);
        for (int k = b; k <= e; k++) cm->cell[c][k].c[i].flags |= GIN_CHOICE_SKIP;
      }
      b = e + 1;
    }
  free(t);
  snprintf(msg, sizeof msg, "GIN: commId 0x%llx: running NCCL %s (%s); %d measured choices, %d set aside by the version rule%s",
           (unsigned long long)commId, run, cm->ncclVersion ? "ncclGetVersion" : "ncclGetVersion not found in the process",
           measured, skipped, cm->ncclVersion || measured == 0 ? "" : "; measured choices applied as planned");
  gin_log(logFn, GIN_LOG_INFO, GIN_FLAG_INIT | GIN_FLAG_TUNING, msg);
  return cm;
}

/* gin_log_resolved logs, once per communicator (at finalize), what each
 * row of its shape resolved to against NCCL's cost table: one line per run
 * of buckets with the same cell and the same resolution. */
static void gin_log_resolved(const gin_comm *cm) {
  char msg[1024], rg[48], cn[48], tried[256];
  for (int c = 0; c < GIN_NUM_COLLS; c++)
    for (int b = 0; b < GIN_BUCKETS;) {
      const gin_cell *cell = &cm->cell[c][b];
      uint8_t r = cm->resolved[c][b];
      int e = b;
      while (e + 1 < GIN_BUCKETS && cm->resolved[c][e + 1] == r && memcmp(&cm->cell[c][e + 1], cell, sizeof *cell) == 0) e++;
      if (r != 0 && cell->n > 0) {
        size_t used = 0;
        tried[0] = 0;
        int last = r == GIN_RESOLVED_NCCL ? cell->n : r - 1;
        for (int i = 0; i < last && used < sizeof tried; i++) {
          gin_choice_name(&cell->c[i], cn, sizeof cn);
          used += (size_t)snprintf(tried + used, sizeof tried - used, "%s%s%s", used ? ", " : "", cn,
                                   cell->c[i].flags & GIN_CHOICE_SKIP ? " (version rule)" : " (not offered)");
        }
        gin_range_name(b, e, rg, sizeof rg);
        if (r == GIN_RESOLVED_NCCL)
          snprintf(msg, sizeof msg, "GIN: commId 0x%llx %s %s: no choice usable (%s); NCCL's choice", (unsigned long long)cm->commId,
                   gin_coll_names[c], rg, tried);
        else {
          gin_choice_name(&cell->c[r - 1], cn, sizeof cn);
          snprintf(msg, sizeof msg, "GIN: commId 0x%llx %s %s: resolved to choice %d of %d, %s%s%s%s", (unsigned long long)cm->commId,
                   gin_coll_names[c], rg, r, cell->n, cn, tried[0] ? " (passed over: " : "", tried, tried[0] ? ")" : "");
        }
        gin_log(cm->logFn, GIN_LOG_INFO, GIN_FLAG_TUNING, msg);
      }
      b = e + 1;
    }
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
  *context = gin_bind(t, commId, logFn);
  *rc = *context == NULL && strict ? ginNcclSystemError : ginNcclSuccess;
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
  if (rc == GIN_LOAD_OK && t != NULL && t->cur != NULL) {
    *context = gin_bind(t, commId, logFn);
    return *context == NULL && gin_env_is("NCCL_GIN_STRICT", "1") ? ginNcclSystemError : ginNcclSuccess;
  }
  free(t);
  return rc == GIN_LOAD_FAIL ? ginNcclSystemError : ginNcclSuccess;
}

/* gin_cell_for returns the communicator's cell, or NULL to leave NCCL alone. */
static inline const gin_cell *gin_cell_for(const gin_comm *cm, int collType, size_t nBytes, int *bucket) {
  if (cm == NULL || collType < 0 || collType >= GIN_NUM_COLLS) return NULL;
  int b = nBytes <= 1 ? 0 : 63 - __builtin_clzll((unsigned long long)nBytes);
  *bucket = b;
  const gin_cell *c = &cm->cell[collType][b];
  return c->n > 0 ? c : NULL;
}

/* gin_record keeps what a bucket resolved to for finalize's log: a relaxed
 * store only when it changed (NCCL's cost table is the same for every call
 * of a size, so this writes once per bucket). */
static inline void gin_record(gin_comm *cm, int collType, int b, uint8_t r) {
  uint8_t *slot = &cm->resolved[collType][b];
  if (__atomic_load_n(slot, __ATOMIC_RELAXED) != r) __atomic_store_n(slot, r, __ATOMIC_RELAXED);
}

/* gin_apply walks the bucket's choices against a float[numAlgo][numProto]
 * cost table: the first usable one wins (a forcing choice writes 0.0 into
 * its cell; NCCL's choice, or NCCL's choice because NCCL offers the
 * algorithm, writes nothing), and none usable leaves NCCL's choice. It
 * never writes into a cell NCCL set to IGNORE. No allocation, lock or I/O. */
static inline void gin_apply(void *context, int collType, size_t nBytes, float **collCostTable, int numAlgo,
                             int numProto, int *nChannels) {
  gin_comm *cm = (gin_comm *)context;
  int b = 0;
  const gin_cell *c = gin_cell_for(cm, collType, nBytes, &b);
  if (c == NULL) return;
  float *t = (float *)collCostTable;
  for (int i = 0; i < c->n; i++) {
    const gin_choice *ch = &c->c[i];
    if (ch->flags & GIN_CHOICE_SKIP) continue;
    if (ch->algo >= 0) {
      if (t == NULL || ch->algo >= numAlgo || ch->proto >= numProto) continue;
      float *row = t + (size_t)ch->algo * (size_t)numProto;
      if (ch->proto < 0) { /* NCCL's choice if it offers the algorithm at all */
        int offered = 0;
        for (int p = 0; p < numProto; p++) offered |= row[p] != GIN_COST_IGNORE;
        if (!offered) continue;
      } else {
        if (row[ch->proto] == GIN_COST_IGNORE) continue; /* unsupported or disabled here */
        if (!(ch->flags & GIN_CHOICE_IF_OFFERED)) row[ch->proto] = 0.0f;
      }
    }
    if (ch->channels > 0 && nChannels != NULL) *nChannels = ch->channels;
    gin_record(cm, collType, b, (uint8_t)(i + 1));
    return;
  }
  gin_record(cm, collType, b, GIN_RESOLVED_NCCL);
}

/* ---- v2 ---- */
static int gin_init_v2(size_t nRanks, size_t nNodes, gin_logger_t logFn, void **context) {
  return gin_init(nRanks, nNodes, 0, logFn, context);
}

/* gin_v2_usable is what v2 (no cost table) can know of a cell: NCCL's
 * collNet/NVLS support flags and its applicability (Broadcast/Reduce run
 * Ring only, AllGather/ReduceScatter Ring, NVLS and CollNetDirect,
 * AllReduce all). */
static int gin_v2_usable(int collType, int a, int collNetSupport, int nvlsSupport) {
  if (a < 0 || a >= GIN_V2_NUM_ALGOS) return 0;
  if ((a == GIN_ALGO_COLLNET_DIRECT || a == GIN_ALGO_COLLNET_CHAIN) && !collNetSupport) return 0;
  if ((a == GIN_ALGO_NVLS || a == GIN_ALGO_NVLS_TREE) && !nvlsSupport) return 0;
  return collType == 4 || a == GIN_ALGO_RING ||
         ((collType == 2 || collType == 3) && (a == GIN_ALGO_NVLS || a == GIN_ALGO_COLLNET_DIRECT));
}

static int gin_get_coll_info_v2(void *context, gin_nccl_func_t collType, size_t nBytes, int collNetSupport,
                                int nvlsSupport, int numPipeOps, int *algorithm, int *protocol, int *nChannels) {
  (void)numPipeOps;
  gin_comm *cm = (gin_comm *)context;
  int b = 0;
  const gin_cell *c = gin_cell_for(cm, collType, nBytes, &b);
  if (c == NULL) return ginNcclSuccess;
  for (int i = 0; i < c->n; i++) {
    const gin_choice *ch = &c->c[i];
    if (ch->flags & GIN_CHOICE_SKIP) continue;
    if (ch->algo >= 0) {
      if (!gin_v2_usable(collType, ch->algo, collNetSupport, nvlsSupport) || ch->proto >= GIN_V2_NUM_PROTOS) continue;
      if (!(ch->flags & GIN_CHOICE_IF_OFFERED)) {
        if (algorithm == NULL || protocol == NULL) return ginNcclSuccess;
        *algorithm = ch->algo;
        *protocol = ch->proto;
      }
    }
    if (ch->channels > 0 && nChannels != NULL) *nChannels = ch->channels;
    gin_record(cm, collType, b, (uint8_t)(i + 1));
    return ginNcclSuccess;
  }
  gin_record(cm, collType, b, GIN_RESOLVED_NCCL);
  return ginNcclSuccess;
}

static int gin_finalize(void *context) {
  gin_comm *cm = (gin_comm *)context;
  if (cm != NULL) gin_log_resolved(cm);
  free(cm);
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
