/* The C API's communicator collectives and plan reports (zen.h, "Reports and communicator
 * collectives"), compiled as C11, on the loopback backend at n = 1..8 ranks (threads): allreduce of
 * every dtype and reduce op (exact small integers), broadcast from every root, allgather, alltoallv
 * with uneven and empty blocks, barrier, send/recv around a ring, a collective queued behind a pending
 * non-blocking call, the versioned report struct and its phases, zenCommAbort reaching every peer,
 * argument errors poisoning the communicator on every rank, and, in agreed call order, a plan's calls
 * and communicator collectives from two threads per rank interleaved differently on every rank. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capi_check.h"
#include "zen/zen.h"

#define MAXN 8
#define CNT 37 /* elements per allreduce: not divisible by 2..8 */


/* 16-bit encodings of small integers (|v| <= 2048: exact in both formats). */
static uint16_t bf16_of(float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  return (uint16_t)(u >> 16);
}
static float of_bf16(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float v;
  memcpy(&v, &u, 4);
  return v;
}
static uint16_t f16_of(int v) {
  if (v == 0) return 0;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  unsigned a = (unsigned)(v < 0 ? -v : v);
  int e = 0;
  while ((a >> e) > 1) ++e;                     /* a = 1.m * 2^e */
  unsigned mant = (a << (10 - e)) & 0x3FF;      /* e <= 10 here */
  return (uint16_t)(sign | (uint16_t)((e + 15) << 10) | (uint16_t)mant);
}
static float of_f16(uint16_t h) {
  int e = (h >> 10) & 0x1F;
  unsigned m = h & 0x3FF;
  float v = e == 0 ? (float)m / 1024.0f / 16384.0f : (1.0f + (float)m / 1024.0f);
  for (int i = 15; i < e; ++i) v *= 2.0f;
  for (int i = e; i < 15 && e != 0; ++i) v /= 2.0f;
  return (h & 0x8000) ? -v : v;
}

/* Rank r's element i: a small integer, different per rank and element. */
static int val(int r, int i) { return ((i * 5 + r * 3) % 11) - 5; }

typedef struct {
  int n, rank;
  zenComm_t c;
  pthread_barrier_t* bar;
} Job;

static void allreduce_all(const Job* j) {
  const int n = j->n, r = j->rank;
  for (int op = zenSum; op <= zenMin; ++op) {
    int want[CNT];
    for (int i = 0; i < CNT; ++i) {
      int w = val(0, i);
      for (int q = 1; q < n; ++q) {
        const int x = val(q, i);
        w = op == zenSum ? w + x : (op == zenMax ? (x > w ? x : w) : (x < w ? x : w));
      }
      want[i] = w;
    }
    float f[CNT];
    double d[CNT];
    uint16_t h[CNT], b[CNT];
    for (int i = 0; i < CNT; ++i) {
      f[i] = (float)val(r, i);
      d[i] = val(r, i);
      h[i] = f16_of(val(r, i));
      b[i] = bf16_of((float)val(r, i));
    }
    CHECK(zenCommAllreduce(j->c, f, CNT, zenFloat32, (zenReduceOp_t)op) == zenSuccess, "f32 op %d", op);
    CHECK(zenCommAllreduce(j->c, d, CNT, zenFloat64, (zenReduceOp_t)op) == zenSuccess, "f64 op %d", op);
    CHECK(zenCommAllreduce(j->c, h, CNT, zenFloat16, (zenReduceOp_t)op) == zenSuccess, "f16 op %d", op);
    CHECK(zenCommAllreduce(j->c, b, CNT, zenBfloat16, (zenReduceOp_t)op) == zenSuccess, "bf16 op %d", op);
    int wrong = 0;
    for (int i = 0; i < CNT; ++i)
      wrong += f[i] != (float)want[i] || d[i] != want[i] || of_f16(h[i]) != (float)want[i] || of_bf16(b[i]) != (float)want[i];
    CHECK(wrong == 0, "allreduce op %d n=%d rank %d: %d wrong", op, n, r, wrong);
  }
  CHECK(zenCommAllreduce(j->c, NULL, 0, zenFloat32, zenSum) == zenSuccess, "empty allreduce");
}

