#pragma once
// Every device kernel against the CPU implementation, bit for bit, on zen::test::TestBackend
// (define it before including: cuda::Host runs the kernel bodies on the CPU, cuda::Gpu on a GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "device_test_util.hpp"
#include "zen/cuda/kernels.hpp"
#include "zen/encode/bitmap.hpp"
#include "zen/encode/coo.hpp"
#include "zen/hash/region_hash.hpp"

namespace zen::test::kernels {

using B = TestBackend;
using K = cuda::Kernels<B>;
using DBuf = Buf<B>;

inline void sync() { cuda::Memory<B>::synchronize(nullptr); }

inline std::vector<int64_t> distinct_indices(uint64_t rows, size_t k, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::set<int64_t> s;
  if (k >= rows) {
    std::vector<int64_t> all(rows);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), g);
    return all;
  }
  std::vector<int64_t> out;
  while (out.size() < k) {
    const int64_t x = static_cast<int64_t>(g() % rows);
    if (s.insert(x).second) out.push_back(x);
  }
  if (k > 2) {  // index 0 and N-1 always present
    if (!s.count(0)) out[0] = 0;
    if (!s.count(static_cast<int64_t>(rows - 1))) out[1] = static_cast<int64_t>(rows - 1);
  }
  return out;
}

template <typename T>
std::vector<T> random_values(size_t n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(-3.0, 3.0);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(u(g));
  return v;
}

inline void expect_no_device_error(const DBuf& err) {
  auto e = err.template to_vector<cuda::DeviceError>(1)[0];
  EXPECT_EQ(e.code, 0u) << cuda::device_error_name(e.code) << " owner " << e.owner << " a " << e.a << " b " << e.b;
}

// hash_partition: every entry exactly once, in its owner's segment, with the CPU's owner/position
// and the CPU's per-owner counts. Returns the spilled count.
inline uint64_t check_partition(uint64_t rows, uint32_t n, size_t nnz, IndexType it, const cuda::HashParams& hp) {
  auto idx64 = distinct_indices(rows, nnz, rows * 31 + n);
  nnz = idx64.size();
  const Partitioner part = Partitioner::make(rows, n, 77);
  DBuf d_idx;
  if (it == IndexType::I32) {
    std::vector<int32_t> v(idx64.begin(), idx64.end());
    d_idx = DBuf::from(v);
  } else {
    d_idx = DBuf::from(idx64);
  }
  const cuda::HashPrepared prep = K::hash_prepare(nnz, n, hp);
  DBuf ws(prep.bytes);
  DBuf entry(nnz * 4), pos(nnz * 8), counts(n * 8), serial(n * 4), spilled(8), err(sizeof(cuda::DeviceError));
  err.fill(0);
  K::hash_partition(prep, d_idx.get(), it, nnz, part, ws.get(), ws.size(), entry.template get<uint32_t>(),
                    pos.template get<uint64_t>(), counts.template get<uint64_t>(), serial.template get<uint32_t>(),
                    spilled.template get<uint64_t>(), err.template get<cuda::DeviceError>(), nullptr);
  sync();
  expect_no_device_error(err);
  auto h_entry = entry.template to_vector<uint32_t>(nnz);
  auto h_pos = pos.template to_vector<uint64_t>(nnz);
  auto h_counts = counts.template to_vector<uint64_t>(n);
  auto h_spilled = spilled.template to_vector<uint64_t>(1)[0];
  // CPU reference of the same partition.
  SparseView v;
  v.dense_len = rows;
  v.nnz = nnz;
  v.index_type = IndexType::I64;
  v.indices = idx64.data();
  HashPartition cpu;
  RegionHashConfig cfg;
  cfg.hash_functions = hp.hash_functions;
  cfg.parallel_factor = hp.parallel_factor;
  cfg.serial_fraction = hp.serial_fraction;
  cfg.seed = hp.seed;
  region_hash_partition(v, part, cfg, cpu);
  std::vector<char> seen(nnz, 0);
  size_t o = 0;
  for (uint32_t p = 0; p < n; ++p) {
    EXPECT_EQ(h_counts[p], cpu.count(p)) << "owner " << p;
    for (uint64_t k = 0; k < h_counts[p] && o < nnz; ++k, ++o) {
      const uint32_t e = h_entry[o];
      EXPECT_LT(e, nnz);
      if (e >= nnz) return h_spilled;
      EXPECT_FALSE(seen[e]) << "entry " << e << " twice";
      seen[e] = 1;
      uint32_t op;
      uint64_t q;
      part.locate(static_cast<uint64_t>(idx64[e]), &op, &q);
      EXPECT_EQ(op, p) << "entry " << e << " in the wrong segment";
      EXPECT_EQ(h_pos[e], q);
    }
  }
  EXPECT_EQ(o, nnz);
  return h_spilled;
}

