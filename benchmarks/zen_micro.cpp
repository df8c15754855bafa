// Micro-benchmarks (Google Benchmark) of the CPU data-path steps: h0 (pi / pi^-1), hierarchical
// hashing, owner aggregation inputs, the owner stage (accumulate or merge, then write), and the
// COO / hash-bitmap encoders. Throughputs are items or
// bytes per second; run `build/bin/zen_micro --benchmark_min_time=0.05`.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <vector>

#include "zen/encode/bitmap.hpp"
#include "zen/encode/coo.hpp"
#include "zen/encode/elias_fano.hpp"
#include "zen/hash/hash.hpp"
#include "zen/hash/region_hash.hpp"
#include "zen/model/cost_model.hpp"
#include "zen/schemes/scheme.hpp"
#include "owner_stage.hpp"  // private owner stage of balanced / sparse_ps (src/schemes)

namespace {

std::vector<int64_t> random_rows(uint64_t rows, size_t k, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<int64_t> v(k);
  for (auto& x : v) x = static_cast<int64_t>(g() % rows);
  return v;
}

// h0 locate (owner + position) per index: N = 2^range(0), n = 8.
void BM_H0Locate(benchmark::State& st) {
  const uint64_t N = 1ULL << st.range(0);
  auto p = zen::Partitioner::make(N, 8, 1);
  auto idx = random_rows(N, 1 << 16, 2);
  for (auto _ : st) {
    uint64_t acc = 0;
    for (int64_t x : idx) {
      uint32_t o;
      uint64_t pos;
      p.locate(static_cast<uint64_t>(x), &o, &pos);
      acc += o + pos;
    }
    benchmark::DoNotOptimize(acc);
  }
  st.SetItemsProcessed(st.iterations() * static_cast<int64_t>(idx.size()));
}
BENCHMARK(BM_H0Locate)->Arg(20)->Arg(24)->Arg(34);

// pi^-1: global index of an owner position (pull decode).
void BM_H0IndexAt(benchmark::State& st) {
  const uint64_t N = 1ULL << st.range(0);
  auto p = zen::Partitioner::make(N, 8, 1);
  std::vector<uint64_t> pos(1 << 16);
  std::mt19937_64 g(3);
  for (auto& x : pos) x = g() % p.owner_size(3);
  for (auto _ : st) {
    uint64_t acc = 0;
    for (uint64_t q : pos) acc += p.index_at(3, q);
    benchmark::DoNotOptimize(acc);
  }
  st.SetItemsProcessed(st.iterations() * static_cast<int64_t>(pos.size()));
}
BENCHMARK(BM_H0IndexAt)->Arg(20)->Arg(24)->Arg(34);

// Region hashing of k = 2^range(0) non-zeros of N = 2^24 over 4 owners, one thread, with the
// table reused across calls as a plan does.
void BM_HierarchicalPartition(benchmark::State& st) {
  const uint64_t N = 1ULL << 24;
  auto idx = random_rows(N, static_cast<size_t>(1) << st.range(0), 4);
  std::vector<float> val(idx.size(), 1.0f);
  zen::SparseView v;
  v.dense_len = N;
  v.nnz = idx.size();
  v.indices = idx.data();
  v.values = val.data();
  auto p = zen::Partitioner::make(N, 4, 5);
  zen::RegionHashConfig cfg;
  zen::HashPartition out;
  zen::RegionHash table;
  zen::detail::ThreadPool pool(1);
  for (auto _ : st) {
    table.partition(v, p, cfg, &pool, out);
    benchmark::DoNotOptimize(out.rep.data());
  }
  st.SetItemsProcessed(st.iterations() * static_cast<int64_t>(idx.size()));
  st.counters["serial_share"] = static_cast<double>(out.serial_placed + out.spilled) / static_cast<double>(idx.size());
}
BENCHMARK(BM_HierarchicalPartition)->Arg(14)->Arg(17)->Arg(20);

void BM_BitmapEncodeDecode(benchmark::State& st) {
  const uint64_t m = 1ULL << 22;
  std::vector<uint64_t> pos;
  std::mt19937_64 g(6);
  for (uint64_t j = 0; j < m; ++j)
    if (static_cast<int64_t>(g() % 100) < st.range(0)) pos.push_back(j);
  std::vector<uint8_t> bm(zen::encode::bitmap_bytes(m));
  std::vector<uint64_t> back;
  for (auto _ : st) {
    zen::encode::bitmap_encode(pos.data(), pos.size(), m, bm.data());
    back.clear();
    zen::encode::bitmap_decode(bm.data(), m, back);
    benchmark::DoNotOptimize(back.data());
  }
  st.SetBytesProcessed(st.iterations() * static_cast<int64_t>(bm.size()) * 2);
}
BENCHMARK(BM_BitmapEncodeDecode)->Arg(1)->Arg(10)->Arg(50);

void BM_CooEncodeDecode(benchmark::State& st) {
  const size_t k = 1 << 18;
  auto keys = random_rows(1ULL << 30, k, 7);
  std::vector<float> vals(k, 2.0f);
  const auto it = zen::encode::wire_index_type(1ULL << 30);
  std::vector<uint8_t> buf(zen::encode::coo_bytes(k, 1, zen::DType::F32, it));
  std::vector<int64_t> k2;
  std::vector<uint8_t> v2;
  for (auto _ : st) {
    zen::encode::coo_encode(keys.data(), vals.data(), k, 1, zen::DType::F32, it, buf.data());
    k2.clear();
    v2.clear();
    zen::encode::coo_decode(buf.data(), buf.size(), 1ULL << 30, 1, zen::DType::F32, it, k2, v2);
    benchmark::DoNotOptimize(k2.data());
  }
  st.SetBytesProcessed(st.iterations() * static_cast<int64_t>(buf.size()) * 2);
}
BENCHMARK(BM_CooEncodeDecode);

// Owner stage of balanced at D = 1 f32: n = range(0) sorted segments of 2^range(1) positions each
// (overlap about 2) over an owner set of m = 2^21 positions, summed and written as an Elias-Fano
// pull message; range(2) = 0: accumulator over the set + presence bitmap (owner_accumulate), 1:
// merge of the sorted segments (owner_merge). One task.
void BM_OwnerStage(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0));
  const size_t k = size_t{1} << st.range(1);
  const bool merge = st.range(2) != 0;
  const uint64_t m = uint64_t{1} << 21;
  std::mt19937_64 g(11);
  std::vector<std::vector<uint32_t>> keys(static_cast<size_t>(n));
  std::vector<std::vector<float>> rows(static_cast<size_t>(n));
  std::vector<zen::plan::Segment> segs(static_cast<size_t>(n));
  for (int s = 0; s < n; ++s) {
    std::vector<uint8_t> used(m, 0);
    auto& ks = keys[static_cast<size_t>(s)];
    while (ks.size() < k) {
      // half the keys from a shared half of the set, so that segments overlap
      const uint64_t q = g() % 2 ? g() % (m / 2) : g() % m;
      if (!used[q]) used[q] = 1, ks.push_back(static_cast<uint32_t>(q));
    }
    std::sort(ks.begin(), ks.end());
    rows[static_cast<size_t>(s)].assign(k, 1.0f);
    segs[static_cast<size_t>(s)] = zen::plan::Segment{reinterpret_cast<const uint8_t*>(ks.data()),
                                                      reinterpret_cast<const uint8_t*>(rows[static_cast<size_t>(s)].data()), k};
  }
  zen::detail::ThreadPool pool(1);
  zen::plan::OwnerState os;
  std::vector<uint8_t> msg(zen::encode::ef_bytes(m, m) + m * sizeof(float));
  for (auto _ : st) {
    const uint64_t K = merge ? zen::plan::owner_merge<float>(os, segs.data(), n, 4, 1, m, pool, 0, "bench")
                             : zen::plan::owner_accumulate<float>(os, segs.data(), n, 4, 1, m, pool, 0, "bench");
    zen::plan::owner_write<float>(os, 4, 1, zen::wire::kEncEf, msg.data(), pool);
    benchmark::DoNotOptimize(K);
    benchmark::DoNotOptimize(msg.data());
  }
  st.SetItemsProcessed(st.iterations() * static_cast<int64_t>(k) * n);
}
BENCHMARK(BM_OwnerStage)->ArgsProduct({{2, 4, 6, 8}, {15, 17}, {0, 1}});

