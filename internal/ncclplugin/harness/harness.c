/*
 * harness.c: loads an NCCL tuner plugin the way NCCL does and exercises it.
 *
 *   harness [options] LIB NRANKS NNODES
 *     --version N        use ncclTunerPlugin_vN only (default: v6, v5, v4, v3, v2, first found)
 *     --iters N          calls per timing run (default 1000000; 0 skips timing)
 *     --fork             run everything after dlopen in a forked child (no exec)
 *     --nvls on|off      NVLS and NVLSTree usable (on: NVLS for all_gather, reduce_scatter and all_reduce on one node,
 *                        NVLSTree for a multi-node all_reduce, Simple only) or unusable (off: as
 *                        NCCL_NVLS_ENABLE=0); default: NVLS restricted, NVLSTree usable across nodes
 *     --nccl-version N   the NCCL_VERSION_CODE this process's ncclGetVersion answers (exported, as
 *                        libnccl's is; default: it answers ncclInvalidArgument, "unknown")
 *     --baseline-csv F   also time a pure-C reimplementation of NVIDIA's example tuner
 *                        (per-call first-match scan over the CSV rules in F); LIB may be "-"
 *
 * dlopen(RTLD_NOW|RTLD_LOCAL), init with NCCL-shaped arguments (v5/v6 get a
 * ncclTunerConstants filled with NCCL 2.30's defaults), a getCollInfo sweep
 * over collectives 0..4 x sizes 2^0..2^34 with a cost table filled like NCCL
 * fills it (all -1, then the usable cells a positive time), one DECISION
 * line per call, a SUMMARY, a HOTPATH timing, finalize and dlclose.
 *
 * Exit: 0 ok, 1 writes into -1 cells, 2 init failed, 3 load failed, 4 usage.
 * Build: cc -O2 -rdynamic -o harness harness.c -ldl (-rdynamic: the plugin finds ncclGetVersion)
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../shim/tuner.h"

#define NCOLL 5
#define NSIZES 35
#define MAXA 7
#define MAXP 3

static char plan_hash[128] = "none";

static void harness_logger(int level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  const char *lv = level == GIN_LOG_WARN ? "WARN" : level == GIN_LOG_INFO ? "INFO" : "TRACE";
  if (level == GIN_LOG_WARN)
    printf("NCCL %s %s:%d %s [flags=0x%lx]\n", lv, file, line, buf, flags);
  else
    printf("NCCL %s %s [flags=0x%lx]\n", lv, buf, flags);
  if (strncmp(buf, "GIN: plan ", 10) == 0) {
    /* Only "GIN: plan <64 hex digits> for job ...": other "GIN: plan ..." lines are not a hash. */
    char tok[128] = "";
    if (sscanf(buf + 10, "%127s", tok) == 1 && strlen(tok) == 64 && strspn(tok, "0123456789abcdef") == 64)
      memcpy(plan_hash, tok, sizeof tok);
  }
  fflush(stdout);
}

/* ---- the emulated NCCL cost table ---- */
static int g_nranks, g_nnodes, g_num_algo = MAXA, g_num_proto = MAXP;
static int g_version;
static int g_nvls = -1; /* -1 default emulation, 0 NVLS off, 1 NVLS on */
static int g_nccl_code;

/* ncclGetVersion as libnccl exports it; the plugin resolves it in the process. */
__attribute__((visibility("default"))) int ncclGetVersion(int *version) {
  if (version == NULL || g_nccl_code <= 0) return 4; /* ncclInvalidArgument */
  *version = g_nccl_code;
  return 0;
}

/* usable reports whether NCCL would fill (algo, proto) for coll. It
 * emulates NCCL_ALGO=^NVLS and no CollNet: NVLS and CollNet cells stay -1.
 * v2 gets no table, only collNetSupport=0 and nvlsSupport=0: what it cannot
 * be told (the Tree/LL128 restriction) is not held against it. */
