// Hierarchical mode over MPI: sub-communicators built by split_nodes (over the world's
// point-to-point) and by MPI_Comm_split (node = consecutive ranks), every node size dividing n.
#include "../core/mpi_main.hpp"
#include "hier_cases.hpp"

using namespace zen;

TEST(HierarchicalMpi, AllNodeSizesMatchReference) {
  Communicator& w = test::world();
  const int n = w.size();
  for (int L = 1; L <= n; ++L) {
    if (n % L) continue;
    SCOPED_TRACE("L=" + std::to_string(L));
    test::check_hierarchical_rank<float>(w, nullptr, nullptr, L, test::HierCase{1003, 1, 0.05, false, false}, 21);
    test::check_hierarchical_rank<half>(w, nullptr, nullptr, L, test::HierCase{517, 2, 0.3, true, false}, 22);
  }
}

TEST(HierarchicalMpi, MpiCommSplitSubCommunicators) {
  Communicator& w = test::world();
  const int n = w.size(), r = w.rank();
  const int L = n % 2 == 0 ? 2 : 1;
  MPI_Comm intra_c, inter_c;
  MPI_Comm_split(MPI_COMM_WORLD, r / L, r % L, &intra_c);
  MPI_Comm_split(MPI_COMM_WORLD, r % L, r / L, &inter_c);
  {
    auto intra = mpi::create(intra_c);
    auto inter = mpi::create(inter_c);
    test::check_hierarchical_rank<bfloat16>(w, intra.get(), inter.get(), L, test::HierCase{2049, 1, 0.2, false, false}, 23);
  }
  MPI_Comm_free(&intra_c);
  MPI_Comm_free(&inter_c);
}
