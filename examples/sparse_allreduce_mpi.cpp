// Minimal user program: inside an existing MPI job, sum an embedding-style row-sparse gradient
// with zen's balanced scheme and compare the result and the bytes with a dense allreduce.
//   mpirun -np 4 build/bin/example_sparse_allreduce_mpi
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "zen/comm/mpi.hpp"
#include "zen/schemes/scheme.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);  // the user's MPI job; zen never re-initializes it
  int status = 0;
  {
    auto comm = zen::mpi::create(MPI_COMM_WORLD);
    const int rank = comm->rank();
    const uint64_t rows = 100003, D = 16;  // a 100003 x 16 embedding table
    // Each rank touches 500 rows, skewed towards frequent (low) rows, as a batch of text would.
    std::mt19937_64 rng(1234 + static_cast<uint64_t>(rank));
    std::vector<int64_t> idx;
    std::vector<float> val;
    for (int i = 0; i < 500; ++i) {
      idx.push_back(static_cast<int64_t>(std::min<uint64_t>(rows - 1, static_cast<uint64_t>(std::exp(std::uniform_real_distribution<double>(0, std::log(rows))(rng))))));
      for (uint64_t c = 0; c < D; ++c) val.push_back(static_cast<float>(static_cast<int>(rng() % 5) - 2));
    }
    zen::SparseView grad;
    grad.dense_len = rows * D;
    grad.row_width = D;
    grad.nnz = idx.size();
    grad.indices = idx.data();
    grad.values = val.data();

    auto balanced = zen::make_scheme("balanced", *comm, {rows * D, D, zen::DType::F32});
    std::vector<float> sum(rows * D);
    balanced->run_dense(grad, sum.data());
    const auto rep = balanced->report();

    // Reference: dense allreduce of the scattered gradient.
    std::vector<float> dense(rows * D, 0.0f);
    zen::scatter_add(grad, dense.data());
    auto before = comm->stats().total_sent();
    comm->allreduce(dense.data(), dense.size(), zen::DType::F32);
    auto dense_sent = comm->stats().total_sent() - before;
    size_t wrong = 0;
    for (size_t i = 0; i < dense.size(); ++i) wrong += dense[i] != sum[i];
    if (rank == 0)
      std::printf("balanced: %zu result rows, %llu bytes sent by rank 0 (dense allreduce: %llu), push imbalance %.3f, "
                  "pull %s, wrong elements: %zu\n",
                  static_cast<size_t>(rep.result_nnz), static_cast<unsigned long long>(rep.sent),
                  static_cast<unsigned long long>(dense_sent), rep.push_imbalance, rep.encoding.c_str(), wrong);
    int bad = wrong != 0, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any && rank == 0) std::printf("MISMATCH\n");
    status = any;
  }
  MPI_Finalize();
  return status;
}