static int usable(int coll, int a, int p) {
  if (a >= g_num_algo || p >= g_num_proto) return 0;
  if (g_version == 2) return a == GIN_ALGO_RING || (a == GIN_ALGO_TREE && coll == 4);
  switch (a) {
  case GIN_ALGO_RING: return 1;
  case GIN_ALGO_TREE: return coll == 4 && p != GIN_PROTO_LL128; /* Tree/LL128 disabled (NCCL_PROTO emulation) */
  case GIN_ALGO_NVLS_TREE: return g_nvls != 0 && coll == 4 && g_nnodes > 1 && p == GIN_PROTO_SIMPLE;
  case GIN_ALGO_NVLS: return g_nvls == 1 && coll >= 2 && g_nnodes == 1 && p == GIN_PROTO_SIMPLE; /* across nodes only with CollNet */
  case GIN_ALGO_PAT: return (coll == 2 || coll == 3) && g_nranks == g_nnodes && g_nnodes > 1 && p == GIN_PROTO_SIMPLE;
  default: return 0; /* CollNet (not enabled), NVLS (restricted) */
  }
}

static void fill_table(float *t, int coll, size_t nBytes) {
  static const double lat[MAXA][MAXP] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0},
                                         {0, 0, 0},        {0, 0, 0},        {8.0, 8.0, 8.0}};
  static const double bw[MAXA][MAXP] = {{15, 30, 70}, {20, 60, 90}, {0, 0, 0}, {0, 0, 0},
                                        {0, 0, 120},  {0, 0, 100},  {0, 0, 40}};
  for (int i = 0; i < g_num_algo * g_num_proto; i++) t[i] = GIN_COST_IGNORE;
  for (int a = 0; a < g_num_algo; a++)
    for (int p = 0; p < g_num_proto; p++)
      if (usable(coll, a, p)) t[a * g_num_proto + p] = (float)(lat[a][p] + 1.0 + (double)nBytes / (1000.0 * bw[a][p]));
}

/* nccl_pick is topoGetAlgoInfo's choice: the smallest cell >= 0, ties to the
 * lower algo, then the lower proto. */
static void nccl_pick(const float *t, int *algo, int *proto) {
  *algo = *proto = -1;
  float best = 0;
  for (int a = 0; a < g_num_algo; a++)
    for (int p = 0; p < g_num_proto; p++) {
      float v = t[a * g_num_proto + p];
      if (v < 0) continue;
      if (*algo < 0 || v < best) best = v, *algo = a, *proto = p;
    }
}

static uint64_t fnv_add(uint64_t h, const char *s) {
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* ---- the plugin under test, whatever its version ---- */
static const void *g_sym;
static void *g_ctx;

static int call_init(void) {
  gin_tuner_constants_t k;
  gin_nvl_domain_info_t nvl = {g_nnodes, g_nranks / g_nnodes, g_nranks / g_nnodes};
  static const double base[7][3] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {8.0, 8.0, 8.0}};
  static const double hw[3][7][3] = {
      {{.6, 1.25, 4.0}, {.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 25}, {0, 0, 25}, {0, 0, 4.0}},
      {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}, {0, 0, 4.0}},
      {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 20.9}, {0, 0, 14}}};
  static const double llMax[4][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
  static const double ringLL128[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}, {40, 40, 40}};
  static const double treeLL128[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
  static const double tree[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
  static const double nvlsTree[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0.0, 57.7, 45.5}, {0.0, 96.0, 80.0}};
  memcpy(k.baseLatencies, base, sizeof base);
  memcpy(k.hwLatencies, hw, sizeof hw);
  memcpy(k.llMaxBws, llMax, sizeof llMax);
  memcpy(k.perChMaxRingLL128Bws, ringLL128, sizeof ringLL128);
  memcpy(k.perChMaxTreeLL128Bws, treeLL128, sizeof treeLL128);
  memcpy(k.perChMaxTreeBws, tree, sizeof tree);
  memcpy(k.perChMaxNVLSTreeBws, nvlsTree, sizeof nvlsTree);
  uint64_t commId = 0x5eed0fc0ffee1234ULL;
  switch (g_version) {
  case 6: return ((const gin_tuner_v6_t *)g_sym)->init(&g_ctx, commId, g_nranks, g_nnodes, harness_logger, &nvl, &k);
  case 5: return ((const gin_tuner_v5_t *)g_sym)->init(&g_ctx, commId, g_nranks, g_nnodes, harness_logger, &nvl, &k);
  case 4: return ((const gin_tuner_v4_t *)g_sym)->init(g_nranks, g_nnodes, harness_logger, &g_ctx);
  case 3: return ((const gin_tuner_v3_t *)g_sym)->init(g_nranks, g_nnodes, harness_logger, &g_ctx);
  default: return ((const gin_tuner_v2_t *)g_sym)->init(g_nranks, g_nnodes, harness_logger, &g_ctx);
  }
}

