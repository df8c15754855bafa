/* Every C entry point, compiled as C11, on the loopback backend at n = 1..8 ranks (threads): every
 * scheme by name including "auto", "hierarchical" (node size, and caller-made node communicators)
 * and "hier_<scheme>"; options through the versioned struct (fields past an older caller's size keep
 * their defaults, at n = 1 and 3); average and accumulate; caller-owned sparse output with its size
 * query; the non-blocking forms, shown to return while the call is still pending (the peers of rank
 * 0 enter late) and with the caller computing meanwhile. Results must equal an independent
 * reference exactly (small integers) on every rank. */
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capi_check.h"
#include "zen/zen.h"

#define R 103 /* rows: not divisible by 2..8 */
#define D 2   /* row width */
#define NE (R * D)
#define MAXN 8
#define NNZ 4


/* Rank r's input: rows 0, R-1, (5r+2) mod R and a duplicate of row 0 (summed). */
static void input(int r, int64_t idx[NNZ], float val[NNZ * D]) {
  idx[0] = 0;
  idx[1] = R - 1;
  idx[2] = (5 * r + 2) % R;
  idx[3] = 0;
  for (int i = 0; i < NNZ * D; ++i) val[i] = (float)((i * 3 + r) % 7) - 3.0f;
}

static void reference(int n, float dense[NE]) {
  memset(dense, 0, sizeof(float) * NE);
  for (int r = 0; r < n; ++r) {
    int64_t idx[NNZ];
    float val[NNZ * D];
    input(r, idx, val);
    for (int i = 0; i < NNZ; ++i)
      for (int k = 0; k < D; ++k) dense[idx[i] * D + k] += val[i * D + k];
  }
}

static int present(int n, int64_t row) {
  for (int r = 0; r < n; ++r) {
    int64_t idx[NNZ];
    float val[NNZ * D];
    input(r, idx, val);
    for (int i = 0; i < NNZ; ++i)
      if (idx[i] == row) return 1;
  }
  return 0;
}

typedef struct {
  const char* scheme;
  int node_size;   /* hierarchical: 0 = default */
  int given_comms; /* hierarchical: pass caller-made node communicators */
  int encoding;    /* balanced / sparse_ps: push and pull encoding (0 = zenPullAuto) */
  int agreed;      /* the world communicator in agreed call order (zenCommSetCallOrder) */
} Variant;

static const Variant variants[] = {
    {"balanced", 0, 0, 0, 0},  {"dense", 0, 0, 0, 0},        {"dense_native", 0, 0, 0, 0}, {"allgather", 0, 0, 0, 0},
    {"sparcml", 0, 0, 0, 0},   {"omnireduce", 0, 0, 0, 0},   {"sparse_ps", 0, 0, 0, 0},    {"auto", 0, 0, 0, 0},
    {"hierarchical", 1, 0, 0, 0}, {"hier_allgather", -1, 0, 0, 0}, {"hierarchical", 2, 1, 0, 0}, {"hier_sparcml", 2, 0, 0, 0},
    {"balanced", 0, 0, zenPullEliasFano, 0}, {"sparse_ps", 0, 0, zenPullEliasFano, 0}, {"balanced", 0, 0, zenPullBitmap, 0},
    {"balanced", 0, 0, 0, 1}, {"auto", 0, 0, 0, 1}, {"hierarchical", 1, 0, 0, 1},
};
#define NVAR (int)(sizeof variants / sizeof variants[0])

typedef struct {
  int n, rank;
  zenComm_t world, intra, inter;
  const Variant* v;
  pthread_barrier_t* bar;
  int* go;       /* set by rank 0 once its started calls were seen pending: the peers enter then */
  int* original; /* ranks that reported the accumulate+sparse usage error themselves */
} Job;

/* Set after the first failed late-peer check: each one costs the 5 s timeout, one is evidence enough. */
static int late_check_failed = 0;

static void sleep_100us(void) {
  struct timespec ts = {0, 100000};
  nanosleep(&ts, NULL);
}

static volatile double sink;

static void check_dense(const char* what, const Job* j, const float* got, const float* want) {
  int wrong = 0;
  for (int i = 0; i < NE; ++i) wrong += got[i] != want[i];
  CHECK(wrong == 0, "%s %s n=%d rank %d: %d wrong elements", what, j->v->scheme, j->n, j->rank, wrong);
}

