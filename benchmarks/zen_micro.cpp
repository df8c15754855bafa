// Micro-benchmarks (Google Benchmark) of the CPU data-path steps: h0 (pi / pi^-1), hierarchical
// hashing, owner aggregation inputs, and the COO / hash-bitmap encoders. Throughputs are items or
// bytes per second; run `build/bin/zen_micro --benchmark_min_time=0.05`.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "zen/encode/bitmap.hpp"
#include "zen/encode/coo.hpp"
#include "zen/hash/hash.hpp"
#include "zen/hash/hierarchical.hpp"

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

// Hierarchical hashing of k = 2^range(0) non-zeros of N = 2^24 over 4 owners, one thread, with the
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
  zen::HierarchicalHashConfig cfg;
  zen::HashPartition out;
  zen::HierarchicalHash table;
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

}  // namespace

BENCHMARK_MAIN();
