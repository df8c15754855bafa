// SparCML baseline (Renggli et al., arXiv 1802.08021): recursive doubling with incremental
// aggregation. Each stage exchanges the running (sparse) sum with the partner rank ^ 2^s and merges;
// once the running result's COO bytes exceed its dense bytes (or its row density exceeds
// SchemeOptions::sparcml_dense_switch) it switches to a dense representation (N values, plus an
// R-bit presence bitmap when a sparse result is requested, so the support stays the union).
// Non-power-of-two n: the n - P extra ranks (P = largest power of two <= n) first send their input
// to rank r - P and get the final result back from it. Every message is an 8-byte header (entry
// count, or ~0 for dense) followed by the payload. See docs/algorithms.md, "sparcml".
#include <cstring>

#include "baseline_util.hpp"
#include "plan_util.hpp"
#include "scheme_row.hpp"
#include "zen/encode/coo.hpp"
#include "zen/error.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen {
namespace {

constexpr uint64_t kDenseHeader = ~0ULL;

class SparCML : public plan::Typed<SparCML> {
 public:
  SparCML(Communicator& c, const TensorSpec& s, const SchemeOptions& o)
      : Typed(c, s, o), wire_(encode::wire_index_type(s.dense_len / s.row_width)) {}
  static constexpr const char* kName = "sparcml";

 private:
  friend plan::Access;

  // Running sum: sparse (sorted keys + rows) or dense (N values + presence bitmap if tracked).
  template <typename T>
  struct State {
    bool dense = false;
    std::vector<int64_t> keys;
    std::vector<T> vals;    // sparse: keys.size()*D; dense: N
    std::vector<uint8_t> bm;  // dense and tracking the support: ceil(R/8) bytes
  };

  uint64_t rows() const { return spec_.dense_len / spec_.row_width; }
  size_t dense_payload() const {
    return spec_.dense_len * dtype_size(spec_.dtype) + (track_ ? static_cast<size_t>((rows() + 7) / 8) : 0);
  }
  bool should_switch(size_t nnz) const {
    if (opt_.sparcml_dense_switch > 0)
      return static_cast<double>(nnz) > opt_.sparcml_dense_switch * static_cast<double>(rows());
    return encode::coo_bytes(nnz, spec_.row_width, spec_.dtype, wire_) > dense_payload();
  }

  template <typename T>
  void to_dense(State<T>& s) {
    if (s.dense) return;
    const size_t D = spec_.row_width;
    std::vector<T> dv(spec_.dense_len, T(0));
    if (track_) s.bm.assign(static_cast<size_t>((rows() + 7) / 8), 0);
    for (size_t i = 0; i < s.keys.size(); ++i) {
      std::memcpy(&dv[static_cast<size_t>(s.keys[i]) * D], &s.vals[i * D], D * sizeof(T));
      if (track_) baseline::set_bit(s.bm.data(), static_cast<uint64_t>(s.keys[i]));
    }
    s.vals = std::move(dv);
    s.keys.clear();
    s.keys.shrink_to_fit();
    s.dense = true;
    ever_dense_ = true;
  }

  template <typename T>
  std::vector<uint8_t> serialize(const State<T>& s) const {
    std::vector<uint8_t> out;
    if (s.dense) {
      out.resize(dense_payload());
      size_t o = 0;
      if (track_) {
        std::memcpy(out.data(), s.bm.data(), s.bm.size());
        o = s.bm.size();
      }
      std::memcpy(out.data() + o, s.vals.data(), s.vals.size() * sizeof(T));
    } else {
      out.resize(encode::coo_bytes(s.keys.size(), spec_.row_width, spec_.dtype, wire_));
      encode::coo_encode(s.keys.data(), s.vals.data(), s.keys.size(), spec_.row_width, spec_.dtype, wire_, out.data());
    }
    return out;
  }
  size_t payload_bytes(uint64_t header) const {
    return header == kDenseHeader ? dense_payload()
                                  : encode::coo_bytes(static_cast<size_t>(header), spec_.row_width, spec_.dtype, wire_);
  }
  template <typename T>
  State<T> deserialize(uint64_t header, const std::vector<uint8_t>& msg) const {
    State<T> s;
    if (header == kDenseHeader) {
      s.dense = true;
      size_t o = 0;
      if (track_) {
        s.bm.assign(msg.begin(), msg.begin() + static_cast<std::ptrdiff_t>((rows() + 7) / 8));
        o = s.bm.size();
      }
      s.vals.resize(spec_.dense_len);
      std::memcpy(s.vals.data(), msg.data() + o, s.vals.size() * sizeof(T));
    } else {
      std::vector<uint8_t> raw;
      encode::coo_decode(msg.data(), msg.size(), rows(), spec_.row_width, spec_.dtype, wire_, s.keys, raw);
      for (size_t i = 1; i < s.keys.size(); ++i)
        ZEN_CHECK_CODE(s.keys[i - 1] < s.keys[i], Result::InvalidUsage,
                       "rank " + std::to_string(comm_.rank()) + " sparcml: peer sent unsorted key " +
                           std::to_string(s.keys[i]) + " at entry " + std::to_string(i));
      s.vals.resize(raw.size() / sizeof(T));
      if (!raw.empty()) std::memcpy(s.vals.data(), raw.data(), raw.size());
    }
    return s;
  }

