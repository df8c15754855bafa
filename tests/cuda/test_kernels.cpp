// Every CUDA kernel against the CPU implementation, bit for bit. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <cmath>
#include <set>

#include "gpu_test_util.hpp"
#include "zen/cuda/kernels.hpp"
#include "zen/encode/bitmap.hpp"
#include "zen/encode/coo.hpp"
#include "zen/hash/hierarchical.hpp"

using namespace zen;
using zen::test::DevBuf;

namespace {

std::vector<int64_t> distinct_indices(uint64_t rows, size_t k, uint64_t seed) {
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

void expect_no_device_error(const DevBuf& err) {
  auto e = err.to_vector<cuda::DeviceError>(1)[0];
  EXPECT_EQ(e.code, 0u) << cuda::device_error_name(e.code) << " owner " << e.owner << " a " << e.a << " b " << e.b;
}

// hash_partition: every entry exactly once, in its owner's segment, with the CPU's owner/position
// and the CPU's per-owner counts.
void check_partition(uint64_t rows, uint32_t n, size_t nnz, IndexType it, const cuda::HashParams& hp, bool expect_spill) {
  auto idx64 = distinct_indices(rows, nnz, rows * 31 + n);
  nnz = idx64.size();
  const Partitioner part = Partitioner::make(rows, n, 77);
  DevBuf d_idx;
  if (it == IndexType::I32) {
    std::vector<int32_t> v(idx64.begin(), idx64.end());
    d_idx = DevBuf::from(v);
  } else {
    d_idx = DevBuf::from(idx64);
  }
  DevBuf ws(cuda::hash_partition_workspace(nnz, n, hp));
  DevBuf entry(nnz * 4), pos(nnz * 8), counts(n * 8), serial(n * 4), spilled(8), err(sizeof(cuda::DeviceError));
  cudaMemset(err.get(), 0, sizeof(cuda::DeviceError));
  cuda::hash_partition(d_idx.get(), it, nnz, part, hp, ws.get(), ws.size(), entry.get<uint32_t>(), pos.get<uint64_t>(),
                       counts.get<uint64_t>(), serial.get<uint32_t>(), spilled.get<uint64_t>(), err.get<cuda::DeviceError>(), nullptr);
  ZEN_CUDA_OK(cudaDeviceSynchronize());
  expect_no_device_error(err);
  auto h_entry = entry.to_vector<uint32_t>(nnz);
  auto h_pos = pos.to_vector<uint64_t>(nnz);
  auto h_counts = counts.to_vector<uint64_t>(n);
  auto h_spilled = spilled.to_vector<uint64_t>(1)[0];
  // CPU reference of the same partition.
  SparseView v;
  v.dense_len = rows;
  v.nnz = nnz;
  v.index_type = IndexType::I64;
  v.indices = idx64.data();
  HashPartition cpu;
  HierarchicalHashConfig cfg;
  cfg.hash_functions = hp.hash_functions;
  cfg.parallel_factor = hp.parallel_factor;
  cfg.serial_fraction = hp.serial_fraction;
  cfg.seed = hp.seed;
  hierarchical_partition(v, part, cfg, cpu);
  std::vector<char> seen(nnz, 0);
  size_t o = 0;
  for (uint32_t p = 0; p < n; ++p) {
    ASSERT_EQ(h_counts[p], cpu.count(p)) << "owner " << p;
    for (uint64_t k = 0; k < h_counts[p]; ++k, ++o) {
      const uint32_t e = h_entry[o];
      ASSERT_LT(e, nnz);
      ASSERT_FALSE(seen[e]) << "entry " << e << " twice";
      seen[e] = 1;
      uint32_t op;
      uint64_t q;
      part.locate(static_cast<uint64_t>(idx64[e]), &op, &q);
      ASSERT_EQ(op, p) << "entry " << e << " in the wrong segment";
      ASSERT_EQ(h_pos[e], q);
    }
  }
  ASSERT_EQ(o, nnz);
  if (expect_spill) {
    EXPECT_GT(h_spilled, 0u) << "the overflow path was not exercised";
  }
}

}  // namespace

TEST(CudaKernels, HashPartitionMatchesCpu) {
  ZEN_REQUIRE_GPU();
  cuda::HashParams hp;
  hp.seed = 5;
  for (uint32_t n : {1u, 3u, 8u, 16u})
    for (uint64_t rows : {1ULL, 1000ULL, 1000003ULL})
      for (size_t nnz : {size_t{0}, size_t{1}, size_t{500}, size_t{200000}}) {
        if (nnz > rows) continue;
        SCOPED_TRACE("n=" + std::to_string(n) + " rows=" + std::to_string(rows) + " nnz=" + std::to_string(nnz));
        check_partition(rows, n, nnz, nnz % 2 ? IndexType::I32 : IndexType::I64, hp, false);
      }
}

TEST(CudaKernels, HashOverflowIsLossless) {
  ZEN_REQUIRE_GPU();
  cuda::HashParams hp;
  hp.hash_functions = 1;
  hp.parallel_factor = 0.25;  // parallel region far too small
  hp.serial_fraction = 0.01;  // serial region overflows: entries spill
  check_partition(1 << 22, 4, 300000, IndexType::I64, hp, true);
}

TEST(CudaKernels, NonzeroRowsAndGather) {
  ZEN_REQUIRE_GPU();
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
  DevBuf d = DevBuf::from(dense), ws(cuda::nonzero_rows_workspace(rows)), out(rows * 8), cnt(8), cnt2(8);
  cuda::count_nonzero_rows(d.get(), DType::F32, rows, D, cnt2.get<uint64_t>(), ws.get(), ws.size(), nullptr);
  cuda::nonzero_rows(d.get(), DType::F32, rows, D, out.get<int64_t>(), cnt.get<uint64_t>(), ws.get(), ws.size(), nullptr);
  ZEN_CUDA_OK(cudaDeviceSynchronize());
  const uint64_t k = cnt.to_vector<uint64_t>(1)[0];
  ASSERT_EQ(k, want.size());
  ASSERT_EQ(cnt2.to_vector<uint64_t>(1)[0], want.size());
  ASSERT_EQ(out.to_vector<int64_t>(k), want);
  // gather_rows through a row list.
  std::vector<uint32_t> entry(k);
  std::iota(entry.begin(), entry.end(), 0u);
  std::reverse(entry.begin(), entry.end());
  DevBuf de = DevBuf::from(entry), vals(k * D * 4);
  cuda::gather_rows(d.get(), out.get<int64_t>(), de.get<uint32_t>(), k, D, DType::F32, vals.get(), nullptr);
  ZEN_CUDA_OK(cudaDeviceSynchronize());
  auto hv = vals.to_vector<float>(k * D);
  for (size_t i = 0; i < k; ++i)
    for (uint32_t c = 0; c < D; ++c) ASSERT_EQ(hv[i * D + c], dense[want[entry[i]] * D + c]);
}

// pack_push: the CPU wire format (keys, then value rows) per owner segment, at any byte offset.
TEST(CudaKernels, PackPushWireFormat) {
  ZEN_REQUIRE_GPU();
  for (int isz : {4, 8})
    for (uint32_t D : {1u, 3u}) {
      const uint32_t n = 5;
      const uint64_t rows = 5000;
      const size_t nnz = 1200;
      auto idx = distinct_indices(rows, nnz, 9);
      auto vals = random_values<half>(nnz * D, 4);
      const Partitioner part = Partitioner::make(rows, n, 1);
      cuda::HashParams hp;
      DevBuf d_idx = DevBuf::from(idx), d_vals = DevBuf::from(vals), ws(cuda::hash_partition_workspace(nnz, n, hp));
      DevBuf entry(nnz * 4), pos(nnz * 8), counts(n * 8), serial(n * 4), spilled(8), displ(n * 8), item_off((n + 1) * 8);
      const size_t eb = isz + D * sizeof(half);
      DevBuf sbuf(nnz * eb);
      cuda::hash_partition(d_idx.get(), IndexType::I64, nnz, part, hp, ws.get(), ws.size(), entry.get<uint32_t>(),
                           pos.get<uint64_t>(), counts.get<uint64_t>(), serial.get<uint32_t>(), spilled.get<uint64_t>(),
                           nullptr, nullptr);
      cuda::segment_displacements(counts.get<uint64_t>(), n, eb, displ.get<uint64_t>(), item_off.get<uint64_t>(), nullptr);
      cuda::pack_push(entry.get<uint32_t>(), pos.get<uint64_t>(), nnz, item_off.get<uint64_t>(), displ.get<uint64_t>(), n,
                      d_vals.get(), nullptr, D, DType::F16, isz, sbuf.bytes(), nullptr);
      ZEN_CUDA_OK(cudaDeviceSynchronize());
      auto hc = counts.to_vector<uint64_t>(n);
      auto hd = displ.to_vector<uint64_t>(n);
      auto hs = sbuf.to_vector<uint8_t>(nnz * eb);
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
    std::memcpy(seg.data() + cnt * isz, vals.data(), cnt * D * sizeof(T));
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
  DevBuf d_rbuf = DevBuf::from(rbuf), d_rc = DevBuf::from(rcount), d_rd = DevBuf::from(rdispl);
  DevBuf ws(cuda::aggregate_workspace(received, m)), res_pos(received * 8), res_val(received * D * sizeof(T)), nr(8),
      err(sizeof(cuda::DeviceError));
  cudaMemset(err.get(), 0, sizeof(cuda::DeviceError));
  cuda::owner_aggregate(d_rbuf.bytes(), d_rc.get<uint64_t>(), d_rd.get<uint64_t>(), n, received, m, D, dtype_of<T>::value,
                        isz, ws.get(), ws.size(), res_pos.get<uint64_t>(), res_val.get(), nr.get<uint64_t>(),
                        err.get<cuda::DeviceError>(), nullptr);
  ZEN_CUDA_OK(cudaDeviceSynchronize());
  expect_no_device_error(err);
  const uint64_t K = nr.to_vector<uint64_t>(1)[0];
  ASSERT_EQ(K, acc.size());
  auto hp = res_pos.to_vector<uint64_t>(K);
  auto hv = res_val.to_vector<T>(K * D);
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
  DevBuf d_bad = DevBuf::from(bad);
  cuda::owner_aggregate(d_bad.bytes(), d_rc.get<uint64_t>(), d_rd.get<uint64_t>(), n, received, m, D, dtype_of<T>::value,
                        isz, ws.get(), ws.size(), res_pos.get<uint64_t>(), res_val.get(), nr.get<uint64_t>(),
                        err.get<cuda::DeviceError>(), nullptr);
  ZEN_CUDA_OK(cudaDeviceSynchronize());
  auto e = err.to_vector<cuda::DeviceError>(1)[0];
  EXPECT_EQ(e.code, static_cast<uint32_t>(cuda::kErrPushKeyRange));
  EXPECT_EQ(e.owner, 1u);
  EXPECT_EQ(e.a, huge);
}

TEST(CudaKernels, OwnerAggregateMatchesCpuOrder) {
  ZEN_REQUIRE_GPU();
  for (int isz : {4, 8})
    for (uint32_t D : {1u, 3u}) {
      SCOPED_TRACE("isz " + std::to_string(isz) + " D " + std::to_string(D));
      check_aggregate<float>(isz, D);
      check_aggregate<half>(isz, D);
      check_aggregate<bfloat16>(isz, D);
      check_aggregate<double>(isz, D);
    }
}

TEST(CudaKernels, BitmapEncodeMatchesCpuBytes) {
  ZEN_REQUIRE_GPU();
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
        DevBuf d_pos = DevBuf::from(pos), flags(m), out(nb + 8);
        cudaMemset(out.get(), 0xEE, nb + 8);
        cuda::bitmap_encode(d_pos.get<uint64_t>(), pos.size(), m, flags.bytes(), out.bytes() + off, nullptr);
        ZEN_CUDA_OK(cudaDeviceSynchronize());
        auto got = out.to_vector<uint8_t>(nb + 8);
        ASSERT_EQ(0, std::memcmp(got.data() + off, want.data(), nb)) << "m=" << m << " density " << dens;
        for (size_t b = off + nb; b < nb + 8; ++b) ASSERT_EQ(got[b], 0xEE) << "wrote past the bitmap, m=" << m;
      }
    }
}