static void* run_rank(void* arg) {
  Job* j = (Job*)arg;
  const int n = j->n;
  int64_t idx[NNZ];
  float val[NNZ * D];
  input(j->rank, idx, val);
  float want[NE], got[NE];
  reference(n, want);
  int rows = 0;
  for (int64_t row = 0; row < R; ++row) rows += present(n, row);

  zenOptions_t o;
  CHECK(zenOptionsInit(&o) == zenSuccess, "options init");
  CHECK(o.size == sizeof(zenOptions_t) && o.hash_functions == 3 && o.validate == 1 && o.block_size == 256,
        "defaults");
  o.auto_trials = 1; /* auto: short exploration */
  o.pull = o.push = (zenPullEncoding_t)j->v->encoding;
  if (j->v->node_size > 0) o.node_size = j->v->node_size;
  if (j->v->node_size < 0) o.node_size = n;
  if (j->v->given_comms) {
    o.intra = j->intra;
    o.inter = j->inter;
  }
  zenSparseAllreduce_t op = NULL;
  if (zenSparseAllreduceCreate(&op, j->world, j->v->scheme, NE, D, zenFloat32, &o) != zenSuccess) {
    CHECK(0, "create %s n=%d", j->v->scheme, n);
    return NULL;
  }
  /* Blocking dense and sparse; the plan is reused for every call below. */
  CHECK(zenSparseAllreduceDense(op, NNZ, idx, zenInt64, val, got) == zenSuccess, "dense");
  check_dense("dense", j, got, want);
  /* The same input as a dense gradient (duplicates summed): its non-zero rows are the entries. */
  float grad[NE];
  memset(grad, 0, sizeof grad);
  for (int i = 0; i < NNZ; ++i)
    for (int c = 0; c < D; ++c) grad[idx[i] * D + c] += val[i * D + c];
  memset(got, 0xFF, sizeof got);
  CHECK(zenSparseAllreduceDenseFromDense(op, grad, got) == zenSuccess, "dense from dense");
  check_dense("dense from dense", j, got, want);
  CHECK(zenSparseAllreduceSynchronize(op) == zenSuccess, "synchronize (host plan: no-op)");
  size_t k = 0;
  CHECK(zenSparseAllreduceSparse(op, NNZ, idx, zenInt64, val, &k) == zenSuccess, "sparse");
  CHECK(k == (size_t)rows, "sparse rows %zu, want %d", k, rows);
  int64_t oi[R];
  float ov[R * D];
  size_t k2 = 0;
  CHECK(zenSparseAllreduceResultSize(op, &k2) == zenSuccess && k2 == k, "result size");
  CHECK(zenSparseAllreduceResult(op, oi, ov) == zenSuccess, "result");
  for (size_t i = 0; i < k; ++i) {
    CHECK(i == 0 || oi[i] > oi[i - 1], "ascending");
    for (int c = 0; c < D; ++c) CHECK(ov[i * D + c] == want[oi[i] * D + c], "sparse value row %lld", (long long)oi[i]);
  }
  /* Caller-owned sparse output, sized by the query. */
  size_t bound = 0;
  CHECK(zenSparseAllreduceSparseBound(op, NNZ, &bound) == zenSuccess, "bound");
  CHECK(bound == (size_t)(n * NNZ < R ? n * NNZ : R) && bound >= k, "bound %zu", bound);
  int64_t* bi = malloc(sizeof(int64_t) * bound);
  float* bv = malloc(sizeof(float) * bound * D);
  size_t k3 = 0;
  CHECK(zenSparseAllreduceSparseInto(op, NNZ, idx, zenInt64, val, bi, bv, bound, &k3) == zenSuccess, "into");
  CHECK(k3 == k && memcmp(bi, oi, k * sizeof(int64_t)) == 0 && memcmp(bv, ov, k * D * sizeof(float)) == 0, "into data");
  /* Too small: the same error on every rank, nothing written, result kept, communicator usable. */
  int64_t one_i[1] = {-7};
  zenResult_t rc = zenSparseAllreduceSparseInto(op, NNZ, idx, zenInt64, val, one_i, bv, 1, &k3);
  CHECK(rc == zenInvalidArgument && strstr(zenGetLastError(), "zenSparseAllreduceSparseBound") != NULL && k3 == k &&
            one_i[0] == -7,
        "overflow rc %d", (int)rc);
  CHECK(zenSparseAllreduceResult(op, bi, bv) == zenSuccess && memcmp(bi, oi, k * sizeof(int64_t)) == 0, "kept");
  free(bi);
  free(bv);
  /* Non-blocking: start both forms, compute meanwhile, complete with test and wait. Ranks 1..n-1
   * enter only after rank 0 has started both and seen them pending (no scheme can finish without
   * its peers): a start that ran the call itself would block rank 0 until the 5 s timeout (kept for
   * the rest of this rank's calls, which take milliseconds, so that a failure here ends them soon). */
  float got2[NE];
  zenRequest_t qd = NULL, qs = NULL;
  const int late = n > 1 && !__atomic_load_n(&late_check_failed, __ATOMIC_SEQ_CST);
  CHECK(zenCommSetTimeout(j->world, 5000) == zenSuccess, "timeout");
  if (late && j->rank != 0)
    while (!__atomic_load_n(j->go, __ATOMIC_SEQ_CST)) sleep_100us();
  CHECK(zenSparseAllreduceDenseStart(op, NNZ, idx, zenInt64, val, got2, &qd) == zenSuccess, "dense start");
  CHECK(zenSparseAllreduceSparseStart(op, NNZ, idx, zenInt64, val, &qs) == zenSuccess, "sparse start");
  int done = 0;
  if (late && j->rank == 0) {
    int pd = 1, ps = 1;
    const zenResult_t rd = zenRequestTest(&qd, &pd), rs = zenRequestTest(&qs, &ps);
    CHECK(rd == zenSuccess && rs == zenSuccess && pd == 0 && ps == 0,
          "%s n=%d: started calls finished (dense %d rc %d, sparse %d rc %d) although ranks 1..%d had not entered",
          j->v->scheme, n, pd, (int)rd, ps, (int)rs, n - 1);
    if (!(rd == zenSuccess && rs == zenSuccess && pd == 0 && ps == 0)) __atomic_store_n(&late_check_failed, 1, __ATOMIC_SEQ_CST);
  }
  double s = 0;
  for (int i = 1; i < 100000; ++i) s += sqrt((double)i);
  sink = s;
  if (late && j->rank == 0) {
    int pd = 1;
    CHECK(zenRequestTest(&qd, &pd) == zenSuccess && pd == 0, "still pending after the caller's work");
    __atomic_store_n(j->go, 1, __ATOMIC_SEQ_CST);
  }
  while (!done) CHECK(zenRequestTest(&qd, &done) == zenSuccess, "test");
  CHECK(qd == NULL, "completed request is cleared");
  check_dense("dense start", j, got2, want);
  CHECK(zenRequestWait(&qs) == zenSuccess && qs == NULL, "wait");
  CHECK(zenRequestWait(&qs) == zenSuccess, "wait on NULL request");
  CHECK(zenSparseAllreduceResultSize(op, &k2) == zenSuccess && k2 == k, "async sparse size");
  CHECK(zenSparseAllreduceDestroy(op) == zenSuccess, "destroy");
  op = NULL;

  /* Average and accumulate into a prefilled buffer: acc[i] = 1 + float(double(sum) / n). */
  if (strcmp(j->v->scheme, "auto") != 0) {
    o.average = 1;
    o.accumulate = 1;
    if (zenSparseAllreduceCreate(&op, j->world, j->v->scheme, NE, D, zenFloat32, &o) != zenSuccess) {
      CHECK(0, "create avg");  /* e.g. the communicator failed above: nothing left to test on it */
      pthread_barrier_wait(j->bar);
      return NULL;
    }
    float acc[NE], wacc[NE];
    for (int i = 0; i < NE; ++i) {
      acc[i] = 1.0f;
      wacc[i] = present(n, i / D) ? 1.0f + (float)((double)want[i] / n) : 1.0f;
    }
    /* Started and left pending while a second one queues behind it; then destroy waits for both. */
    CHECK(zenSparseAllreduceDenseStart(op, NNZ, idx, zenInt64, val, acc, &qd) == zenSuccess, "avg start");
    CHECK(zenRequestWait(&qd) == zenSuccess, "avg wait");
    check_dense("average+accumulate", j, acc, wacc);
    /* Sparse output with accumulate is a usage error: every rank fails (poisoned). Every rank has
     * completed the good calls first (a rank's error aborts its peers' calls in flight, by design). */
    pthread_barrier_wait(j->bar);
    rc = zenSparseAllreduceSparse(op, NNZ, idx, zenInt64, val, &k);
    /* A rank told by a faster peer reports zenRemoteError quoting it; some rank reports the original. */
    CHECK((rc == zenInvalidUsage || rc == zenRemoteError) && strstr(zenGetLastError(), "accumulate") != NULL,
          "accumulate+sparse rc %d", (int)rc);
    if (rc == zenInvalidUsage) __atomic_add_fetch(j->original, 1, __ATOMIC_SEQ_CST);
    CHECK(zenSparseAllreduceDestroy(op) == zenSuccess, "destroy avg");
  }
  return NULL;
}