static void broadcast_gather_alltoall(const Job* j) {
  const int n = j->n, r = j->rank;
  for (int root = 0; root < n; ++root) {
    char buf[13];
    memset(buf, r == root ? 'a' + root : '?', sizeof buf);
    CHECK(zenCommBroadcast(j->c, buf, sizeof buf, root) == zenSuccess, "broadcast root %d", root);
    int ok = 1;
    for (size_t i = 0; i < sizeof buf; ++i) ok &= buf[i] == 'a' + root;
    CHECK(ok, "broadcast root %d n=%d rank %d", root, n, r);
  }
  int mine[3] = {r, 10 * r, 100 * r}, all[3 * MAXN];
  CHECK(zenCommAllgather(j->c, mine, sizeof mine, all) == zenSuccess, "allgather");
  int ok = 1;
  for (int q = 0; q < n; ++q) ok &= all[3 * q] == q && all[3 * q + 1] == 10 * q && all[3 * q + 2] == 100 * q;
  CHECK(ok, "allgather n=%d rank %d", n, r);
  /* Rank r sends (r + p) % 3 bytes of value 16r+p to p (some blocks empty). */
  size_t sb[MAXN], sd[MAXN], rb[MAXN], rd[MAXN];
  unsigned char sbuf[3 * MAXN], rbuf[3 * MAXN];
  size_t so = 0, ro = 0;
  for (int p = 0; p < n; ++p) {
    sb[p] = (size_t)((r + p) % 3);
    sd[p] = so;
    for (size_t k = 0; k < sb[p]; ++k) sbuf[so + k] = (unsigned char)(16 * r + p);
    so += sb[p];
    rb[p] = (size_t)((p + r) % 3);
    rd[p] = ro;
    ro += rb[p];
  }
  memset(rbuf, 0xEE, sizeof rbuf);
  CHECK(zenCommAlltoallv(j->c, sbuf, sb, sd, rbuf, rb, rd) == zenSuccess, "alltoallv");
  ok = 1;
  for (int p = 0; p < n; ++p)
    for (size_t k = 0; k < rb[p]; ++k) ok &= rbuf[rd[p] + k] == (unsigned char)(16 * p + r);
  CHECK(ok, "alltoallv n=%d rank %d", n, r);
  CHECK(zenCommBarrier(j->c) == zenSuccess, "barrier");
  /* Ring: send to the right, receive from the left (send is buffered: no deadlock). */
  if (n > 1) {
    long long token = 1000 + r, got = -1;
    CHECK(zenCommSend(j->c, &token, sizeof token, (r + 1) % n, 7) == zenSuccess, "send");
    CHECK(zenCommRecv(j->c, &got, sizeof got, (r + n - 1) % n, 7) == zenSuccess, "recv");
    CHECK(got == 1000 + (r + n - 1) % n, "ring n=%d rank %d got %lld", n, r, got);
  }
}