static int call_finalize(void) {
  switch (g_version) {
  case 6: return ((const gin_tuner_v6_t *)g_sym)->finalize(g_ctx);
  case 5: return ((const gin_tuner_v5_t *)g_sym)->finalize(g_ctx);
  case 4: return ((const gin_tuner_v4_t *)g_sym)->destroy(g_ctx);
  case 3: return ((const gin_tuner_v3_t *)g_sym)->destroy(g_ctx);
  default: return ((const gin_tuner_v2_t *)g_sym)->destroy(g_ctx);
  }
}

/* call_get runs one getCollInfo. For v2 (no cost table) the plugin's
 * algorithm/protocol come back in a2 and p2 (-1 when untouched). */
static int call_get(int coll, size_t nBytes, float *t, int *nch, int *a2, int *p2) {
  switch (g_version) {
  case 6: return ((const gin_tuner_v6_t *)g_sym)->getCollInfo(g_ctx, coll, nBytes, 1, (float **)t, g_num_algo, g_num_proto, 0, nch);
  case 5: return ((const gin_tuner_v5_t *)g_sym)->getCollInfo(g_ctx, coll, nBytes, 1, (float **)t, g_num_algo, g_num_proto, 0, nch);
  case 4: return ((const gin_tuner_v4_t *)g_sym)->getCollInfo(g_ctx, coll, nBytes, 1, (float **)t, g_num_algo, g_num_proto, 0, nch);
  case 3: return ((const gin_tuner_v3_t *)g_sym)->getCollInfo(g_ctx, coll, nBytes, 1, (float **)t, g_num_algo, g_num_proto, nch);
  default:
    *a2 = *p2 = -1;
    /* v2 gets no table: NVLS is restricted and CollNet is off in this emulation. */
    return ((const gin_tuner_v2_t *)g_sym)->getCollInfo(g_ctx, coll, nBytes, 0, 0, 1, a2, p2, nch);
  }
}

/* ---- the baseline: NVIDIA's example tuner's CSV scan, reimplemented ---- */
typedef struct {
  int coll;
  unsigned long long minB, maxB;
  int algo, proto, channels, nNodes, nRanks, pipeOps, regBuff;
} csv_rule;
static csv_rule *g_rules;
static int g_nrules;

static int name_index(const char *s, const char *const *names, int n, int dflt) {
  for (int i = 0; i < n; i++)
    if (strcmp(s, names[i]) == 0) return i;
  return dflt;
}

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t') s++;
  char *e = s + strlen(s);
  while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r')) *--e = 0;
  return s;
}

