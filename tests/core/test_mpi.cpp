// The communicator suite under mpirun: one process per rank, one MPI start per rank count.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm_suite.hpp"
#include "mpi_main.hpp"

using namespace zen;

TEST(Mpi, AllCollectivesExact) { test::run_comm_suite(test::world()); }

TEST(Mpi, WrapsCallerCommunicatorWithoutReinit) {
  int inited = 0;
  MPI_Initialized(&inited);
  EXPECT_EQ(inited, 1);
  // A second zen communicator on a split of the caller's communicator works side by side.
  MPI_Comm half;
  int r = test::world().rank();
  MPI_Comm_split(MPI_COMM_WORLD, r % 2, r, &half);
  auto c = mpi::create(half);
  std::vector<double> v(5, 1.0);
  c->allreduce(v.data(), v.size(), DType::F64);
  int hs = 0;
  MPI_Comm_size(half, &hs);
  EXPECT_EQ(v[0], static_cast<double>(hs));
  c.reset();
  MPI_Comm_free(&half);
}

// Pieces are reported when the sum takes the blocking path with its support in one message: not
// when a test lowers the message limit (ZEN_MPI_MAX_MESSAGE_BYTES) below the support's size.
bool sum_or_reports_pieces(const Communicator& c) { return c.size() > 1 && std::getenv("ZEN_MPI_MAX_MESSAGE_BYTES") == nullptr; }

// On one host a large allreduce_sum_or runs in 1 MiB pieces (ZEN_MPI_ALLREDUCE_CHUNK_BYTES unset),
// each reported as soon as it is final (the suite checks order and finality).
TEST(Mpi, SumOrReportsPiecesAsTheyFinish) {
  Communicator& c = test::world();
  const size_t pieces = test::check_allreduce_sum_or(c, (size_t{3} << 20) + 5, true);
  if (!sum_or_reports_pieces(c)) return;
  if (std::getenv("ZEN_MPI_ALLREDUCE_CHUNK_BYTES") == nullptr) { EXPECT_GE(pieces, 12u); }
  else EXPECT_GE(pieces, 1u);
}

// A piece callback that throws on rank 0: the operation still completes on every rank (exact
// results everywhere), no further piece reaches rank 0, and rank 0's call ends with the error.
TEST(Mpi, SumOrThrowingPieceCallback) {
  auto c = mpi::create(MPI_COMM_WORLD);
  const int n = c->size(), r = c->rank();
  const size_t count = (size_t{2} << 20) + 1, bytes = count / 8 + 1;
  std::vector<float> buf(count, static_cast<float>(r + 1));
  std::vector<uint8_t> bits(bytes, 0);
  bits[static_cast<size_t>(r) % bytes] = 1;
  struct Ctx {
    int rank;
    int calls = 0;
  } ctx{r};
  auto fn = [](void* p, size_t, size_t) {
    auto* x = static_cast<Ctx*>(p);
    ++x->calls;
    if (x->rank == 0) throw std::runtime_error("piece callback test failure");
  };
  bool threw = false;
  try {
    c->allreduce_sum_or(buf.data(), count, DType::F32, bits.data(), bytes, Communicator::PieceDone{fn, &ctx});
  } catch (const Error& e) {
    threw = true;
    EXPECT_NE(std::string(e.what()).find("piece callback test failure"), std::string::npos) << e.what();
  }
  const bool reports = sum_or_reports_pieces(*c);
  EXPECT_EQ(threw, r == 0 && reports) << "rank " << r;
  if (r == 0 && reports) {
    EXPECT_EQ(ctx.calls, 1);
  }
  if (!reports) {
    EXPECT_EQ(ctx.calls, 0);
  }
  const float want = static_cast<float>(n * (n + 1) / 2);
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(buf[i], want) << "rank " << r << " element " << i;
  }
  for (int p = 0; p < n; ++p) EXPECT_EQ(bits[static_cast<size_t>(p) % bytes], 1) << "rank " << r << " bit of rank " << p;
  c.reset();
  MPI_Barrier(MPI_COMM_WORLD);
}
