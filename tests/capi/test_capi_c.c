/* Compiled as C: the public header must be plain C. Runs a 3-rank loopback balanced allreduce with
 * pthreads and checks the dense result exactly; also checks an error code and message. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "zen/zen.h"

#define N 103
#define RANKS 3

static zenComm_t comms[RANKS];
static int failures = 0;
static pthread_barrier_t all_done;

static void* worker(void* arg) {
  int r = (int)(size_t)arg;
  zenSparseAllreduce_t op;
  if (zenSparseAllreduceCreate(&op, comms[r], "balanced", N, 1, zenFloat32, NULL) != zenSuccess) {
    fprintf(stderr, "create: %s\n", zenGetLastError());
    __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
    return NULL;
  }
  int32_t idx[3] = {0, N - 1, 7 * r};
  float val[3] = {1.0f, 2.0f, (float)r};
  float out[N];
  if (zenSparseAllreduceDense(op, 3, idx, zenInt32, val, out) != zenSuccess) {
    fprintf(stderr, "dense: %s\n", zenGetLastError());
    __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
  } else {
    for (int i = 0; i < N; ++i) {
      float want = 0;
      if (i == 0) want += RANKS;
      if (i == N - 1) want += 2 * RANKS;
      for (int p = 0; p < RANKS; ++p)
        if (i == 7 * p) want += (float)p;
      if (out[i] != want) __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
    }
  }
  size_t k = 0;
  if (zenSparseAllreduceSparse(op, 3, idx, zenInt32, val, &k) != zenSuccess || k != 4)
    __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST); /* rows 0, 7, 14, N-1 */
  int64_t oi[4];
  float ov[4];
  if (zenSparseAllreduceResult(op, oi, ov) != zenSuccess || oi[0] != 0 || oi[3] != N - 1 || ov[0] != RANKS)
    __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
  /* Every rank has finished the good calls before any rank makes the bad one: a rank's error aborts
   * the collectives still in flight on its peers at once (that is the design), so without this
   * barrier a slower rank's last good call could fail with zenRemoteError. */
  pthread_barrier_wait(&all_done);
  /* Bad input: an out-of-range index is an error with a message naming rank and value. */
  int32_t bad[1] = {N};
  zenResult_t rc = zenSparseAllreduceDense(op, 1, bad, zenInt32, val, out);
  if (rc != zenInvalidArgument || strstr(zenGetLastError(), "index 103") == NULL) {
    fprintf(stderr, "expected invalid argument, got %d: %s\n", (int)rc, zenGetLastError());
    __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
  }
  zenSparseAllreduceDestroy(op);
  return NULL;
}

int main(void) {
  if (zenCommInitLoopback(comms, RANKS) != zenSuccess) return 1;
  pthread_t th[RANKS];
  pthread_barrier_init(&all_done, NULL, RANKS);
  for (int r = 0; r < RANKS; ++r) pthread_create(&th[r], NULL, worker, (void*)(size_t)r);
  for (int r = 0; r < RANKS; ++r) pthread_join(th[r], NULL);
  for (int r = 0; r < RANKS; ++r) zenCommDestroy(comms[r]);
  pthread_barrier_destroy(&all_done);
  if (zenCommInitMpi(NULL, NULL) != zenInvalidArgument) ++failures;
  printf("%s: %d failures\n", failures ? "FAIL" : "OK", failures);
  return failures != 0;
}
