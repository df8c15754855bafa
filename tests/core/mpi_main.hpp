#pragma once
// gtest main for MPI test binaries: only rank 0 prints, and every rank exits with the worst result.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <memory>

#include "zen/comm/mpi.hpp"

namespace zen::test {
inline std::unique_ptr<Communicator>& world_ptr() {
  static std::unique_ptr<Communicator> c;
  return c;
}
inline Communicator& world() { return *world_ptr(); }
}  // namespace zen::test

namespace zen::test {
/// On ranks other than 0: print only failed assertions, prefixed with the rank (rank 0 prints all).
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?", r.line_number(),
                 r.summary());
    std::fflush(stderr);
  }
  void OnTestEnd(const ::testing::TestInfo& t) override {
    if (t.result()->Failed()) std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, t.test_suite_name(), t.name());
  }

 private:
  int rank_;
};
}  // namespace zen::test

int main(int argc, char** argv) {
  zen::mpi::Environment env(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  zen::test::world_ptr() = zen::mpi::create(MPI_COMM_WORLD);
  zen::test::world().set_timeout(std::chrono::milliseconds(120000));
  if (zen::test::world().rank() != 0) {
    auto& l = ::testing::UnitTest::GetInstance()->listeners();
    delete l.Release(l.default_result_printer());
    l.Append(new zen::test::RankFailurePrinter(zen::test::world().rank()));
  }
  int rc = RUN_ALL_TESTS();
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  zen::test::world_ptr().reset();
  return worst;
}