static int load_csv(const char *path) {
  static const char *const colls[] = {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"};
  static const char *const algos[] = {"tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"};
  static const char *const protos[] = {"ll", "ll128", "simple"};
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  char line[512];
  int cap = 0;
  while (fgets(line, sizeof line, f)) {
    char *s = trim(line);
    if (*s == 0 || *s == '#') continue;
    char *field[10];
    int n = 0;
    for (char *tok = strtok(s, ","); tok && n < 10; tok = strtok(NULL, ",")) field[n++] = trim(tok);
    if (n < 8) continue;
    int c = name_index(field[0], colls, 5, -1);
    if (c < 0) continue;
    if (g_nrules == cap) {
      cap = cap ? cap * 2 : 64;
      g_rules = realloc(g_rules, cap * sizeof *g_rules);
    }
    csv_rule *r = &g_rules[g_nrules++];
    r->coll = c;
    r->minB = strtoull(field[1], NULL, 10);
    r->maxB = strtoull(field[2], NULL, 10);
    r->algo = name_index(field[3], algos, 7, GIN_ALGO_RING);
    r->proto = name_index(field[4], protos, 3, GIN_PROTO_SIMPLE);
    r->channels = atoi(field[5]);
    r->nNodes = atoi(field[6]);
    r->nRanks = atoi(field[7]);
    r->pipeOps = n > 8 ? atoi(field[8]) : -1;
    r->regBuff = n > 9 ? atoi(field[9]) : -1;
  }
  fclose(f);
  return g_nrules;
}

static int baseline_get(void *ctx, int coll, size_t nBytes, int numPipeOps, float **table, int numAlgo, int numProto,
                        int regBuff, int *nChannels) {
  (void)ctx;
  float *t = (float *)table;
  *nChannels = 1; /* as the example does, even without a match */
  for (int i = 0; i < g_nrules; i++) {
    const csv_rule *r = &g_rules[i];
    if (r->coll != coll || nBytes < r->minB || nBytes > r->maxB) continue;
    if (r->nNodes != -1 && r->nNodes != g_nnodes) continue;
    if (r->nRanks != -1 && r->nRanks != g_nranks) continue;
    if (r->pipeOps != -1 && r->pipeOps != numPipeOps) continue;
    if (r->regBuff != -1 && r->regBuff != regBuff) continue;
    if (r->algo < numAlgo && r->proto < numProto && t[r->algo * numProto + r->proto] != GIN_COST_IGNORE) {
      t[r->algo * numProto + r->proto] = 0.0f;
      if (r->channels != -1) *nChannels = r->channels;
    }
    return 0;
  }
  return 0;
}

/* time_calls: median ns/call over 11 runs of iters calls. */
static double time_calls(int baseline, long iters) {
  enum { NPAT = 1024 };
  static int pc[NPAT];
  static size_t pb[NPAT];
  static float tabs[NPAT][MAXA * MAXP];
  for (int i = 0; i < NPAT; i++) {
    pc[i] = i % NCOLL;
    pb[i] = (size_t)1 << ((i * 7) % NSIZES);
    fill_table(tabs[i], pc[i], pb[i]);
  }
  double runs[11];
  for (int r = 0; r < 11; r++) {
    double t0 = now_ns();
    for (long i = 0; i < iters; i++) {
      int k = (int)(i & (NPAT - 1)), nch = 0, a2, p2;
      if (baseline)
        baseline_get(NULL, pc[k], pb[k], 1, (float **)tabs[k], g_num_algo, g_num_proto, 0, &nch);
      else
        call_get(pc[k], pb[k], tabs[k], &nch, &a2, &p2);
    }
    runs[r] = (now_ns() - t0) / (double)iters;
  }
  qsort(runs, 11, sizeof runs[0], cmp_double);
  return runs[5];
}

/* rss_kb is this process's resident set (VmRSS), kB; -1 when unknown. */
static long rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  if (f == NULL) return -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) break;
  fclose(f);
  return kb;
}

/* threads is this process's thread count (Threads:); -1 when unknown. */
static long threads(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long n = -1;
  if (f == NULL) return -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "Threads: %ld", &n) == 1) break;
  fclose(f);
  return n;
}

/* footprint prints the process's threads and resident set at a stage. */
static void footprint(const char *stage) {
  printf("FOOTPRINT stage=%s threads=%ld rss_kb=%ld\n", stage, threads(), rss_kb());
  fflush(stdout);
}