/* Loopback sub-communicators standing for an MPI split: node g = ranks [gL, gL+L), local index l. */
static void run_n(int n, const Variant* v) {
  zenComm_t world[MAXN], intra[MAXN], inter[MAXN];
  Job jobs[MAXN];
  pthread_t th[MAXN];
  if (zenCommInitLoopback(world, n) != zenSuccess) {
    CHECK(0, "loopback %d", n);
    return;
  }
  if (v->agreed)
    for (int r = 0; r < n; ++r) CHECK(zenCommSetCallOrder(world[r], zenCallOrderAgreed) == zenSuccess, "agreed order");
  int L = v->node_size > 0 ? v->node_size : n;
  const int use_given = v->given_comms && n % L == 0;
  if (v->node_size > 0 && n % L != 0) L = 1;
  if (use_given) {
    for (int g = 0; g < n / L; ++g) zenCommInitLoopback(&intra[g * L], L);
    zenComm_t tmp[MAXN];
    for (int l = 0; l < L; ++l) {
      zenCommInitLoopback(tmp, n / L);
      for (int g = 0; g < n / L; ++g) inter[g * L + l] = tmp[g];
    }
  }
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, (unsigned)n);
  int go = 0, original = 0;
  Variant vv = *v;
  if (v->node_size > 0) vv.node_size = L;
  vv.given_comms = use_given;
  for (int r = 0; r < n; ++r) {
    jobs[r] = (Job){n, r, world[r], use_given ? intra[r] : NULL, use_given ? inter[r] : NULL, &vv, &bar, &go, &original};
    pthread_create(&th[r], NULL, run_rank, &jobs[r]);
  }
  for (int r = 0; r < n; ++r) pthread_join(th[r], NULL);
  pthread_barrier_destroy(&bar);
  if (strcmp(v->scheme, "auto") != 0)
    CHECK(original >= 1, "%s n=%d: no rank reported the accumulate+sparse usage error itself", v->scheme, n);
  for (int r = 0; r < n; ++r) {
    zenCommDestroy(world[r]);
    if (use_given) {
      zenCommDestroy(intra[r]);
      zenCommDestroy(inter[r]);
    }
  }
}

