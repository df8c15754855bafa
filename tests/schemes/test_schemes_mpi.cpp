// The scheme suite under mpirun (one process per rank): a smaller case matrix than the loopback
// binary, every scheme, results bitwise equal to the reference on every rank and bytes equal to
// the documented formulas.
#include <gtest/gtest.h>

#include "../core/mpi_main.hpp"
#include "cases.hpp"

using namespace zen;

namespace {

class MpiSchemes : public ::testing::TestWithParam<std::string> {};

TEST_P(MpiSchemes, MatchReferenceAndFormula) {
  Communicator& c = test::world();
  const int n = c.size(), r = c.rank();
  const std::string scheme = GetParam();
  int v = 0;
  for (const char* kind : {"empty", "single", "tiny", "sparse1", "full", "skew", "dups", "cancel", "empty_ranks", "switch"}) {
    test::Case cs = test::make_case(kind, n, v++ % 4);
    const auto ref = test::reference(cs);
    SyncReport rs, rd;
    test::check_case(c, scheme, cs, ref, &rs, &rd);
    const auto ws = test::expected_traffic(scheme, cs, n, true);
    const auto wd = test::expected_traffic(scheme, cs, n, false);
    EXPECT_EQ(rs.sent, ws.sent[r]) << scheme << " " << cs.name << " rank " << r;
    EXPECT_EQ(rs.recv, ws.recv[r]) << scheme << " " << cs.name << " rank " << r;
    EXPECT_EQ(rd.sent, wd.sent[r]) << scheme << " " << cs.name << " rank " << r;
    EXPECT_EQ(rd.recv, wd.recv[r]) << scheme << " " << cs.name << " rank " << r;
    test::expect_phases_match(ws, rs, r, scheme + " " + cs.name + " (sparse output)");
    test::expect_phases_match(wd, rd, r, scheme + " " + cs.name + " (dense output)");
  }
}

INSTANTIATE_TEST_SUITE_P(All, MpiSchemes, ::testing::ValuesIn(zen::scheme_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
