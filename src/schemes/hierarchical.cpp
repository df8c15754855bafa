// Hierarchical mode: intra-node dense reduce-scatter, inter-node sparse scheme, intra-node allgather.
// See include/zen/schemes/hierarchical.hpp and docs/gpu.md ("Hierarchical mode").
#include "plan_util.hpp"
#include "zen/schemes/hierarchical.hpp"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "zen/encode/bitmap.hpp"
#include "zen/error.hpp"

namespace zen {
namespace {

// ---------------------------------------------------------------------------------------------
class Hierarchical : public plan::Typed<Hierarchical> {
 public:
  Hierarchical(Communicator& world, Communicator& intra, Communicator& inter, const TensorSpec& spec,
               const SchemeOptions& opt, const std::string& inter_scheme, NodeComms owned)
      : Typed(world, spec, opt), owned_(std::move(owned)), intra_(intra), inter_(inter) {
    const std::string where = "rank " + std::to_string(world.rank()) + " hierarchical setup: ";
    ZEN_ENFORCE(intra.memory_space() == MemSpace::Host && inter.memory_space() == MemSpace::Host,
                where + "sub-communicators must be host backends");
    ZEN_ENFORCE(static_cast<long long>(intra.size()) * inter.size() == world.size(),
                where + "intra size " + std::to_string(intra.size()) + " * inter size " + std::to_string(inter.size()) +
                    " != world size " + std::to_string(world.size()));
    const uint64_t rows = spec.dense_len / spec.row_width;
    const int L = intra.size();
    lo_.assign(static_cast<size_t>(L) + 1, 0);
    for (int j = 0; j < L; ++j)
      lo_[j + 1] = lo_[j] + rows / static_cast<uint64_t>(L) + (static_cast<uint64_t>(j) < rows % static_cast<uint64_t>(L) ? 1 : 0);
    // Every rank of an inter group has the same local index, hence the same chunk.
    const uint64_t mine = chunk_rows(intra.rank());
    auto all = inter.allgather_value(mine);
    for (int p = 0; p < inter.size(); ++p)
      ZEN_CHECK_CODE(all[p] == mine, Result::InvalidUsage,
                     where + "inter-node peer " + std::to_string(p) + " holds a chunk of " + std::to_string(all[p]) +
                         " rows, this rank " + std::to_string(mine) + " (intra/inter communicators do not form a grid)");
    TensorSpec cs{mine * spec.row_width, spec.row_width, spec.dtype};
    inner_ = make_scheme(inter_scheme, inter, cs, opt_);
  }
  static constexpr const char* kName = "hierarchical";

 private:
  friend plan::Access;

  uint64_t chunk_rows(int j) const { return lo_[j + 1] - lo_[j]; }
  int chunk_of(uint64_t row) const {
    return static_cast<int>(std::upper_bound(lo_.begin(), lo_.end(), row) - lo_.begin()) - 1;
  }

  // Phase accounting over the sub-communicators (the world may not see their traffic).
  struct SubPhase {
    SubPhase(Hierarchical& h, const char* name) : h_(h), a_(h.intra_.stats()), b_(h.inter_.stats()), t0_(detail::seconds_now()) {
      r_.name = name;
    }
    ~SubPhase() {
      TrafficStats da = h_.intra_.stats() - a_, db = h_.inter_.stats() - b_;
      r_.sent = da.total_sent() + db.total_sent();
      r_.recv = da.total_recv() + db.total_recv();
      r_.seconds = detail::seconds_now() - t0_;
      h_.report_.sent += r_.sent;
      h_.report_.recv += r_.recv;
      h_.report_.phases.push_back(r_);
    }
    Hierarchical& h_;
    TrafficStats a_, b_;
    double t0_;
    PhaseReport r_;
  };