TEST(DeviceKernels, HashPartitionMatchesCpu) {
  ZEN_REQUIRE_BACKEND();
  cuda::HashParams hp;
  hp.seed = 5;
  for (uint32_t n : {1u, 3u, 8u, 16u, 300u})
    for (uint64_t rows : {1ULL, 1000ULL, 1000003ULL})
      for (size_t nnz : {size_t{0}, size_t{1}, size_t{500}, size_t{1025}, size_t{200000}}) {
        if (nnz > rows) continue;
        SCOPED_TRACE("n=" + std::to_string(n) + " rows=" + std::to_string(rows) + " nnz=" + std::to_string(nnz));
        check_partition(rows, n, nnz, nnz % 2 ? IndexType::I32 : IndexType::I64, hp);
      }
}

TEST(DeviceKernels, HashOverflowIsLossless) {
  ZEN_REQUIRE_BACKEND();
  cuda::HashParams hp;
  hp.hash_functions = 1;
  hp.parallel_factor = 0.25;  // parallel region far too small
  hp.serial_fraction = 0.01;  // serial region overflows: entries spill
  EXPECT_GT(check_partition(1 << 22, 4, 300000, IndexType::I64, hp), 0u) << "the overflow path was not exercised";
}

// The parallel region is capped at max_table_bytes (the L2-sized table); what does not fit takes the
// serial region or spills, and nothing is lost.
TEST(DeviceKernels, TableCapIsLossless) {
  ZEN_REQUIRE_BACKEND();
  cuda::HashParams hp;
  hp.max_table_bytes = 4 * 4096;  // 4096 parallel slots for 100000 entries
  const cuda::HashCaps c = cuda::hash_caps(100000, 5, hp);
  EXPECT_EQ(c.cap1, (4096 + 4) / 5);
  EXPECT_GT(check_partition(1000003, 5, 100000, IndexType::I32, hp), 50000u);
}

TEST(DeviceKernels, NonzeroRowsAndGather) {
  ZEN_REQUIRE_BACKEND();
  const uint64_t rows = 100003;
  const uint32_t D = 3;
  std::vector<float> dense(rows * D, 0.0f);
  std::vector<int64_t> want;
  std::mt19937_64 g(3);
  for (uint64_t r = 0; r < rows; ++r)
    if (g() % 10 == 0 || r == rows - 1) {
      dense[r * D + (r % D)] = (r % 7 == 0) ? -0.0f : 1.5f;  // a row of only -0.0 counts as zero
      if (r % 7 != 0) want.push_back(static_cast<int64_t>(r));
    }
  const cuda::NonzeroPrepared prep = K::nonzero_prepare(rows);
  DBuf d = DBuf::from(dense), ws(prep.bytes), out(rows * 8), cnt(8), cnt2(8);
  K::count_nonzero_rows(prep, d.get(), DType::F32, rows, D, cnt2.template get<uint64_t>(), ws.get(), ws.size(), nullptr);
  K::nonzero_rows(prep, d.get(), DType::F32, rows, D, out.template get<int64_t>(), cnt.template get<uint64_t>(), ws.get(),
                  ws.size(), nullptr);
  sync();
  const uint64_t k = cnt.template to_vector<uint64_t>(1)[0];
  ASSERT_EQ(k, want.size());
  ASSERT_EQ(cnt2.template to_vector<uint64_t>(1)[0], want.size());
  ASSERT_EQ(out.template to_vector<int64_t>(k), want);
  // gather_rows through a row list.
  std::vector<uint32_t> entry(k);
  std::iota(entry.begin(), entry.end(), 0u);
  std::reverse(entry.begin(), entry.end());
  DBuf de = DBuf::from(entry), vals(k * D * 4);
  K::gather_rows(d.get(), out.template get<int64_t>(), de.template get<uint32_t>(), k, D, DType::F32, vals.get(), nullptr);
  sync();
  auto hv = vals.template to_vector<float>(k * D);
  for (size_t i = 0; i < k; ++i)
    for (uint32_t c = 0; c < D; ++c) ASSERT_EQ(hv[i * D + c], dense[want[entry[i]] * D + c]);
}