  // a := a + b (union support). Both partners compute the same bits: IEEE addition commutes, and a
  // dense operand is always the base into which the sparse one is added.
  template <typename T>
  void merge(State<T>& a, State<T>&& b) {
    using A = typename accum_of<T>::type;
    const size_t D = spec_.row_width;
    if (!a.dense && b.dense) std::swap(a, b);
    if (a.dense && b.dense) {
      baseline::add_into(a.vals.data(), b.vals.data(), a.vals.size());
      for (size_t i = 0; i < a.bm.size(); ++i) a.bm[i] = static_cast<uint8_t>(a.bm[i] | b.bm[i]);
      return;
    }
    if (a.dense) {  // b sparse
      for (size_t i = 0; i < b.keys.size(); ++i) {
        baseline::add_into(&a.vals[static_cast<size_t>(b.keys[i]) * D], &b.vals[i * D], D);
        if (track_) baseline::set_bit(a.bm.data(), static_cast<uint64_t>(b.keys[i]));
      }
      return;
    }
    State<T> m;
    m.keys.reserve(a.keys.size() + b.keys.size());
    m.vals.reserve((a.keys.size() + b.keys.size()) * D);
    size_t i = 0, j = 0;
    while (i < a.keys.size() || j < b.keys.size()) {
      if (j == b.keys.size() || (i < a.keys.size() && a.keys[i] < b.keys[j])) {
        m.keys.push_back(a.keys[i]);
        m.vals.insert(m.vals.end(), a.vals.begin() + static_cast<std::ptrdiff_t>(i * D),
                      a.vals.begin() + static_cast<std::ptrdiff_t>((i + 1) * D));
        ++i;
      } else if (i == a.keys.size() || b.keys[j] < a.keys[i]) {
        m.keys.push_back(b.keys[j]);
        m.vals.insert(m.vals.end(), b.vals.begin() + static_cast<std::ptrdiff_t>(j * D),
                      b.vals.begin() + static_cast<std::ptrdiff_t>((j + 1) * D));
        ++j;
      } else {
        m.keys.push_back(a.keys[i]);
        for (size_t c = 0; c < D; ++c)
          m.vals.push_back(static_cast<T>(static_cast<A>(a.vals[i * D + c]) + static_cast<A>(b.vals[j * D + c])));
        ++i;
        ++j;
      }
    }
    a = std::move(m);
    if (should_switch(a.keys.size())) to_dense(a);
  }

  template <typename T>
  void send_state(const State<T>& s, int peer) {
    const uint64_t h = s.dense ? kDenseHeader : s.keys.size();
    auto msg = serialize(s);
    comm_.send(&h, 8, peer, 3);
    comm_.send(msg.data(), msg.size(), peer, 3);
  }
  template <typename T>
  State<T> recv_state(int peer) {
    uint64_t h = 0;
    comm_.recv(&h, 8, peer, 3);
    std::vector<uint8_t> msg(payload_bytes(h));
    comm_.recv(msg.data(), msg.size(), peer, 3);
    return deserialize<T>(h, msg);
  }