// bitmap_scatter / coo_scatter: popcount-prefix decode into the dense output, vs the CPU decode.
TEST(CudaKernels, BitmapAndCooScatterMatchCpu) {
  ZEN_REQUIRE_GPU();
  const uint64_t rows = 50021;
  const uint32_t n = 3, D = 2;
  const Partitioner part = Partitioner::make(rows, n, 8);
  for (uint32_t owner = 0; owner < n; ++owner)
    for (int isz : {4, 8}) {
      const uint64_t m = part.owner_size(owner);
      std::vector<uint64_t> pos;
      std::mt19937_64 g(owner);
      for (uint64_t q = 0; q < m; ++q)
        if (g() % 3 == 0 || q == m - 1) pos.push_back(q);
      const size_t K = pos.size();
      auto vals = random_values<bfloat16>(K * D, owner + 1);
      // CPU expectation.
      std::vector<bfloat16> want(rows * D, bfloat16(0.0f));
      for (size_t r = 0; r < K; ++r)
        for (uint32_t c = 0; c < D; ++c) want[part.index_at(owner, pos[r]) * D + c] = vals[r * D + c];
      // Bitmap message at an odd offset: [bitmap][values].
      const size_t nb = encode::bitmap_bytes(m);
      std::vector<uint8_t> msg(1 + nb + K * D * 2, 0);
      encode::bitmap_encode(pos.data(), K, m, msg.data() + 1);
      std::memcpy(msg.data() + 1 + nb, vals.data(), K * D * 2);
      DevBuf d_msg = DevBuf::from(msg), dense(rows * D * 2), ws(cuda::bitmap_scatter_workspace(m)),
          err(sizeof(cuda::DeviceError));
      cudaMemset(dense.get(), 0, rows * D * 2);
      cudaMemset(err.get(), 0, sizeof(cuda::DeviceError));
      cuda::bitmap_scatter(d_msg.bytes() + 1, m, d_msg.bytes() + 1 + nb, K, part, owner, D, DType::BF16, dense.get(),
                           ws.get(), ws.size(), err.get<cuda::DeviceError>(), nullptr);
      ZEN_CUDA_OK(cudaDeviceSynchronize());
      expect_no_device_error(err);
      auto got = dense.to_vector<bfloat16>(rows * D);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), rows * D * 2)) << "bitmap owner " << owner;
      // Wrong announced count is reported.
      cuda::bitmap_scatter(d_msg.bytes() + 1, m, d_msg.bytes() + 1 + nb, K + 1, part, owner, D, DType::BF16, dense.get(),
                           ws.get(), ws.size(), err.get<cuda::DeviceError>(), nullptr);
      ZEN_CUDA_OK(cudaDeviceSynchronize());
      EXPECT_EQ(err.to_vector<cuda::DeviceError>(1)[0].code, static_cast<uint32_t>(cuda::kErrBitmapCount));
      cudaMemset(err.get(), 0, sizeof(cuda::DeviceError));
      // A padding bit set is reported.
      if (m % 8) {
        std::vector<uint8_t> badm = msg;
        badm[1 + nb - 1] |= 0x80;
        DevBuf d_bad = DevBuf::from(badm);
        cuda::bitmap_scatter(d_bad.bytes() + 1, m, d_bad.bytes() + 1 + nb, K, part, owner, D, DType::BF16, dense.get(),
                             ws.get(), ws.size(), err.get<cuda::DeviceError>(), nullptr);
        ZEN_CUDA_OK(cudaDeviceSynchronize());
        EXPECT_EQ(err.to_vector<cuda::DeviceError>(1)[0].code, static_cast<uint32_t>(cuda::kErrBitmapPadding));
        cudaMemset(err.get(), 0, sizeof(cuda::DeviceError));
      }
      // COO message: [keys][values], keys via coo_encode_keys.
      DevBuf d_pos = DevBuf::from(pos), coo(K * (isz + D * 2) + 1);
      cuda::coo_encode_keys(d_pos.get<uint64_t>(), K, isz, coo.bytes() + 1, nullptr);
      cudaMemcpy(coo.bytes() + 1 + K * isz, vals.data(), K * D * 2, cudaMemcpyHostToDevice);
      ZEN_CUDA_OK(cudaDeviceSynchronize());
      std::vector<int64_t> keys64(pos.begin(), pos.end());
      std::vector<uint8_t> coo_cpu(K * (isz + D * 2));
      encode::coo_encode(keys64.data(), vals.data(), K, D, DType::BF16, isz == 4 ? IndexType::I32 : IndexType::I64, coo_cpu.data());
      std::vector<uint8_t> coo_gpu(coo_cpu.size());
      coo.download(coo_gpu.data(), coo_gpu.size(), 1);
      ASSERT_EQ(coo_gpu, coo_cpu) << "COO keys differ from the CPU encoding";
      cudaMemset(dense.get(), 0, rows * D * 2);
      cuda::coo_scatter(coo.bytes() + 1, K, isz, coo.bytes() + 1 + K * isz, part, owner, D, DType::BF16, dense.get(),
                        err.get<cuda::DeviceError>(), nullptr);
      ZEN_CUDA_OK(cudaDeviceSynchronize());
      expect_no_device_error(err);
      got = dense.to_vector<bfloat16>(rows * D);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), rows * D * 2)) << "coo owner " << owner;
    }
}