// pack_push: the CPU wire format (keys, then value rows) per owner segment, at any byte offset.
TEST(DeviceKernels, PackPushWireFormat) {
  ZEN_REQUIRE_BACKEND();
  for (int isz : {4, 8})
    for (uint32_t D : {1u, 3u}) {
      const uint32_t n = 5;
      const uint64_t rows = 5000;
      const size_t nnz = 1200;
      auto idx = distinct_indices(rows, nnz, 9);
      auto vals = random_values<half>(nnz * D, 4);
      const Partitioner part = Partitioner::make(rows, n, 1);
      cuda::HashParams hp;
      const cuda::HashPrepared prep = K::hash_prepare(nnz, n, hp);
      DBuf d_idx = DBuf::from(idx), d_vals = DBuf::from(vals), ws(prep.bytes);
      DBuf entry(nnz * 4), pos(nnz * 8), counts(n * 8), serial(n * 4), spilled(8), displ(n * 8), item_off((n + 1) * 8);
      const size_t eb = isz + D * sizeof(half);
      DBuf sbuf(nnz * eb);
      K::hash_partition(prep, d_idx.get(), IndexType::I64, nnz, part, ws.get(), ws.size(), entry.template get<uint32_t>(),
                        pos.template get<uint64_t>(), counts.template get<uint64_t>(), serial.template get<uint32_t>(),
                        spilled.template get<uint64_t>(), nullptr, nullptr);
      K::segment_displacements(counts.template get<uint64_t>(), n, eb, displ.template get<uint64_t>(),
                               item_off.template get<uint64_t>(), nullptr);
      K::pack_push(entry.template get<uint32_t>(), pos.template get<uint64_t>(), nnz, item_off.template get<uint64_t>(),
                   displ.template get<uint64_t>(), n, d_vals.get(), nullptr, D, DType::F16, isz, sbuf.bytes(), nullptr);
      sync();
      auto hc = counts.template to_vector<uint64_t>(n);
      auto hd = displ.template to_vector<uint64_t>(n);
      auto hs = sbuf.template to_vector<uint8_t>(nnz * eb);
      std::map<uint64_t, size_t> entry_of_pos[5];
      for (size_t e = 0; e < nnz; ++e) {
        uint32_t p;
        uint64_t q;
        part.locate(static_cast<uint64_t>(idx[e]), &p, &q);
        entry_of_pos[p][q] = e;
      }
      uint64_t off = 0;
      for (uint32_t p = 0; p < n; ++p) {
        ASSERT_EQ(hd[p], off);
        ASSERT_EQ(hc[p], entry_of_pos[p].size());
        for (uint64_t k = 0; k < hc[p]; ++k) {
          uint64_t key = 0;
          std::memcpy(&key, hs.data() + off + k * isz, isz);
          ASSERT_TRUE(entry_of_pos[p].count(key)) << "key " << key << " not owned by " << p;
          const size_t e = entry_of_pos[p][key];
          ASSERT_EQ(0, std::memcmp(hs.data() + off + hc[p] * isz + k * D * sizeof(half), &vals[e * D], D * sizeof(half)));
        }
        off += hc[p] * eb;
      }
    }
}