/* An older caller's struct (fields up to `threads`) whose later fields hold values that would show
 * if the library read them: hash_functions 0 (invalid: the create fails), accumulate (the result
 * would be added to the prefilled buffer, visible at any n) and average (visible for n > 1). The
 * library must use the defaults there: a plain sum overwriting the buffer. */
typedef struct {
  zenComm_t c;
  int n, rank;
} OldStructJob;

static void* old_struct_rank(void* arg) {
  OldStructJob* j = (OldStructJob*)arg;
  zenOptions_t o;
  zenOptionsInit(&o);
  o.hash_functions = 0;
  o.average = 1;
  o.accumulate = 1;
  o.size = offsetof(zenOptions_t, hash_functions);
  zenSparseAllreduce_t op = NULL;
  if (zenSparseAllreduceCreate(&op, j->c, "balanced", NE, D, zenFloat32, &o) != zenSuccess) {
    CHECK(0, "older struct n=%d: create read a field past opts->size", j->n);
    return NULL;
  }
  int64_t idx[NNZ];
  float val[NNZ * D], got[NE], want[NE];
  input(j->rank, idx, val);
  reference(j->n, want);
  for (int i = 0; i < NE; ++i) got[i] = 1.0f;
  CHECK(zenSparseAllreduceDense(op, NNZ, idx, zenInt64, val, got) == zenSuccess, "older struct call n=%d", j->n);
  int wrong = 0;
  for (int i = 0; i < NE; ++i) wrong += got[i] != want[i];
  CHECK(wrong == 0, "older struct n=%d rank %d: %d elements are not the plain sum (accumulate/average past its size used)",
        j->n, j->rank, wrong);
  zenSparseAllreduceDestroy(op);
  return NULL;
}

