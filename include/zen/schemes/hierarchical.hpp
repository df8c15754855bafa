#pragma once
// Hierarchical mode (Zen §7): dense reduce-scatter inside a node, a sparse scheme (Balanced
// Parallelism by default) across nodes among the ranks with the same local index, dense allgather
// inside the node.
//
// Rank r of a world of n = nodes * L ranks (L = node size, consecutive ranks form a node) has local
// index l = r mod L and node g = r div L. The R = N/D rows are cut into L contiguous chunks
// (chunk j has R/L rows, plus one for j < R mod L). Steps on rank r:
//   1. intra-node alltoallv: chunk j of r's input (bitmap of present rows + dense rows) -> local rank j;
//   2. owner of chunk l sums the L contributions in local-rank order (accum_of<T>, first present
//      contribution assigned, then added, rounded once to T); support = union of the bitmaps;
//   3. the inter-node scheme sums the node partials of chunk l among the `nodes` ranks with local
//      index l (node order for Balanced);
//   4. intra-node allgatherv of the chunk results (dense rows for dense output, COO for sparse output).
// Result: sum over nodes in node order of (sum over the node's ranks in local order), union support,
// identical bits on every rank. It equals the flat schemes' result whenever the sums are exact
// (e.g. integer-valued inputs); in general the summation order differs (two roundings for 16-bit
// types: node partials are T).
//
// Sub-communicators: either the caller passes them (e.g. zen::mpi::create of MPI_Comm_split_type /
// MPI_Comm_split communicators, see docs/gpu.md), or they are built from the world communicator by
// make_subcommunicator, which runs the sub-group's operations over the parent's point-to-point calls.
#include <memory>
#include <string>
#include <vector>

#include "zen/comm/subcomm.hpp"  // make_subcommunicator
#include "zen/schemes/scheme.hpp"

namespace zen {

struct HierarchicalOptions {
  int node_size = 1;                       ///< L: consecutive ranks per (simulated) node; must divide n
  std::string inter_scheme = "balanced";   ///< scheme run across nodes (any make_scheme name)
};


/// The (intra-node, inter-node) pair of sub-communicators of `world` for node size L (tags 16382 and
/// 16383 of the parent).
struct NodeComms {
  std::unique_ptr<Communicator> intra;  ///< the L ranks of this rank's node, local-index order
  std::unique_ptr<Communicator> inter;  ///< the ranks with this rank's local index, node order
};
NodeComms split_nodes(Communicator& world, int node_size);

/// Hierarchical scheme over sub-communicators built from `world` (HierarchicalOptions::node_size).
std::unique_ptr<SparseAllreduce> make_hierarchical(Communicator& world, const TensorSpec& spec,
                                                   const SchemeOptions& opt = {}, const HierarchicalOptions& hopt = {});

/// Hierarchical scheme over caller-provided sub-communicators: `intra` (this rank's node, ordered by
/// local index) and `inter` (ranks with this rank's local index, ordered by node). Both must outlive
/// the scheme; intra.size() * inter.size() must equal world.size().
std::unique_ptr<SparseAllreduce> make_hierarchical(Communicator& world, Communicator& intra, Communicator& inter,
                                                   const TensorSpec& spec, const SchemeOptions& opt = {},
                                                   const std::string& inter_scheme = "balanced");

}  // namespace zen