// owner_aggregate vs the CPU owner sum (source-rank order, accum_of, union support, any alignment).
template <typename T>
void check_aggregate(int isz, uint32_t D) {
  using A = typename accum_of<T>::type;
  const uint32_t n = 6;
  const uint64_t m = 20011;
  std::mt19937_64 g(isz * 10 + D + sizeof(T));
  std::vector<uint8_t> rbuf;
  std::vector<uint64_t> rcount(n), rdispl(n);
  std::map<uint64_t, std::vector<A>> acc;
  for (uint32_t src = 0; src < n; ++src) {
    const size_t cnt = src == 2 ? 0 : 700 + g() % 500;  // one empty source
    rcount[src] = cnt;
    rdispl[src] = rbuf.size();
    std::vector<uint64_t> keys(cnt);
    for (auto& k : keys) k = (src == 4 && &k == &keys[0]) ? 0 : g() % m;  // duplicates within a source too
    if (cnt) keys.back() = m - 1;
    auto vals = random_values<T>(cnt * D, g());
    std::vector<uint8_t> seg(cnt * (isz + D * sizeof(T)));
    for (size_t k = 0; k < cnt; ++k) std::memcpy(seg.data() + k * isz, &keys[k], isz);
    if (cnt) std::memcpy(seg.data() + cnt * isz, vals.data(), cnt * D * sizeof(T));
    rbuf.insert(rbuf.end(), seg.begin(), seg.end());
    for (size_t k = 0; k < cnt; ++k) {
      auto it = acc.find(keys[k]);
      if (it == acc.end()) {
        std::vector<A> a(D);
        for (uint32_t c = 0; c < D; ++c) a[c] = static_cast<A>(vals[k * D + c]);
        acc.emplace(keys[k], a);
      } else {
        for (uint32_t c = 0; c < D; ++c) it->second[c] += static_cast<A>(vals[k * D + c]);
      }
    }
  }
  const size_t received = std::accumulate(rcount.begin(), rcount.end(), size_t{0});
  const cuda::AggregatePrepared prep = K::aggregate_prepare(received, m);
  DBuf d_rbuf = DBuf::from(rbuf), d_rc = DBuf::from(rcount), d_rd = DBuf::from(rdispl);
  DBuf ws(prep.bytes), res_pos(received * 8), res_val(received * D * sizeof(T)), nr(8), err(sizeof(cuda::DeviceError));
  err.fill(0);
  K::owner_aggregate(prep, d_rbuf.bytes(), d_rc.template get<uint64_t>(), d_rd.template get<uint64_t>(), n, received, m, D,
                     dtype_of<T>::value, isz, ws.get(), ws.size(), res_pos.template get<uint64_t>(), res_val.get(),
                     nr.template get<uint64_t>(), err.template get<cuda::DeviceError>(), nullptr);
  sync();
  expect_no_device_error(err);
  const uint64_t Kr = nr.template to_vector<uint64_t>(1)[0];
  ASSERT_EQ(Kr, acc.size());
  auto hp = res_pos.template to_vector<uint64_t>(Kr);
  auto hv = res_val.template to_vector<T>(Kr * D);
  size_t r = 0;
  for (auto& [key, a] : acc) {
    ASSERT_EQ(hp[r], key);
    for (uint32_t c = 0; c < D; ++c) {
      const T want = static_cast<T>(a[c]);
      ASSERT_EQ(0, std::memcmp(&hv[r * D + c], &want, sizeof(T))) << "position " << key << " column " << c;
    }
    ++r;
  }
  // A key outside the owner set is reported, not silently used.
  std::vector<uint8_t> bad = rbuf;
  const uint64_t huge = m + 5;
  std::memcpy(bad.data() + rdispl[1], &huge, isz);
  DBuf d_bad = DBuf::from(bad);
  K::owner_aggregate(prep, d_bad.bytes(), d_rc.template get<uint64_t>(), d_rd.template get<uint64_t>(), n, received, m, D,
                     dtype_of<T>::value, isz, ws.get(), ws.size(), res_pos.template get<uint64_t>(), res_val.get(),
                     nr.template get<uint64_t>(), err.template get<cuda::DeviceError>(), nullptr);
  sync();
  auto e = err.template to_vector<cuda::DeviceError>(1)[0];
  EXPECT_EQ(e.code, static_cast<uint32_t>(cuda::kErrPushKeyRange));
  EXPECT_EQ(e.owner, 1u);
  EXPECT_EQ(e.a, huge);
}