// Auto's decision without its collectives: the model's counts from the ranks' hash samples
// (model::estimate_from_sample) and the predictions of the default candidates, as auto::decide does
// them. n = range(0) ranks, each with a sorted sample of range(1) distinct rows (overlap about 2)
// of R = 2^18 rows, stride 3 (what auto samples of a 1 MB tensor at 1 % density); range(2) = 1 adds
// the predictions.
void BM_AutoModel(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0));
  const size_t k = static_cast<size_t>(st.range(1));
  const bool predict = st.range(2) != 0;
  zen::SchemeOptions opt;
  zen::model::Problem p;
  p.rows = uint64_t{1} << 18;
  p.n = n;
  p.opt = opt;
  std::vector<std::vector<int64_t>> sample(static_cast<size_t>(n));
  std::vector<uint64_t> counts(static_cast<size_t>(n), 3 * k);
  const auto shared = random_rows(p.rows, k, 5);
  for (int r = 0; r < n; ++r) {
    auto& s = sample[static_cast<size_t>(r)];
    s = random_rows(p.rows, k / 2, 100 + static_cast<uint64_t>(r));
    s.insert(s.end(), shared.begin(), shared.begin() + static_cast<std::ptrdiff_t>(k - k / 2));
    std::sort(s.begin(), s.end());
    s.erase(std::unique(s.begin(), s.end()), s.end());
  }
  const zen::model::Link link = zen::model::Link::of(opt.autotune);
  const std::vector<std::string> cand{"balanced", "allgather", "sparcml", "sparse_ps", "dense_native"};
  for (auto _ : st) {
    auto c = zen::model::estimate_from_sample(p, sample, counts, 3);
    benchmark::DoNotOptimize(c.K);
    if (predict)
      for (const auto& name : cand) {
        auto pr = zen::model::predict(name, p, c, link);
        benchmark::DoNotOptimize(pr.seconds);
      }
  }
  st.SetItemsProcessed(st.iterations() * static_cast<int64_t>(k) * n);
}
BENCHMARK(BM_AutoModel)->ArgsProduct({{2, 4, 8}, {870}, {0, 1}})->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