int main(int argc, char **argv) {
  const char *lib = NULL, *csv = NULL;
  int want = 0, npos = 0, do_fork = 0;
  long iters = 1000000;
  char *pos[3];
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--version") == 0 && i + 1 < argc) want = atoi(argv[++i]);
    else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) iters = atol(argv[++i]);
    else if (strcmp(argv[i], "--fork") == 0) do_fork = 1;
    else if (strcmp(argv[i], "--nvls") == 0 && i + 1 < argc) {
      i++;
      g_nvls = strcmp(argv[i], "on") == 0 ? 1 : strcmp(argv[i], "off") == 0 ? 0 : -2;
      if (g_nvls == -2) npos = 99;
    } else if (strcmp(argv[i], "--nccl-version") == 0 && i + 1 < argc) g_nccl_code = atoi(argv[++i]);
    else if (strcmp(argv[i], "--baseline-csv") == 0 && i + 1 < argc) csv = argv[++i];
    else if (npos < 3) pos[npos++] = argv[i];
    else npos = 99;
  }
  if (npos != 3) {
    fprintf(stderr, "usage: harness [--version N] [--iters N] [--nvls on|off] [--nccl-version N] [--baseline-csv FILE] LIB|- NRANKS NNODES\n");
    return 4;
  }
  lib = pos[0];
  g_nranks = atoi(pos[1]);
  g_nnodes = atoi(pos[2]);
  if (g_nranks <= 0 || g_nnodes <= 0 || g_nranks % g_nnodes) {
    fprintf(stderr, "harness: bad NRANKS/NNODES\n");
    return 4;
  }
  int rc_exit = 0;

  if (strcmp(lib, "-") != 0) {
    long rss0 = rss_kb();
    footprint("before_dlopen");
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
      printf("DLOPEN_FAIL %s\n", dlerror());
      return 3;
    }
    footprint("after_dlopen");
    if (do_fork) {
      fflush(stdout);
      pid_t child = fork();
      if (child < 0) return 3;
      if (child > 0) {
        int st = 0;
        waitpid(child, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 5;
      }
      printf("FORKED child\n");
    }
    for (int v = 6; v >= 2; v--) {
      char name[32];
      snprintf(name, sizeof name, "ncclTunerPlugin_v%d", v);
      const void *s = dlsym(h, name);
      printf("SYMBOL %s %s\n", name, s ? "present" : "absent");
      if (s && g_sym == NULL && (want == 0 || want == v)) g_sym = s, g_version = v;
    }
    if (g_sym == NULL) {
      printf("NO_SYMBOL\n");
      return 3;
    }
    /* NCCL 2.22 (v3 era) and 2.21 (v2) had 6 algorithms. */
    g_num_algo = g_version <= 3 ? GIN_V2_NUM_ALGOS : MAXA;
    g_num_proto = MAXP;
    printf("USING v%d name=%s numAlgo=%d numProto=%d\n", g_version, *(const char *const *)g_sym, g_num_algo, g_num_proto);
    printf("NCCL_VERSION_CODE %d\n", g_nccl_code > 0 ? g_nccl_code : 0);
    fflush(stdout);
    double t0 = now_ns();
    int rc = call_init();
    printf("INIT rc=%d ctx=%s ms=%.3f\n", rc, g_ctx ? "set" : "null", (now_ns() - t0) / 1e6);
    footprint("after_init");
    if (rc != 0) {
      dlclose(h);
      return 2;
    }
    for (int c = 0; c < NCOLL; c++) {
      unsigned bits = 0;
      for (int a = 0; a < g_num_algo; a++)
        for (int p = 0; p < g_num_proto; p++)
          if (usable(c, a, p)) bits |= 1u << (a * MAXP + p);
      printf("MASK coll=%d bits=%u\n", c, bits);
    }
    uint64_t hash = 1469598103934665603ULL;
    int violations = 0, errors = 0;
    for (int c = 0; c < NCOLL; c++)
      for (int s = 0; s < NSIZES; s++) {
        size_t nBytes = (size_t)1 << s;
        float t[MAXA * MAXP], before[MAXA * MAXP];
        fill_table(t, c, nBytes);
        memcpy(before, t, sizeof t);
        int nch = 0, a2 = -1, p2 = -1, fa = -1, fp = -1, algo, proto;
        if (call_get(c, nBytes, t, &nch, &a2, &p2) != 0) errors++;
        if (g_version == 2) {
          if (a2 >= 0) {
            fa = a2, fp = p2;
            if (a2 >= g_num_algo || p2 < 0 || p2 >= g_num_proto || !usable(c, a2, p2)) violations++;
          }
        } else {
          for (int i = 0; i < g_num_algo * g_num_proto; i++) {
            if (t[i] == before[i]) continue;
            if (before[i] == GIN_COST_IGNORE) violations++;
            if (t[i] == 0.0f) fa = i / g_num_proto, fp = i % g_num_proto;
          }
        }
        if (fa >= 0) algo = fa, proto = fp;
        else nccl_pick(t, &algo, &proto);
        char line[160];
        snprintf(line, sizeof line, "DECISION coll=%d bytes=%zu algo=%d proto=%d nch=%d forced=%d/%d", c, nBytes, algo,
                 proto, nch, fa, fp);
        puts(line);
        hash = fnv_add(hash, line);
      }
    printf("SUMMARY version=%d decisions_hash=%016llx violations=%d errors=%d plan_hash=%s\n", g_version,
           (unsigned long long)hash, violations, errors, plan_hash);
    if (iters > 0) printf("HOTPATH median_ns=%.2f\n", time_calls(0, iters));
    printf("RSS before_dlopen_kb=%ld after_init_and_calls_kb=%ld\n", rss0, rss_kb());
    printf("FINALIZE rc=%d\n", call_finalize());
    printf("DLCLOSE rc=%d\n", dlclose(h));
    if (violations || errors) rc_exit = 1;
  }
  if (csv != NULL) {
    if (load_csv(csv) < 0) {
      printf("BASELINE_FAIL cannot read %s\n", csv);
      return 4;
    }
    if (strcmp(lib, "-") == 0) g_num_algo = MAXA, g_num_proto = MAXP;
    printf("BASELINE rules=%d median_ns=%.2f\n", g_nrules, time_calls(1, iters > 0 ? iters : 1000000));
  }
  fflush(stdout);
  return rc_exit;
}