TEST(DeviceKernels, OwnerAggregateMatchesCpuOrder) {
  ZEN_REQUIRE_BACKEND();
  for (int isz : {4, 8})
    for (uint32_t D : {1u, 3u}) {
      SCOPED_TRACE("isz " + std::to_string(isz) + " D " + std::to_string(D));
      check_aggregate<float>(isz, D);
      check_aggregate<half>(isz, D);
      check_aggregate<bfloat16>(isz, D);
      check_aggregate<double>(isz, D);
    }
}

TEST(DeviceKernels, BitmapEncodeMatchesCpuBytes) {
  ZEN_REQUIRE_BACKEND();
  for (uint64_t m : {1ULL, 7ULL, 8ULL, 31ULL, 32ULL, 33ULL, 1000ULL, 123457ULL})
    for (double dens : {0.0, 0.01, 0.5, 1.0}) {
      std::vector<uint64_t> pos;
      std::mt19937_64 g(m);
      for (uint64_t q = 0; q < m; ++q)
        if (dens >= 1.0 || (g() % 1000) < dens * 1000) pos.push_back(q);
      const size_t nb = encode::bitmap_bytes(m);
      std::vector<uint8_t> want(nb, 0);
      encode::bitmap_encode(pos.data(), pos.size(), m, want.data());
      for (size_t off : {size_t{0}, size_t{3}}) {  // also an unaligned destination
        DBuf d_pos = DBuf::from(pos), flags(m), out(nb + 8);
        out.fill(0xEE);
        K::bitmap_encode(d_pos.template get<uint64_t>(), pos.size(), m, flags.bytes(), out.bytes() + off, nullptr);
        sync();
        auto got = out.template to_vector<uint8_t>(nb + 8);
        ASSERT_EQ(0, std::memcmp(got.data() + off, want.data(), nb)) << "m=" << m << " density " << dens;
        for (size_t b = off + nb; b < nb + 8; ++b) ASSERT_EQ(got[b], 0xEE) << "wrote past the bitmap, m=" << m;
      }
    }
}