  template <typename T>
  void run_typed(const SparseView& in, SparseTensor* sparse_out, void* dense_out) {
    using A = typename accum_of<T>::type;
    const int L = intra_.size(), l = intra_.rank();
    const size_t D = spec_.row_width, rb = D * sizeof(T);
    const T* vals = static_cast<const T*>(in.values);

    // 1. Local dense chunks: [bitmap of the chunk's rows][dense rows], one message per local rank.
    std::vector<size_t> sc(L), sd(L), rc(L), rd(L);
    size_t stotal = 0, rtotal = 0;
    const uint64_t my_rows = chunk_rows(l);
    const size_t my_msg = encode::bitmap_bytes(my_rows) + my_rows * rb;
    for (int j = 0; j < L; ++j) {
      sc[j] = encode::bitmap_bytes(chunk_rows(j)) + chunk_rows(j) * rb;
      sd[j] = stotal;
      stotal += sc[j];
      rc[j] = my_msg;
      rd[j] = rtotal;
      rtotal += my_msg;
    }
    std::vector<uint8_t> sbuf(stotal, 0), rbuf(rtotal);
    {
      auto locate = [&](uint64_t row, uint8_t** bm, uint8_t** rowp, uint64_t* off) {
        const int j = chunk_of(row);
        *off = row - lo_[j];
        *bm = sbuf.data() + sd[j];
        *rowp = *bm + encode::bitmap_bytes(chunk_rows(j)) + *off * rb;
      };
      std::unordered_map<uint64_t, std::vector<A>> dups;  // rows given more than once: summed in input order
      for (size_t e = 0; e < in.nnz; ++e) {
        const int64_t srow = in.index_at(e);
        // Checked even when the caller skipped validation: the row indexes the send buffer.
        if (srow < 0 || static_cast<uint64_t>(srow) >= spec_.dense_len / spec_.row_width)
          ZEN_THROW(Result::InvalidArgument, "rank " + std::to_string(comm_.rank()) + " hierarchical: index " +
                                                 std::to_string(srow) + " at entry " + std::to_string(e) + " is outside [0, " +
                                                 std::to_string(spec_.dense_len / spec_.row_width) + ")");
        const uint64_t row = static_cast<uint64_t>(srow);
        uint8_t *bm, *rowp;
        uint64_t off;
        locate(row, &bm, &rowp, &off);
        if (bm[off >> 3] >> (off & 7) & 1) {
          dups.emplace(row, std::vector<A>());
        } else {
          bm[off >> 3] |= static_cast<uint8_t>(1u << (off & 7));
          std::memcpy(rowp, vals + e * D, rb);
        }
      }
      if (!dups.empty()) {
        for (size_t e = 0; e < in.nnz; ++e) {
          auto it = dups.find(static_cast<uint64_t>(in.index_at(e)));
          if (it == dups.end()) continue;
          auto& acc = it->second;
          if (acc.empty()) {
            acc.resize(D);
            for (size_t c = 0; c < D; ++c) acc[c] = static_cast<A>(vals[e * D + c]);
          } else {
            for (size_t c = 0; c < D; ++c) acc[c] += static_cast<A>(vals[e * D + c]);
          }
        }
        for (auto& [row, acc] : dups) {
          uint8_t *bm, *rowp;
          uint64_t off;
          locate(row, &bm, &rowp, &off);
          for (size_t c = 0; c < D; ++c) {
            const T v = static_cast<T>(acc[c]);
            std::memcpy(rowp + c * sizeof(T), &v, sizeof(T));
          }
        }
      }
    }
    {
      SubPhase ph(*this, "reduce_scatter");
      intra_.alltoallv(sbuf.data(), sc.data(), sd.data(), rbuf.data(), rc.data(), rd.data());
    }
    sbuf.clear();
    sbuf.shrink_to_fit();

    // 2. Node partial of chunk l: local-rank order, union support.
    SparseTensor partial(my_rows * D, spec_.dtype, spec_.row_width);
    {
      const size_t bmb = encode::bitmap_bytes(my_rows);
      std::vector<A> acc(D);
      std::vector<T> row(D);
      for (uint64_t q = 0; q < my_rows; ++q) {
        bool present = false;
        for (int src = 0; src < L; ++src) {
          const uint8_t* msg = rbuf.data() + rd[src];
          if (!(msg[q >> 3] >> (q & 7) & 1)) continue;
          std::memcpy(row.data(), msg + bmb + q * rb, rb);
          for (size_t c = 0; c < D; ++c) acc[c] = present ? acc[c] + static_cast<A>(row[c]) : static_cast<A>(row[c]);
          present = true;
        }
        if (!present) continue;
        partial.indices.push_back(static_cast<int64_t>(q));
        for (size_t c = 0; c < D; ++c) {
          const T v = static_cast<T>(acc[c]);
          const auto* p = reinterpret_cast<const uint8_t*>(&v);
          partial.values.insert(partial.values.end(), p, p + sizeof(T));
        }
      }
    }
    rbuf.clear();
    rbuf.shrink_to_fit();

    // 3. Across nodes among the ranks with local index l.
    SparseTensor chunk;
    if (inter_.size() == 1) {
      chunk = std::move(partial);
    } else {
      SubPhase ph(*this, "inter");
      inner_->run(partial.view(), chunk);
      report_.push_imbalance = inner_->report().push_imbalance;
      report_.pull_imbalance = inner_->report().pull_imbalance;
      report_.serial_overflows = inner_->report().serial_overflows;
    }
    report_.encoding = std::string("hierarchical/") + (inter_.size() == 1 ? "none" : inner_->report().encoding);

    // 4. Allgather inside the node.
    SubPhase ph(*this, "allgather");
    const uint64_t k = chunk.nnz();
    if (!sparse_out) {
      std::vector<uint8_t> mine(my_rows * rb, 0);
      for (size_t i = 0; i < k; ++i)
        std::memcpy(mine.data() + static_cast<size_t>(chunk.indices[i]) * rb, chunk.values.data() + i * rb, rb);
      for (int j = 0; j < L; ++j) {
        rc[j] = chunk_rows(j) * rb;
        rd[j] = lo_[j] * rb;
      }
      intra_.allgatherv(mine.data(), mine.size(), dense_out, rc.data(), rd.data());
      uint64_t total = 0;
      for (uint64_t c : intra_.allgather_value(k)) total += c;
      report_.result_nnz = total;
      return;
    }
    const auto counts = intra_.allgather_value(k);
    const size_t eb = sizeof(int64_t) + rb;
    size_t total = 0;
    for (int j = 0; j < L; ++j) {
      rc[j] = counts[j] * eb;
      rd[j] = total;
      total += rc[j];
    }
    std::vector<uint8_t> mine(k * eb), all(total);
    for (size_t i = 0; i < k; ++i) {
      const int64_t g = chunk.indices[i] + static_cast<int64_t>(lo_[l]);
      std::memcpy(mine.data() + i * sizeof(int64_t), &g, sizeof(int64_t));
    }
    if (k) std::memcpy(mine.data() + k * sizeof(int64_t), chunk.values.data(), k * rb);
    intra_.allgatherv(mine.data(), mine.size(), all.data(), rc.data(), rd.data());
    uint64_t nnz = 0;
    for (int j = 0; j < L; ++j) nnz += counts[j];
    sparse_out->resize(nnz);
    size_t o = 0;
    for (int j = 0; j < L; ++j) {  // chunks are contiguous and ascending: concatenation stays sorted
      const uint8_t* msg = all.data() + rd[j];
      if (counts[j] == 0) continue;
      std::memcpy(sparse_out->indices.data() + o, msg, counts[j] * sizeof(int64_t));
      std::memcpy(sparse_out->values.data() + o * rb, msg + counts[j] * sizeof(int64_t), counts[j] * rb);
      o += counts[j];
    }
  }

