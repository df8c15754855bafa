/* A user's C program against an installed zen, built with `cc $(pkg-config --cflags --libs zen)`:
 * zen.h only, a balanced sparse allreduce on MPI_COMM_WORLD, checked against the exact sum. */
#include <mpi.h>
#include <stdio.h>

#include "zen/zen.h"

#define N 1001

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int r = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm world = MPI_COMM_WORLD;
  zenComm_t comm;
  zenSparseAllreduce_t op;
  if (zenCommInitMpi(&comm, &world) != zenSuccess ||
      zenSparseAllreduceCreate(&op, comm, "balanced", N, 1, zenFloat32, NULL) != zenSuccess) {
    fprintf(stderr, "rank %d: %s\n", r, zenGetLastError());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int64_t idx[3] = {0, N - 1, 10 + r};
  float val[3] = {1.0f, 2.0f, (float)(r + 1)};
  static float out[N];
  if (zenSparseAllreduceDense(op, 3, idx, zenInt64, val, out) != zenSuccess) {
    fprintf(stderr, "rank %d: %s\n", r, zenGetLastError());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int bad = 0;
  for (int i = 0; i < N; ++i) {
    float want = 0;
    if (i == 0) want += (float)n;
    if (i == N - 1) want += 2.0f * (float)n;
    if (i >= 10 && i < 10 + n) want += (float)(i - 10 + 1);
    bad += out[i] != want;
  }
  int major = -1, minor = -1;
  zenGetVersion(&major, &minor);
  if (r == 0) printf("consumer_c: zen %s (library %d.%d), %d ranks, %d wrong\n", ZEN_VERSION_STRING, major, minor, n, bad);
  zenSparseAllreduceDestroy(op);
  zenCommDestroy(comm);
  MPI_Finalize();
  return bad == 0 && major == ZEN_VERSION_MAJOR && minor == ZEN_VERSION_MINOR ? 0 : 1;
}