// bitmap_scatter / coo_scatter: popcount-prefix decode into the dense output, vs the CPU decode.
TEST(DeviceKernels, BitmapAndCooScatterMatchCpu) {
  ZEN_REQUIRE_BACKEND();
  const uint64_t rows = 50021;
  const uint32_t n = 3, D = 2;
  const Partitioner part = Partitioner::make(rows, n, 8);
  const cuda::ScatterPrepared prep = K::scatter_prepare(part.owner_size(0));
  for (uint32_t owner = 0; owner < n; ++owner)
    for (int isz : {4, 8}) {
      const uint64_t m = part.owner_size(owner);
      std::vector<uint64_t> pos;
      std::mt19937_64 g(owner);
      for (uint64_t q = 0; q < m; ++q)
        if (g() % 3 == 0 || q == m - 1) pos.push_back(q);
      const size_t Kn = pos.size();
      auto vals = random_values<bfloat16>(Kn * D, owner + 1);
      // CPU expectation.
      std::vector<bfloat16> want(rows * D, bfloat16(0.0f));
      for (size_t r = 0; r < Kn; ++r)
        for (uint32_t c = 0; c < D; ++c) want[part.index_at(owner, pos[r]) * D + c] = vals[r * D + c];
      // Bitmap message at an odd offset: [bitmap][values].
      const size_t nb = encode::bitmap_bytes(m);
      std::vector<uint8_t> msg(1 + nb + Kn * D * 2, 0);
      encode::bitmap_encode(pos.data(), Kn, m, msg.data() + 1);
      std::memcpy(msg.data() + 1 + nb, vals.data(), Kn * D * 2);
      DBuf d_msg = DBuf::from(msg), dense(rows * D * 2), ws(prep.bytes), err(sizeof(cuda::DeviceError));
      dense.fill(0);
      err.fill(0);
      K::bitmap_scatter(prep, d_msg.bytes() + 1, m, d_msg.bytes() + 1 + nb, Kn, part, owner, D, DType::BF16, dense.get(),
                        ws.get(), ws.size(), err.template get<cuda::DeviceError>(), nullptr);
      sync();
      expect_no_device_error(err);
      auto got = dense.template to_vector<bfloat16>(rows * D);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), rows * D * 2)) << "bitmap owner " << owner;
      // Wrong announced count is reported.
      K::bitmap_scatter(prep, d_msg.bytes() + 1, m, d_msg.bytes() + 1 + nb, Kn + 1, part, owner, D, DType::BF16,
                        dense.get(), ws.get(), ws.size(), err.template get<cuda::DeviceError>(), nullptr);
      sync();
      EXPECT_EQ(err.template to_vector<cuda::DeviceError>(1)[0].code, static_cast<uint32_t>(cuda::kErrBitmapCount));
      err.fill(0);
      // A padding bit set is reported.
      if (m % 8) {
        std::vector<uint8_t> badm = msg;
        badm[1 + nb - 1] |= 0x80;
        DBuf d_bad = DBuf::from(badm);
        K::bitmap_scatter(prep, d_bad.bytes() + 1, m, d_bad.bytes() + 1 + nb, Kn, part, owner, D, DType::BF16,
                          dense.get(), ws.get(), ws.size(), err.template get<cuda::DeviceError>(), nullptr);
        sync();
        EXPECT_EQ(err.template to_vector<cuda::DeviceError>(1)[0].code, static_cast<uint32_t>(cuda::kErrBitmapPadding));
        err.fill(0);
      }
      // COO message: [keys][values], keys via coo_encode_keys.
      DBuf d_pos = DBuf::from(pos), coo(Kn * (isz + D * 2) + 1);
      K::coo_encode_keys(d_pos.template get<uint64_t>(), Kn, isz, coo.bytes() + 1, nullptr);
      sync();
      coo.upload(vals.data(), Kn * D * 2, 1 + Kn * isz);
      std::vector<int64_t> keys64(pos.begin(), pos.end());
      std::vector<uint8_t> coo_cpu(Kn * (isz + D * 2));
      encode::coo_encode(keys64.data(), vals.data(), Kn, D, DType::BF16, isz == 4 ? IndexType::I32 : IndexType::I64,
                         coo_cpu.data());
      std::vector<uint8_t> coo_dev(coo_cpu.size());
      coo.download(coo_dev.data(), coo_dev.size(), 1);
      ASSERT_EQ(coo_dev, coo_cpu) << "COO keys differ from the CPU encoding";
      dense.fill(0);
      K::coo_scatter(coo.bytes() + 1, Kn, isz, coo.bytes() + 1 + Kn * isz, part, owner, D, DType::BF16, dense.get(),
                     err.template get<cuda::DeviceError>(), nullptr);
      sync();
      expect_no_device_error(err);
      got = dense.template to_vector<bfloat16>(rows * D);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), rows * D * 2)) << "coo owner " << owner;
    }
}

