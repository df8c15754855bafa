// Adding a scheme touches one file plus its tests: an example scheme defined only here (a dense
// allgather: every rank gathers every rank's densified rows and presence bits and sums them in rank
// order) registers through the same row as the library's schemes (src/schemes/scheme_row.hpp) and
// then runs through the public API (make_scheme, scheme_names, the cost model, auto's candidates);
// its traffic model equals the communicator's counts. Also: the table's checks (names, auto
// positions), a row cannot be built without its functions (compile time), and auto's default
// candidates keep their order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "cases.hpp"
#include "plan_util.hpp"
#include "scheme_row.hpp"
#include "zen/comm/loopback.hpp"
#include "zen/error.hpp"

namespace zen {
namespace {

// ---- the example scheme: class, factory, traffic model, work model, row ----
class DenseAllgather : public SparseAllreduce {
 public:
  DenseAllgather(Communicator& c, const TensorSpec& s, const SchemeOptions& o) : SparseAllreduce(c, s, o) {}
  const char* name() const override { return "example_dense_allgather"; }

 protected:
  void execute(const SparseView& in, SparseTensor* sparse_out, void* dense_out) override {
    dispatch_dtype(spec_.dtype, [&](auto tag) { run_typed<decltype(tag)>(in, sparse_out, dense_out); });
  }

 private:
  template <typename T>
  void run_typed(const SparseView& in, SparseTensor* sparse_out, void* dense_out) {
    using A = typename accum_of<T>::type;
    const int n = comm_.size();
    const size_t N = spec_.dense_len, D = spec_.row_width, R = N / D, Rb = (R + 7) / 8;
    const size_t rec = N * sizeof(T) + Rb;  // one rank's record: its rows densified, its presence bits
    mine_.assign(rec, 0);
    T* v = reinterpret_cast<T*>(mine_.data());
    uint8_t* bits = mine_.data() + N * sizeof(T);
    const T* src = static_cast<const T*>(in.values);
    for (size_t i = 0; i < in.nnz; ++i) {
      const auto row = static_cast<size_t>(in.index_at(i));
      bits[row / 8] |= static_cast<uint8_t>(1u << (row % 8));
      for (size_t k = 0; k < D; ++k) v[row * D + k] = static_cast<T>(static_cast<A>(v[row * D + k]) + static_cast<A>(src[i * D + k]));
    }
    all_.resize(rec * static_cast<size_t>(n));
    {
      Phase ph(*this, "allgather");
      comm_.allgather(mine_.data(), rec, all_.data());
    }
    sum_.assign(N, A(0));
    support_.assign(Rb, 0);
    for (int p = 0; p < n; ++p) {  // rank order: the same bits on every rank
      const uint8_t* r = all_.data() + rec * static_cast<size_t>(p);
      for (size_t j = 0; j < N; ++j) {  // records are not padded (rec may be odd): copy, never cast
        T x;
        std::memcpy(&x, r + j * sizeof(T), sizeof(T));
        sum_[j] += static_cast<A>(x);
      }
      for (size_t b = 0; b < Rb; ++b) support_[b] |= r[N * sizeof(T) + b];
    }
    report_.encoding = "dense";
    if (dense_out) {
      T* out = static_cast<T*>(dense_out);
      for (size_t j = 0; j < N; ++j) out[j] = static_cast<T>(sum_[j]);
      return;
    }
    sparse_out->indices.clear();
    sparse_out->values.clear();
    for (size_t row = 0; row < R; ++row) {
      if (!((support_[row / 8] >> (row % 8)) & 1u)) continue;
      sparse_out->indices.push_back(static_cast<int64_t>(row));
      for (size_t k = 0; k < D; ++k) {
        const T x = static_cast<T>(sum_[row * D + k]);
        const auto* b = reinterpret_cast<const uint8_t*>(&x);
        sparse_out->values.insert(sparse_out->values.end(), b, b + sizeof(T));
      }
    }
  }