  template <typename T>
  void run_typed(const SparseView& in, SparseTensor* sparse_out, void* dense_out) {
    const int n = comm_.size(), r = comm_.rank();
    const size_t D = spec_.row_width;
    track_ = sparse_out != nullptr;
    ever_dense_ = false;
    bool ever_sparse = false;
    baseline::Local loc = baseline::coalesce_input(in, spec_);
    State<T> st;
    st.keys = std::move(loc.keys);
    st.vals.resize(loc.vals.size() / sizeof(T));
    if (!loc.vals.empty()) std::memcpy(st.vals.data(), loc.vals.data(), loc.vals.size());
    if (should_switch(st.keys.size())) to_dense(st);
    int P = 1;
    while (P * 2 <= n) P *= 2;
    if (r >= P) {
      {
        Phase ph(*this, "fold");
        ever_sparse |= !st.dense;
        send_state(st, r - P);
      }
      Phase ph(*this, "unfold");
      st = recv_state<T>(r - P);
    } else {
      if (r + P < n) {
        Phase ph(*this, "fold");
        merge(st, recv_state<T>(r + P));
      }
      for (int s = 0; (1 << s) < P; ++s) {
        const std::string name = "stage" + std::to_string(s);
        Phase ph(*this, name.c_str());
        const int peer = r ^ (1 << s);
        const uint64_t h = st.dense ? kDenseHeader : st.keys.size();
        ever_sparse |= !st.dense;
        uint64_t ph_h = 0;
        comm_.sendrecv(&h, 8, peer, &ph_h, 8, peer, 4);
        auto msg = serialize(st);
        std::vector<uint8_t> rmsg(payload_bytes(ph_h));
        comm_.sendrecv(msg.data(), msg.size(), peer, rmsg.data(), rmsg.size(), peer, 4);
        merge(st, deserialize<T>(ph_h, rmsg));
      }
      if (r + P < n) {
        Phase ph(*this, "unfold");
        send_state(st, r + P);
      }
    }
    ever_dense_ |= st.dense;
    ever_sparse |= !st.dense;
    report_.encoding = ever_dense_ ? (ever_sparse ? "coo+dense" : "dense") : "coo";
    if (!sparse_out) {  // dense output (dense_out is null when N == 0)
      if (spec_.dense_len == 0) {
      } else if (st.dense) {
        std::memcpy(dense_out, st.vals.data(), st.vals.size() * sizeof(T));
      } else {
        std::memset(dense_out, 0, spec_.dense_len * sizeof(T));
        for (size_t i = 0; i < st.keys.size(); ++i)
          std::memcpy(static_cast<T*>(dense_out) + static_cast<size_t>(st.keys[i]) * D, &st.vals[i * D], D * sizeof(T));
      }
      return;
    }
    if (st.dense) {
      baseline::dense_with_support_to_sparse(reinterpret_cast<const uint8_t*>(st.vals.data()), st.bm.data(), spec_,
                                             *sparse_out);
    } else {
      sparse_out->resize(st.keys.size());
      sparse_out->indices = std::move(st.keys);
      if (!st.vals.empty()) std::memcpy(sparse_out->values.data(), st.vals.data(), st.vals.size() * sizeof(T));
    }
  }

  IndexType wire_;
  bool track_ = false;
  bool ever_dense_ = false;
};

void sparcml_traffic(model::TrafficBuilder& b) {
  const auto& p = b.p;
  const auto& c = b.c;
  const int n = b.n;
  const uint64_t R = b.R, e = model::key_width(R) + b.D * b.vs, dense_b = b.N * b.vs + (p.sparse_out ? b.Rb : 0);
  auto sw = [&](uint64_t k) {
    return p.opt.sparcml_dense_switch > 0 ? static_cast<double>(k) > p.opt.sparcml_dense_switch * static_cast<double>(R)
                                          : k * e > dense_b;
  };
  bool any_dense = false, any_sparse = false;
  auto bytes = [&](uint64_t k) {
    const bool d = sw(k);
    (d ? any_dense : any_sparse) = true;
    return 8 + (d ? dense_b : k * e);
  };
  const int P = model::sparcml_ranks(n);
  int L = 0;
  while ((1 << L) < P) ++L;
  ZEN_ENFORCE(c.sc_state.size() == static_cast<size_t>(L) + 1, "cost model: counts lack SparCML's state sizes");
  if (P < n) {
    model::PhaseTraffic& f = b.phase("fold", 1, 1);
    for (int r = P; r < n; ++r) {
      const uint64_t x = bytes(c.k[static_cast<size_t>(r)]);
      f.sent[static_cast<size_t>(r)] += x;
      f.recv[static_cast<size_t>(r - P)] += x;
    }
  }
  for (int s = 0; s < L; ++s) {
    const std::string name = "stage" + std::to_string(s);
    model::PhaseTraffic& st = b.phase(name.c_str(), 2, 2);
    const auto& sz = c.sc_state[static_cast<size_t>(s)];
    for (int r = 0; r < P; ++r) {
      st.sent[static_cast<size_t>(r)] += bytes(sz[static_cast<size_t>(r)]);
      st.recv[static_cast<size_t>(r)] += bytes(sz[static_cast<size_t>(r ^ (1 << s))]);
    }
  }
  if (P < n) {
    model::PhaseTraffic& u = b.phase("unfold", 1, 1);
    for (int r = P; r < n; ++r) {
      const uint64_t x = bytes(c.sc_state[static_cast<size_t>(L)][static_cast<size_t>(r - P)]);
      u.sent[static_cast<size_t>(r - P)] += x;
      u.recv[static_cast<size_t>(r)] += x;
    }
  }
  for (int r = 0; r < n && !any_dense; ++r) any_dense = sw(c.k[static_cast<size_t>(r)]);
  b.t.encoding = any_dense ? (any_sparse ? "coo+dense" : "dense") : "coo";
}

double sparcml_work(const model::Problem&, const model::Counts& c, size_t r) {
  double w = static_cast<double>(c.k[r]);
  for (const auto& st : c.sc_state) w += static_cast<double>(st[std::min(r, st.size() - 1)]);
  return w;
}

}  // namespace

namespace detail {
extern const SchemeRow sparcml_row{SparCML::kName, plan::factory<SparCML>, sparcml_traffic, sparcml_work, /*auto_position=*/2, detail::kSparse};
}  // namespace detail

}  // namespace zen