TEST(DeviceKernels, ReduceRankOrderMatchesHost) {
  ZEN_REQUIRE_BACKEND();
  const int n = 5;
  const size_t count = 10007;
  std::vector<std::vector<half>> in;
  std::vector<DBuf> bufs;
  std::vector<const void*> ptrs;
  for (int p = 0; p < n; ++p) {
    in.push_back(random_values<half>(count, p + 100));
    bufs.push_back(DBuf::from(in.back()));
    ptrs.push_back(bufs.back().get());
  }
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
    DBuf out(count * 2);
    K::reduce_rank_order(ptrs.data(), n, count, DType::F16, op, out.get(), nullptr);
    sync();
    auto got = out.template to_vector<half>(count);
    for (size_t i = 0; i < count; ++i) {
      float acc = static_cast<float>(in[0][i]);
      for (int p = 1; p < n; ++p) {
        const float v = static_cast<float>(in[p][i]);
        acc = op == ReduceOp::Sum ? acc + v : op == ReduceOp::Max ? (v > acc ? v : acc) : (v < acc ? v : acc);
      }
      const half want = static_cast<half>(acc);
      ASSERT_EQ(0, std::memcmp(&got[i], &want, 2)) << "element " << i;
    }
  }
}

// 16-bit rounding of fp32 sums equals Eigen's host conversions (ties, subnormals, overflow to inf);
// on the CPU this checks the bfloat16 bit arithmetic the GPU also runs. NaN is left out: GPU
// arithmetic returns the canonical NaN, so the sign and payload of a NaN result may differ from the
// host's (documented in docs/gpu.md).
TEST(DeviceKernels, SixteenBitRoundingMatchesHost) {
  ZEN_REQUIRE_BACKEND();
  std::vector<float> xs{0.0f,          -0.0f,        1.0f,    65504.0f, 65519.0f, 65520.0f, 1e-8f,    6.1e-5f,
                        3.0e-8f,       1.0009765625f, 1.00048828125f, 3.14159f, -2.5e38f, INFINITY, -INFINITY};
  std::mt19937 g(1);
  while (xs.size() < 4000) {
    uint32_t u = g();
    float f;
    std::memcpy(&f, &u, 4);
    if (!std::isnan(f)) xs.push_back(f);
  }
  // Two sources a[i] + b[i] (16-bit inputs), summed in fp32 and rounded once, backend vs host.
  for (DType t : {DType::F16, DType::BF16}) {
    std::vector<uint16_t> a(xs.size()), b(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) {
      if (t == DType::F16) {
        half h1 = static_cast<half>(xs[i]), h2 = static_cast<half>(xs[(i * 7) % xs.size()] * 0.001f);
        std::memcpy(&a[i], &h1, 2);
        std::memcpy(&b[i], &h2, 2);
      } else {
        bfloat16 h1 = static_cast<bfloat16>(xs[i]), h2 = static_cast<bfloat16>(xs[(i * 7) % xs.size()] * 0.001f);
        std::memcpy(&a[i], &h1, 2);
        std::memcpy(&b[i], &h2, 2);
      }
    }
    DBuf da = DBuf::from(a), db = DBuf::from(b), out(a.size() * 2);
    const void* ptrs[2] = {da.get(), db.get()};
    K::reduce_rank_order(ptrs, 2, a.size(), t, ReduceOp::Sum, out.get(), nullptr);
    sync();
    auto got = out.template to_vector<uint16_t>(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      uint16_t want;
      if (t == DType::F16) {
        half x, y;
        std::memcpy(static_cast<void*>(&x), &a[i], 2);
        std::memcpy(static_cast<void*>(&y), &b[i], 2);
        const float f = static_cast<float>(x) + static_cast<float>(y);
        if (std::isnan(f)) continue;  // inf + -inf
        half s = static_cast<half>(f);
        std::memcpy(&want, &s, 2);
      } else {
        bfloat16 x, y;
        std::memcpy(static_cast<void*>(&x), &a[i], 2);
        std::memcpy(static_cast<void*>(&y), &b[i], 2);
        const float f = static_cast<float>(x) + static_cast<float>(y);
        if (std::isnan(f)) continue;
        bfloat16 s = static_cast<bfloat16>(f);
        std::memcpy(&want, &s, 2);
      }
      ASSERT_EQ(got[i], want) << dtype_name(t) << " element " << i;
    }
  }
}