/* A plan's report, and a communicator collective queued behind a pending non-blocking call. */
static void report_and_order(const Job* j) {
  const int n = j->n, r = j->rank;
  enum { ROWS = 50 };
  zenSparseAllreduce_t op = NULL;
  if (zenSparseAllreduceCreate(&op, j->c, "balanced", ROWS, 1, zenFloat32, NULL) != zenSuccess) {
    CHECK(0, "create");
    return;
  }
  int64_t idx[3] = {0, ROWS - 1, (7 * r + 3) % ROWS};
  float v[3] = {1, 2, 3}, dense[ROWS];
  zenRequest_t q = NULL;
  CHECK(zenSparseAllreduceDenseStart(op, 3, idx, zenInt64, v, dense, &q) == zenSuccess, "start");
  float x[CNT];
  for (int i = 0; i < CNT; ++i) x[i] = (float)val(r, i);
  CHECK(zenCommAllreduce(j->c, x, CNT, zenFloat32, zenSum) == zenSuccess, "allreduce behind a pending call");
  CHECK(zenRequestWait(&q) == zenSuccess, "wait");
  int wrong = 0;
  for (int i = 0; i < CNT; ++i) {
    int w = 0;
    for (int p = 0; p < n; ++p) w += val(p, i);
    wrong += x[i] != (float)w;
  }
  CHECK(wrong == 0 && dense[0] == (float)n && dense[ROWS - 1] == (float)(2 * n), "results in order n=%d", n);

  zenReport_t rep;
  memset(&rep, 0, sizeof rep);
  rep.size = sizeof rep;
  CHECK(zenSparseAllreduceLastReport(op, &rep) == zenSuccess, "report");
  CHECK(rep.size == sizeof rep && strcmp(rep.scheme, "balanced") == 0 && rep.decision && rep.encoding &&
            rep.push_encoding && rep.phases > 0 && rep.seconds > 0,
        "report fields: scheme %s phases %d", rep.scheme ? rep.scheme : "(null)", rep.phases);
  CHECK(n == 1 || (rep.sent > 0 && rep.recv > 0 && rep.bound_bytes > 0), "report bytes n=%d", n);
  uint64_t ps = 0, pr = 0;
  for (int p = 0; p < rep.phases; ++p) {
    const char* name = NULL;
    uint64_t s = 0, rv = 0;
    double sec = -1;
    CHECK(zenSparseAllreduceLastPhase(op, p, &name, &s, &rv, &sec) == zenSuccess && name && *name && sec >= 0, "phase %d", p);
    ps += s;
    pr += rv;
  }
  CHECK(ps == rep.sent && pr == rep.recv, "phases add up to the totals");
  CHECK(zenSparseAllreduceLastPhase(op, rep.phases, NULL, NULL, NULL, NULL) == zenInvalidArgument, "phase out of range");
  /* An older caller's struct (up to `phases`): the fields past it are left alone. */
  unsigned char older[sizeof(zenReport_t)];
  memset(older, 0xAB, sizeof older);
  zenReport_t* o = (zenReport_t*)(void*)older;
  o->size = offsetof(zenReport_t, phases);
  CHECK(zenSparseAllreduceLastReport(op, o) == zenSuccess && o->size == offsetof(zenReport_t, phases) &&
            o->sent == rep.sent && older[offsetof(zenReport_t, phases)] == 0xAB && older[sizeof older - 1] == 0xAB,
        "older report struct");
  o->size = 4;
  CHECK(zenSparseAllreduceLastReport(op, o) == zenInvalidArgument, "report size too small");
  CHECK(zenSparseAllreduceDestroy(op) == zenSuccess, "destroy");
}

/* Abort: rank n-1 poisons the communicator; every other rank's next call fails with RemoteError
 * quoting the reason, rank n-1's own with InvalidUsage; zenCommFailed is then 1 everywhere. */
static void abort_reaches_everyone(const Job* j) {
  const int n = j->n, r = j->rank;
  float x[CNT] = {0};
  if (r == n - 1) {
    CHECK(zenCommAbort(j->c, "python: shape mismatch") == zenSuccess, "abort");
    CHECK(zenCommAllreduce(j->c, x, CNT, zenFloat32, zenSum) == zenInvalidUsage, "own call after abort");
  } else {
    const zenResult_t rc = zenCommAllreduce(j->c, x, CNT, zenFloat32, zenSum);
    CHECK(rc == zenRemoteError && strstr(zenGetLastError(), "python: shape mismatch") != NULL, "peer rc %d", (int)rc);
  }
  int failed = 0;
  CHECK(zenCommFailed(j->c, &failed) == zenSuccess && failed == 1, "failed flag n=%d rank %d", n, r);
}

