// A user's C++ program against an installed zen: balanced sparse allreduce on MPI_COMM_WORLD,
// checked against the exact sum; prints the version it was built with and the one it runs.
#include <mpi.h>

#include <cstdio>
#include <vector>

#include "zen/comm/mpi.hpp"
#include "zen/schemes/scheme.hpp"
#include "zen/zen.h"

int main(int argc, char** argv) {
  zen::mpi::Environment env(&argc, &argv);
  auto comm = zen::mpi::create(MPI_COMM_WORLD);
  const int n = comm->size(), r = comm->rank();
  const uint64_t N = 1001;  // not divisible by n
  auto plan = zen::make_scheme("balanced", *comm, zen::TensorSpec{N, 1, zen::DType::F32});
  std::vector<int64_t> idx = {0, static_cast<int64_t>(N - 1), 10 + r};
  std::vector<float> val = {1.0f, 2.0f, static_cast<float>(r + 1)};
  zen::SparseView in;
  in.dense_len = N;
  in.nnz = idx.size();
  in.indices = idx.data();
  in.values = val.data();
  std::vector<float> out(N);
  plan->run_dense(in, out.data());
  int bad = 0;
  for (uint64_t i = 0; i < N; ++i) {
    float want = 0;
    if (i == 0) want += static_cast<float>(n);
    if (i == N - 1) want += 2.0f * static_cast<float>(n);
    if (i >= 10 && i < 10 + static_cast<uint64_t>(n)) want += static_cast<float>(i - 10 + 1);
    bad += out[i] != want;
  }
  int major = -1, minor = -1;
  zenGetVersion(&major, &minor);
  if (r == 0)
    std::printf("consumer_cpp: zen %s (library %d.%d), %d ranks, %d wrong\n", ZEN_VERSION_STRING, major, minor, n, bad);
  plan.reset();
  comm.reset();
  return bad == 0 && major == ZEN_VERSION_MAJOR && minor == ZEN_VERSION_MINOR ? 0 : 1;
}