TEST(DeviceKernels, SyntheticGradientDensity) {
  ZEN_REQUIRE_BACKEND();
  const uint64_t rows = 1 << 20;
  const cuda::NonzeroPrepared prep = K::nonzero_prepare(rows);
  DBuf d(rows * 4), d2(rows * 4), ws(prep.bytes), cnt(8);
  K::fill_sparse_gradient(d.get(), DType::F32, rows, 1, 0.052, 0.0, 7, nullptr);
  K::fill_sparse_gradient(d2.get(), DType::F32, rows, 1, 0.052, 0.0, 7, nullptr);
  K::count_nonzero_rows(prep, d.get(), DType::F32, rows, 1, cnt.template get<uint64_t>(), ws.get(), ws.size(), nullptr);
  sync();
  const double dens = static_cast<double>(cnt.template to_vector<uint64_t>(1)[0]) / rows;
  EXPECT_NEAR(dens, 0.052, 0.003);
  EXPECT_EQ(d.template to_vector<float>(rows), d2.template to_vector<float>(rows));  // deterministic
}

TEST(DeviceKernels, HashReportsIndexOutOfRange) {
  ZEN_REQUIRE_BACKEND();
  cuda::HashParams hp;
  std::vector<int32_t> idx{5, -1, 3};
  const Partitioner part = Partitioner::make(10, 2, 0);
  const cuda::HashPrepared prep = K::hash_prepare(3, 2, hp);
  DBuf d_idx = DBuf::from(idx), ws(prep.bytes), entry(12), pos(24), counts(16), serial(8), spilled(8),
      err(sizeof(cuda::DeviceError));
  err.fill(0);
  K::hash_partition(prep, d_idx.get(), IndexType::I32, 3, part, ws.get(), ws.size(), entry.template get<uint32_t>(),
                    pos.template get<uint64_t>(), counts.template get<uint64_t>(), serial.template get<uint32_t>(),
                    spilled.template get<uint64_t>(), err.template get<cuda::DeviceError>(), nullptr);
  sync();
  auto e = err.template to_vector<cuda::DeviceError>(1)[0];
  EXPECT_EQ(e.code, static_cast<uint32_t>(cuda::kErrIndexRange));
  EXPECT_EQ(e.owner, 1u);
  EXPECT_EQ(static_cast<int64_t>(e.a), -1);
  EXPECT_EQ(e.b, 10u);
}

TEST(DeviceKernels, WorkspaceAndPreparedLimitsAreChecked) {
  ZEN_REQUIRE_BACKEND();
  cuda::HashParams hp;
  std::vector<int64_t> idx{1, 2, 3};
  const cuda::HashPrepared prep = K::hash_prepare(3, 2, hp);
  DBuf d_idx = DBuf::from(idx), ws(64), entry(12), pos(24), counts(16), serial(8), spilled(8);
  const Partitioner part = Partitioner::make(10, 2, 0);
  try {
    K::hash_partition(prep, d_idx.get(), IndexType::I64, 3, part, ws.get(), 64, entry.template get<uint32_t>(),
                      pos.template get<uint64_t>(), counts.template get<uint64_t>(), serial.template get<uint32_t>(),
                      spilled.template get<uint64_t>(), nullptr, nullptr);
    FAIL() << "accepted a 64-byte workspace";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Result::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("64 bytes"), std::string::npos) << e.what();
  }
  // More entries than prepared for.
  const cuda::HashPrepared small = K::hash_prepare(2, 2, hp);
  DBuf ws2(prep.bytes);
  EXPECT_THROW(K::hash_partition(small, d_idx.get(), IndexType::I64, 3, part, ws2.get(), ws2.size(),
                                 entry.template get<uint32_t>(), pos.template get<uint64_t>(),
                                 counts.template get<uint64_t>(), serial.template get<uint32_t>(),
                                 spilled.template get<uint64_t>(), nullptr, nullptr),
               Error);
  EXPECT_THROW(K::hash_prepare(10, cuda::kMaxHashOwners + 1, hp), Error);
}

}  // namespace zen::test::kernels