/* A bad argument on rank 0 fails there (InvalidArgument) and poisons every peer (RemoteError). */
static void bad_argument_poisons(const Job* j) {
  const int r = j->rank;
  float x[CNT] = {0};
  zenResult_t rc;
  if (r == 0) {
    rc = zenCommAllreduce(j->c, x, CNT, (zenDataType_t)9, zenSum);
    CHECK(rc == zenInvalidArgument && strstr(zenGetLastError(), "unknown dtype 9") != NULL, "bad dtype rc %d", (int)rc);
  } else {
    rc = zenCommAllreduce(j->c, x, CNT, zenFloat32, zenSum);
    CHECK(rc == zenRemoteError && strstr(zenGetLastError(), "unknown dtype 9") != NULL, "peer of bad dtype rc %d", (int)rc);
  }
  rc = zenCommBarrier(j->c);
  CHECK(rc == zenInvalidUsage, "barrier on a poisoned communicator rc %d", (int)rc);
}

/* Agreed call order (zenCommSetCallOrder): per rank, one thread runs a plan's calls while another
 * runs communicator allreduces, each with a rank-dependent stagger, so every rank interleaves the two
 * streams differently. The collectives take their place in the agreed order like plan setups (the
 * same order among setups and collectives on every rank); every result must be exact. */
#define AGREED_K 12
#define AGREED_N 40 /* plan length: rows 0 and N-1 present */
typedef struct {
  const Job* j;
  zenSparseAllreduce_t op;
  int wrong;
} AgreedArg;

static void stagger(int r, int k) {
  struct timespec ts = {0, (long)(((r * 7 + k * 3) % 5) * 200000)};
  nanosleep(&ts, NULL);
}

static void* agreed_plan_calls(void* arg) {
  AgreedArg* a = (AgreedArg*)arg;
  const int n = a->j->n, r = a->j->rank;
  for (int k = 0; k < AGREED_K; ++k) {
    stagger(r, k);
    const int64_t idx[2] = {0, AGREED_N - 1};
    const float v[2] = {(float)(r + k), 1.0f};
    float out[AGREED_N];
    if (zenSparseAllreduceDense(a->op, 2, idx, zenInt64, v, out) != zenSuccess) {
      CHECK(0, "agreed plan call %d rank %d", k, r);
      a->wrong++;
      return NULL;
    }
    const float s0 = (float)(n * (n - 1) / 2 + n * k);
    a->wrong += out[0] != s0 || out[AGREED_N - 1] != (float)n || out[1] != 0.0f;
  }
  return NULL;
}

static void* agreed_collectives(void* arg) {
  AgreedArg* a = (AgreedArg*)arg;
  const int n = a->j->n, r = a->j->rank;
  for (int k = 0; k < AGREED_K; ++k) {
    stagger(r + 2, k);
    float x[CNT];
    for (int i = 0; i < CNT; ++i) x[i] = (float)val(r, i + k);
    if (zenCommAllreduce(a->j->c, x, CNT, zenFloat32, zenSum) != zenSuccess) {
      CHECK(0, "agreed allreduce %d rank %d", k, r);
      a->wrong++;
      return NULL;
    }
    for (int i = 0; i < CNT; ++i) {
      int w = 0;
      for (int q = 0; q < n; ++q) w += val(q, i + k);
      a->wrong += x[i] != (float)w;
    }
  }
  return NULL;
}

static void* run_agreed(void* arg) {
  Job* j = (Job*)arg;
  zenSparseAllreduce_t op = NULL;
  CHECK(zenSparseAllreduceCreate(&op, j->c, "allgather", AGREED_N, 1, zenFloat32, NULL) == zenSuccess, "agreed create");
  if (!op) return NULL;
  AgreedArg pa = {j, op, 0}, ca = {j, op, 0};
  pthread_t tp, tc;
  pthread_create(&tp, NULL, agreed_plan_calls, &pa);
  pthread_create(&tc, NULL, agreed_collectives, &ca);
  pthread_join(tp, NULL);
  pthread_join(tc, NULL);
  CHECK(pa.wrong == 0 && ca.wrong == 0, "agreed order n=%d rank %d: %d wrong plan values, %d wrong allreduce values",
        j->n, j->rank, pa.wrong, ca.wrong);
  CHECK(zenSparseAllreduceDestroy(op) == zenSuccess, "agreed destroy");
  return NULL;
}