  NodeComms owned_;
  Communicator& intra_;
  Communicator& inter_;
  std::vector<uint64_t> lo_;
  std::unique_ptr<SparseAllreduce> inner_;
};

}  // namespace

NodeComms split_nodes(Communicator& world, int node_size) {
  const int n = world.size(), r = world.rank();
  ZEN_ENFORCE(node_size >= 1 && n % node_size == 0,
              "rank " + std::to_string(r) + " hierarchical: node size " + std::to_string(node_size) +
                  " must be >= 1 and divide the world size " + std::to_string(n));
  const int L = node_size, g = r / L, l = r % L;
  std::vector<int> intra, inter;
  for (int j = 0; j < L; ++j) intra.push_back(g * L + j);
  for (int h = 0; h < n / L; ++h) inter.push_back(h * L + l);
  NodeComms c;
  c.intra = make_subcommunicator(world, std::move(intra), 16382);
  c.inter = make_subcommunicator(world, std::move(inter), 16383);
  return c;
}

std::unique_ptr<SparseAllreduce> make_hierarchical(Communicator& world, const TensorSpec& spec, const SchemeOptions& opt,
                                                   const HierarchicalOptions& hopt) {
  detail::require_host_memory(world, "make_hierarchical", "hierarchical");
  NodeComms c = split_nodes(world, hopt.node_size);
  return detail::setup_in_order(world, [&]() -> std::unique_ptr<SparseAllreduce> {
    Communicator& intra = *c.intra;
    Communicator& inter = *c.inter;
    return plan::make_plan<Hierarchical>(world, intra, inter, spec, opt, hopt.inter_scheme, std::move(c));
  });
}

std::unique_ptr<SparseAllreduce> make_hierarchical(Communicator& world, Communicator& intra, Communicator& inter,
                                                   const TensorSpec& spec, const SchemeOptions& opt,
                                                   const std::string& inter_scheme) {
  for (Communicator* c : {&world, &intra, &inter}) detail::require_host_memory(*c, "make_hierarchical", "hierarchical");
  return detail::setup_in_order(world, [&]() -> std::unique_ptr<SparseAllreduce> {
    return plan::make_plan<Hierarchical>(world, intra, inter, spec, opt, inter_scheme, NodeComms{});
  });
}

}  // namespace zen