TEST(CudaKernels, ReduceRankOrderMatchesHost) {
  ZEN_REQUIRE_GPU();
  const int n = 5;
  const size_t count = 10007;
  std::vector<std::vector<half>> in;
  std::vector<DevBuf> bufs;
  std::vector<const void*> ptrs;
  for (int p = 0; p < n; ++p) {
    in.push_back(random_values<half>(count, p + 100));
    bufs.push_back(DevBuf::from(in.back()));
    ptrs.push_back(bufs.back().get());
  }
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
    DevBuf out(count * 2);
    cuda::reduce_rank_order(ptrs.data(), n, count, DType::F16, op, out.get(), nullptr);
    ZEN_CUDA_OK(cudaDeviceSynchronize());
    auto got = out.to_vector<half>(count);
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

// Device 16-bit rounding of fp32 sums equals Eigen's host conversions (ties, subnormals,
// overflow to inf). NaN is left out: GPU arithmetic returns the canonical NaN, so the sign and
// payload of a NaN result may differ from the host's (documented in docs/gpu.md).
TEST(CudaKernels, SixteenBitRoundingMatchesHost) {
  ZEN_REQUIRE_GPU();
  std::vector<float> xs{0.0f, -0.0f, 1.0f, 65504.0f, 65519.0f, 65520.0f, 1e-8f, 6.1e-5f, 3.0e-8f, 1.0009765625f,
                        1.00048828125f, 3.14159f, -2.5e38f, INFINITY, -INFINITY};
  std::mt19937 g(1);
  while (xs.size() < 4000) {
    uint32_t u = g();
    float f;
    std::memcpy(&f, &u, 4);
    if (!std::isnan(f)) xs.push_back(f);
  }
  // Two sources a[i] + b[i] (16-bit inputs), summed in fp32 and rounded once, device vs host.
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
    DevBuf da = DevBuf::from(a), db = DevBuf::from(b), out(a.size() * 2);
    const void* ptrs[2] = {da.get(), db.get()};
    cuda::reduce_rank_order(ptrs, 2, a.size(), t, ReduceOp::Sum, out.get(), nullptr);
    ZEN_CUDA_OK(cudaDeviceSynchronize());
    auto got = out.to_vector<uint16_t>(a.size());
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

TEST(CudaKernels, SyntheticGradientDensity) {
  ZEN_REQUIRE_GPU();
  const uint64_t rows = 1 << 20;
  DevBuf d(rows * 4), d2(rows * 4), ws(cuda::nonzero_rows_workspace(rows)), cnt(8);
  cuda::fill_sparse_gradient(d.get(), DType::F32, rows, 1, 0.052, 0.0, 7, nullptr);
  cuda::fill_sparse_gradient(d2.get(), DType::F32, rows, 1, 0.052, 0.0, 7, nullptr);
  cuda::count_nonzero_rows(d.get(), DType::F32, rows, 1, cnt.get<uint64_t>(), ws.get(), ws.size(), nullptr);
  ZEN_CUDA_OK(cudaDeviceSynchronize());
  const double dens = static_cast<double>(cnt.to_vector<uint64_t>(1)[0]) / rows;
  EXPECT_NEAR(dens, 0.052, 0.003);
  EXPECT_EQ(d.to_vector<float>(rows), d2.to_vector<float>(rows));  // deterministic
}

TEST(CudaKernels, HashReportsIndexOutOfRange) {
  ZEN_REQUIRE_GPU();
  cuda::HashParams hp;
  std::vector<int32_t> idx{5, -1, 3};
  const Partitioner part = Partitioner::make(10, 2, 0);
  DevBuf d_idx = DevBuf::from(idx), ws(cuda::hash_partition_workspace(3, 2, hp)), entry(12), pos(24), counts(16),
      serial(8), spilled(8), err(sizeof(cuda::DeviceError));
  cudaMemset(err.get(), 0, sizeof(cuda::DeviceError));
  cuda::hash_partition(d_idx.get(), IndexType::I32, 3, part, hp, ws.get(), ws.size(), entry.get<uint32_t>(), pos.get<uint64_t>(),
                       counts.get<uint64_t>(), serial.get<uint32_t>(), spilled.get<uint64_t>(), err.get<cuda::DeviceError>(), nullptr);
  ZEN_CUDA_OK(cudaDeviceSynchronize());
  auto e = err.to_vector<cuda::DeviceError>(1)[0];
  EXPECT_EQ(e.code, static_cast<uint32_t>(cuda::kErrIndexRange));
  EXPECT_EQ(e.owner, 1u);
  EXPECT_EQ(static_cast<int64_t>(e.a), -1);
  EXPECT_EQ(e.b, 10u);
}

TEST(CudaKernels, WorkspaceTooSmallIsAnError) {
  ZEN_REQUIRE_GPU();
  cuda::HashParams hp;
  std::vector<int64_t> idx{1, 2, 3};
  DevBuf d_idx = DevBuf::from(idx), ws(64), entry(12), pos(24), counts(16), serial(8), spilled(8);
  const Partitioner part = Partitioner::make(10, 2, 0);
  try {
    cuda::hash_partition(d_idx.get(), IndexType::I64, 3, part, hp, ws.get(), 64, entry.get<uint32_t>(), pos.get<uint64_t>(),
                         counts.get<uint64_t>(), serial.get<uint32_t>(), spilled.get<uint64_t>(), nullptr, nullptr);
    FAIL() << "accepted a 64-byte workspace";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Result::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("64 bytes"), std::string::npos) << e.what();
  }
}