static void* run_rank(void* arg) {
  Job* j = (Job*)arg;
  allreduce_all(j);
  broadcast_gather_alltoall(j);
  report_and_order(j);
  return NULL;
}

static void* run_abort(void* arg) {
  abort_reaches_everyone((Job*)arg);
  return NULL;
}
static void* run_bad(void* arg) {
  bad_argument_poisons((Job*)arg);
  return NULL;
}

static void run_n_order(int n, void* (*fn)(void*), int agreed) {
  zenComm_t c[MAXN];
  Job jobs[MAXN];
  pthread_t th[MAXN];
  if (zenCommInitLoopback(c, n) != zenSuccess) {
    CHECK(0, "loopback %d", n);
    return;
  }
  for (int r = 0; r < n; ++r) zenCommSetTimeout(c[r], 20000);
  if (agreed)
    for (int r = 0; r < n; ++r) CHECK(zenCommSetCallOrder(c[r], zenCallOrderAgreed) == zenSuccess, "agreed order");
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, (unsigned)n);
  for (int r = 0; r < n; ++r) {
    jobs[r] = (Job){n, r, c[r], &bar};
    pthread_create(&th[r], NULL, fn, &jobs[r]);
  }
  for (int r = 0; r < n; ++r) pthread_join(th[r], NULL);
  pthread_barrier_destroy(&bar);
  for (int r = 0; r < n; ++r) zenCommDestroy(c[r]);
}

static void run_n(int n, void* (*fn)(void*)) { run_n_order(n, fn, 0); }

static void single_rank_errors(void) {
  zenComm_t c;
  zenCommInitLoopback(&c, 1);
  char b[4];
  CHECK(zenCommBroadcast(c, b, sizeof b, 1) == zenInvalidArgument && strstr(zenGetLastError(), "peer 1") != NULL,
        "root outside the communicator");
  zenCommDestroy(c);
  zenCommInitLoopback(&c, 1);
  CHECK(zenCommAllreduce(c, NULL, 3, zenFloat32, zenSum) == zenInvalidArgument, "NULL buffer with count 3");
  zenCommDestroy(c);
  zenCommInitLoopback(&c, 1);
  CHECK(zenCommAllreduce(c, b, 1, zenFloat32, (zenReduceOp_t)5) == zenInvalidArgument &&
            strstr(zenGetLastError(), "unknown reduce op 5") != NULL,
        "bad op");
  zenCommDestroy(c);
  zenCommInitLoopback(&c, 1);
  CHECK(zenCommSend(c, b, 1, 0, 16384) == zenInvalidArgument && strstr(zenGetLastError(), "tag 16384") != NULL, "bad tag");
  zenCommDestroy(c);
  CHECK(zenCommAllreduce(NULL, b, 1, zenFloat32, zenSum) == zenInvalidArgument, "NULL comm");
  int f = 0;
  CHECK(zenCommFailed(NULL, &f) == zenInvalidArgument, "failed NULL");
  CHECK(zenSparseAllreduceLastReport(NULL, NULL) == zenInvalidArgument, "report NULL");
}

int main(void) {
  single_rank_errors();
  for (int n = 1; n <= MAXN; ++n) {
    run_n(n, run_rank);
    run_n_order(n, run_agreed, 1);
    if (n > 1) {
      run_n(n, run_abort);
      run_n(n, run_bad);
    }
  }
  printf("%s: %d failures (n = 1..%d)\n", capi_failures ? "FAIL" : "OK", capi_failures, MAXN);
  return capi_failures != 0;
}