  std::vector<uint8_t> mine_, all_, support_;
  std::vector<double> sum_;
};

std::unique_ptr<SparseAllreduce> make_example(Communicator& c, const TensorSpec& s, const SchemeOptions& o) {
  return plan::make_plan<DenseAllgather>(c, s, o);
}

void example_traffic(model::TrafficBuilder& b) {
  b.t.encoding = "dense";
  model::PhaseTraffic& ag = b.phase("allgather", b.lg, b.nm1);
  for (size_t r = 0; r < b.un; ++r) ag.sent[r] = ag.recv[r] = (b.un - 1) * (b.N * b.vs + b.Rb);
}

double example_work(const model::Problem& p, const model::Counts& c, size_t r) {
  return static_cast<double>(c.k[r]) + static_cast<double>(p.n) * static_cast<double>(p.rows);
}

const detail::SchemeRow kExampleRow{"example_dense_allgather", make_example, example_traffic, example_work,
                                    detail::kNotAuto, detail::kDense};

// ---- structure: a row cannot lack a function ----
static_assert(!std::is_default_constructible_v<detail::Required<detail::TrafficFn>>, "a traffic model has no default");
static_assert(!std::is_constructible_v<detail::Required<detail::TrafficFn>, std::nullptr_t>, "nor can it be null");
static_assert(!std::is_constructible_v<detail::Required<detail::MakeFn>, std::nullptr_t>, "a factory cannot be null");
static_assert(!std::is_default_constructible_v<detail::SchemeRow>, "a row names its functions");

void register_example() {
  static const bool once = [] {
    detail::register_scheme(kExampleRow);
    return true;
  }();
  (void)once;
}

TEST(SchemeRow, ExampleSchemeRunsThroughThePublicApi) {
  register_example();
  const auto& names = scheme_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "example_dense_allgather"), names.end());
  EXPECT_TRUE(model::covers("example_dense_allgather"));
  for (int n : {1, 2, 3, 5}) {
    for (const std::string kind : {"empty", "single", "tiny", "half", "full", "dups", "cancel", "empty_ranks"}) {
      for (int variant = 0; variant < 4; ++variant) {
        const test::Case c = test::make_case(kind, n, variant);
        const test::Reference ref = test::reference(c);
        const model::Traffic sparse_t = test::expected_traffic("example_dense_allgather", c, n, true);
        loopback::run(n, [&](Communicator& comm) {
          SyncReport sr, dr;
          test::check_case(comm, "example_dense_allgather", c, ref, &sr, &dr);
          const std::string where = c.name + " n=" + std::to_string(n) + " rank " + std::to_string(comm.rank());
          // The row's traffic model is what the cost model replays: equal to the communicator's counts.
          test::expect_phases_match(sparse_t, sr, comm.rank(), where);
          test::expect_phases_match(sparse_t, dr, comm.rank(), where + " (dense)");
        });
      }
    }
  }
}

TEST(SchemeRow, AutoConsidersTheExampleWhenNamed) {
  register_example();
  const int n = 3;
  const test::Case c = test::make_case("full", n, 0);
  const test::Reference ref = test::reference(c);
  test::Case named = c;
  named.opt.autotune.candidates = {"balanced", "example_dense_allgather"};
  loopback::run(n, [&](Communicator& comm) {
    test::check_case(comm, "auto", named, ref);
    auto s = make_scheme("auto", comm, named.spec(), named.opt);
    test::Input in;
    test::make_input(named, comm.rank(), in);
    std::vector<uint8_t> dense(named.N() * dtype_size(named.dtype));
    s->run_dense(in.view, dense.data());
    // The model lists the example among the candidates it predicted.
    EXPECT_NE(s->report().decision.find("example_dense_allgather"), std::string::npos) << s->report().decision;
  });
}

TEST(SchemeRow, TableRefusesInconsistentRows) {
  auto expect_refused = [](detail::SchemeRow row, const std::string& what) {
    try {
      detail::register_scheme(row);
      ADD_FAILURE() << "registered a row with " << what;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Result::InvalidArgument) << what;
      EXPECT_NE(std::string(e.what()).find("scheme registry"), std::string::npos) << e.what();
    }
  };
  detail::SchemeRow row = kExampleRow;
  row.name = "balanced";
  expect_refused(row, "a taken name");
  row.name = "auto";
  expect_refused(row, "the name auto");
  row.name = "";
  expect_refused(row, "no name");
  row.name = "example_taken_position";
  row.auto_position = 0;  // balanced's
  expect_refused(row, "a taken auto position");
  row.auto_position = -1;
  expect_refused(row, "a negative auto position");
  EXPECT_EQ(detail::find_scheme("example_taken_position"), nullptr);
}

TEST(SchemeRow, AutoCandidateOrderIsTheRowsPositions) {
  // The order that decides auto's ties (it differs from the registry's order).
  const std::vector<std::string> want{"balanced", "allgather", "sparcml", "sparse_ps", "omnireduce", "dense_native",
                                      "hierarchical_sparse"};
  EXPECT_EQ(detail::auto_candidates(), want);
  const std::vector<std::string> registry{"balanced", "dense", "dense_native", "allgather", "sparcml", "omnireduce", "sparse_ps"};
  const auto& names = scheme_names();
  ASSERT_GE(names.size(), registry.size());
  EXPECT_TRUE(std::equal(registry.begin(), registry.end(), names.begin()));
  for (const auto& r : detail::scheme_table())
    EXPECT_EQ(r.has(detail::kDevicePlan), std::string(r.name) == "balanced") << r.name;
}

}  // namespace
}  // namespace zen