/* Options struct versioning (n = 1 and 3) and argument errors (one rank). */
static void options_versioning(void) {
  for (int n = 1; n <= 3; n += 2) {
    zenComm_t comms[3];
    OldStructJob jobs[3];
    pthread_t th[3];
    CHECK(zenCommInitLoopback(comms, n) == zenSuccess, "loopback %d", n);
    for (int r = 0; r < n; ++r) {
      jobs[r] = (OldStructJob){comms[r], n, r};
      pthread_create(&th[r], NULL, old_struct_rank, &jobs[r]);
    }
    for (int r = 0; r < n; ++r) pthread_join(th[r], NULL);
    for (int r = 0; r < n; ++r) zenCommDestroy(comms[r]);
  }
  zenComm_t c;
  zenSparseAllreduce_t op = NULL;
  zenOptions_t o;
  zenOptionsInit(&o);
  o.size = 0;
  zenCommInitLoopback(&c, 1);
  CHECK(zenSparseAllreduceCreate(&op, c, "balanced", NE, D, zenFloat32, &o) == zenInvalidArgument &&
            strstr(zenGetLastError(), "zenOptionsInit") != NULL,
        "size 0");
  zenCommDestroy(c);
  o.size = sizeof(zenOptions_t) + 8;
  zenCommInitLoopback(&c, 1);
  CHECK(zenSparseAllreduceCreate(&op, c, "balanced", NE, D, zenFloat32, &o) == zenUnsupported &&
            strstr(zenGetLastError(), "newer zen.h") != NULL,
        "size too large");
  zenCommDestroy(c);
  zenOptionsInit(&o);
  o.node_size = 3;
  zenCommInitLoopback(&c, 1);
  CHECK(zenSparseAllreduceCreate(&op, c, "hierarchical", NE, D, zenFloat32, &o) != zenSuccess, "node size 3 of 1 rank");
  zenCommDestroy(c);
  CHECK(zenOptionsInit(NULL) == zenInvalidArgument, "init NULL");
  zenCommInitLoopback(&c, 1);
  CHECK(zenCommSetCallOrder(c, (zenCallOrder_t)7) == zenInvalidArgument && strstr(zenGetLastError(), "unknown order") != NULL,
        "call order 7");
  CHECK(zenCommSetCallOrder(NULL, zenCallOrderAgreed) == zenInvalidArgument, "call order NULL");
  zenCommDestroy(c);
  int done = 0;
  CHECK(zenRequestTest(NULL, &done) == zenSuccess && done == 1, "test NULL");
  CHECK(strcmp(zenGetVersionString(), ZEN_VERSION_STRING) == 0, "version string");
  size_t b;
  CHECK(zenSparseAllreduceSparseBound(NULL, 1, &b) == zenInvalidArgument, "bound NULL op");
  zenComm_t dc[2];
  zenResult_t rc = zenCommInitDeviceLoopback(dc, 2, 0);
#ifndef ZEN_HAVE_CUDA
  /* The GPU entry points exist in every build and say why they cannot run. */
  CHECK(rc == zenUnsupported && strstr(zenGetLastError(), "without CUDA") != NULL, "device loopback rc %d", (int)rc);
  zenNcclUniqueId id;
  CHECK(zenNcclGetUniqueId(&id) == zenUnsupported, "nccl id");
#else
  if (rc == zenSuccess) {
    zenCommDestroy(dc[0]);
    zenCommDestroy(dc[1]);
  }
#endif
}

/* test_capi_full [options | SCHEME]: everything (ctest), only the options-struct cases, or those and
 * the variants of one scheme (scripts/mutation_check.sh runs a part). */
int main(int argc, char** argv) {
  const char* only = argc > 1 ? argv[1] : NULL;
  options_versioning();
  int ran = 0;
  if (!only || strcmp(only, "options") != 0)
    for (int n = 1; n <= MAXN; ++n)
      for (int v = 0; v < NVAR; ++v)
        if (!only || strcmp(only, variants[v].scheme) == 0) {
          run_n(n, &variants[v]);
          ++ran;
        }
  if (only && strcmp(only, "options") != 0 && ran == 0) {
    fprintf(stderr, "FAIL: no variant of scheme '%s'\n", only);
    return 1;
  }
  printf("%s: %d failures (%d variant runs, n = 1..%d%s%s)\n", capi_failures ? "FAIL" : "OK", capi_failures, ran, MAXN,
         only ? ", only " : "", only ? only : "");
  return capi_failures != 0;
}
