#pragma once
// Collective checks shared by the loopback and MPI test binaries: every rank runs the same function
// on its communicator; inputs are small integers so every result is exact.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "../../src/comm/ring_chunk.hpp"  // private: the ring split the traffic counts follow
#include "zen/comm/communicator.hpp"

namespace zen::test {

template <typename T>
inline T tv(double x) { return static_cast<T>(x); }

// Value that rank r puts at element i: exact in every dtype (|v| <= 64).
inline double rv(int r, size_t i) { return static_cast<double>((static_cast<int>(i % 7) - 3) + r); }

template <typename T>
void check_allreduce(Communicator& c, size_t count) {
  const int n = c.size(), r = c.rank();
  std::vector<T> buf(count);
  for (size_t i = 0; i < count; ++i) buf[i] = tv<T>(rv(r, i));
  auto before = c.stats();
  c.allreduce(buf.data(), count, dtype_of<T>::value);
  for (size_t i = 0; i < count; ++i) {
    double want = 0;
    for (int p = 0; p < n; ++p) want += rv(p, i);
    ASSERT_EQ(static_cast<double>(buf[i]), want) << "rank " << r << " element " << i;
  }
  auto d = c.stats() - before;
  const size_t total = count * sizeof(T);
  const size_t expect = n > 1 ? 2 * (total - ring_chunk_bytes(count, sizeof(T), n, r)) : 0;
  EXPECT_EQ(d.sent[static_cast<size_t>(CommOp::Allreduce)], expect);
}

// Bitwise OR: rank r sets bit (i + r) % 8 of byte i, and byte 3 of every 7 is untouched by all.
inline std::vector<uint8_t> or_input(size_t bytes, int r) {
  std::vector<uint8_t> b(bytes);
  for (size_t i = 0; i < bytes; ++i) b[i] = i % 7 == 3 ? 0 : static_cast<uint8_t>(1u << ((i + static_cast<size_t>(r)) % 8));
  return b;
}
inline void expect_or_result(const std::vector<uint8_t>& b, int n, int r) {
  for (size_t i = 0; i < b.size(); ++i) {
    uint8_t want = 0;
    if (i % 7 != 3)
      for (int p = 0; p < n; ++p) want = static_cast<uint8_t>(want | (1u << ((i + static_cast<size_t>(p)) % 8)));
    ASSERT_EQ(b[i], want) << "rank " << r << " byte " << i;
  }
}

inline void check_allreduce_or(Communicator& c, size_t bytes) {
  const int n = c.size(), r = c.rank();
  std::vector<uint8_t> b = or_input(bytes, r);
  auto before = c.stats();
  c.allreduce_or(b.data(), bytes);
  expect_or_result(b, n, r);
  auto d = c.stats() - before;
  EXPECT_EQ(d.sent[static_cast<size_t>(CommOp::Allreduce)], n > 1 ? 2 * (bytes - ring_chunk_bytes(bytes, 1, n, r)) : 0);
}

// Pieces of an allreduce_sum_or reported early (Communicator::PieceDone): each must follow the
// previous one and be final when reported, values and the whole support alike.
struct PieceLog {
  const float* buf = nullptr;
  const uint8_t* bits = nullptr;
  size_t bytes = 0;
  int n = 1;
  size_t next = 0;        // the next piece must start here
  size_t pieces = 0;
  size_t bad_values = 0;  // elements not yet final when reported
  bool out_of_order = false, bits_early = false;
  static void on_piece(void* ctx, size_t first, size_t count);
};

// A sum and its support in one call: f32 values as check_allreduce, the bits as check_allreduce_or
// (count / 8 + 1 bytes). `owned`: inside an OwnerScope (a plan's buffers), else caller memory.
// Returns the number of pieces the backend reported early.
inline size_t check_allreduce_sum_or(Communicator& c, size_t count, bool owned) {
  const int n = c.size(), r = c.rank();
  const size_t bytes = count / 8 + 1;
  std::vector<float> buf(count);
  for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(rv(r, i));
  std::vector<uint8_t> b = or_input(bytes, r);
  PieceLog log;
  log.buf = buf.data();
  log.bits = b.data();
  log.bytes = bytes;
  log.n = n;
  auto before = c.stats();
  {
    Communicator::OwnerScope scope(c, owned ? std::make_shared<int>(0) : nullptr);
    c.allreduce_sum_or(buf.data(), count, DType::F32, b.data(), bytes, Communicator::PieceDone{&PieceLog::on_piece, &log});
  }
  for (size_t i = 0; i < count; ++i) {
    double want = 0;
    for (int p = 0; p < n; ++p) want += rv(p, i);
    EXPECT_EQ(static_cast<double>(buf[i]), want) << "rank " << r << " element " << i;
    if (static_cast<double>(buf[i]) != want) return log.pieces;
  }
  expect_or_result(b, n, r);
  EXPECT_FALSE(log.out_of_order) << "rank " << r << ": pieces not reported in order";
  EXPECT_LE(log.next, count) << "rank " << r;
  EXPECT_EQ(log.bad_values, 0u) << "rank " << r << ": elements reported before they were final";
  EXPECT_FALSE(log.bits_early) << "rank " << r << ": a piece reported before the support was final";
  auto d = c.stats() - before;
  const size_t total = count * 4;
  const size_t expect = n > 1 ? 2 * (total - ring_chunk_bytes(count, 4, n, r)) + 2 * (bytes - ring_chunk_bytes(bytes, 1, n, r)) : 0;
  EXPECT_EQ(d.sent[static_cast<size_t>(CommOp::Allreduce)], expect);
  EXPECT_EQ(d.calls[static_cast<size_t>(CommOp::Allreduce)], 1u);
  return log.pieces;
}

inline void PieceLog::on_piece(void* ctx, size_t first, size_t count) {
  auto* l = static_cast<PieceLog*>(ctx);
  if (first != l->next) l->out_of_order = true;
  l->next = first + count;
  ++l->pieces;
  for (size_t i = first; i < first + count; ++i) {
    double want = 0;
    for (int p = 0; p < l->n; ++p) want += rv(p, i);
    if (static_cast<double>(l->buf[i]) != want) ++l->bad_values;
  }
  std::vector<uint8_t> want(l->bytes, 0);
  for (int p = 0; p < l->n; ++p) {
    const std::vector<uint8_t> in = or_input(l->bytes, p);
    for (size_t i = 0; i < l->bytes; ++i) want[i] |= in[i];
  }
  if (std::memcmp(want.data(), l->bits, l->bytes) != 0) l->bits_early = true;
}

// Rank r sends (r + p + 1) * scale elements to p; every element encodes (source, dest, position).
inline void check_alltoallv(Communicator& c, size_t scale) {
  const int n = c.size(), r = c.rank();
  auto cnt = [&](int src, int dst) { return static_cast<size_t>(src + dst + 1) * scale % 1009; };
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t st = 0, rt = 0;
  for (int p = 0; p < n; ++p) {
    sc[p] = cnt(r, p) * 4;
    sd[p] = st;
    st += sc[p];
    rc[p] = cnt(p, r) * 4;
    rd[p] = rt;
    rt += rc[p];
  }
  std::vector<int32_t> sbuf(st / 4), rbuf(rt / 4, -1);
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < cnt(r, p); ++i) sbuf[sd[p] / 4 + i] = static_cast<int32_t>(r * 1000000 + p * 10000 + static_cast<int>(i));
  auto before = c.stats();
  c.alltoallv(sbuf.data(), sc.data(), sd.data(), rbuf.data(), rc.data(), rd.data());
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < cnt(p, r); ++i)
      ASSERT_EQ(rbuf[rd[p] / 4 + i], static_cast<int32_t>(p * 1000000 + r * 10000 + static_cast<int>(i)));
  auto d = c.stats() - before;
  EXPECT_EQ(d.sent[static_cast<size_t>(CommOp::Alltoallv)], st - sc[r]);
  EXPECT_EQ(d.recv[static_cast<size_t>(CommOp::Alltoallv)], rt - rc[r]);
}

inline void check_allgatherv(Communicator& c, size_t scale) {
  const int n = c.size(), r = c.rank();
  auto cnt = [&](int p) { return (static_cast<size_t>(p) * 37 + scale) % (scale + 5); };  // includes zero-size blocks
  std::vector<size_t> rc(n), rd(n);
  size_t t = 0;
  for (int p = 0; p < n; ++p) {
    rc[p] = cnt(p) * 8;
    rd[p] = t;
    t += rc[p];
  }
  std::vector<int64_t> mine(cnt(r)), all(t / 8, -1);
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = r * 1000003LL + static_cast<int64_t>(i);
  auto before = c.stats();
  c.allgatherv(mine.data(), mine.size() * 8, all.data(), rc.data(), rd.data());
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < cnt(p); ++i) ASSERT_EQ(all[rd[p] / 8 + i], p * 1000003LL + static_cast<int64_t>(i));
  auto d = c.stats() - before;
  EXPECT_EQ(d.sent[static_cast<size_t>(CommOp::Allgatherv)], mine.size() * 8 * static_cast<size_t>(n - 1));
  EXPECT_EQ(d.recv[static_cast<size_t>(CommOp::Allgatherv)], t - rc[r]);
}

inline void check_broadcast_p2p_barrier(Communicator& c, size_t count) {
  const int n = c.size(), r = c.rank();
  for (int root = 0; root < n; root += (n > 3 ? n / 3 : 1)) {
    std::vector<float> b(count, r == root ? static_cast<float>(root + 1) : -1.0f);
    c.broadcast(b.data(), count * 4, root);
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(b[i], static_cast<float>(root + 1));
  }
  // Ring shift with sendrecv, then explicit send/recv pairs (even ranks send first).
  std::vector<int> out(count, r), in(count, -1);
  c.sendrecv(out.data(), count * 4, (r + 1) % n, in.data(), count * 4, (r - 1 + n) % n, 7);
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(in[i], (r - 1 + n) % n);
  if (n > 1) {
    int partner = r ^ 1;
    if (partner < n) {
      std::vector<int> got(count, -1);
      if (r % 2 == 0) {
        c.send(out.data(), count * 4, partner, 3);
        c.recv(got.data(), count * 4, partner, 3);
      } else {
        c.recv(got.data(), count * 4, partner, 3);
        c.send(out.data(), count * 4, partner, 3);
      }
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(got[i], partner);
    }
  }
  // Buffered sends: every rank sends a large message around the ring before receiving (a blocking
  // rendezvous send would deadlock here).
  {
    std::vector<int> big(count + (1u << 18), r), got(count + (1u << 18), -1);
    c.send(big.data(), big.size() * 4, (r + 1) % n, 5);
    c.recv(got.data(), got.size() * 4, (r - 1 + n) % n, 5);
    for (size_t i = 0; i < got.size(); i += 4099) ASSERT_EQ(got[i], (r - 1 + n) % n);
  }
  c.barrier();
  auto vals = c.allgather_value<int64_t>(r * 11);
  for (int p = 0; p < n; ++p) ASSERT_EQ(vals[p], p * 11);
}

inline const std::vector<size_t>& suite_sizes() {
  static const std::vector<size_t> s{0, 1, 31, 1000, (1u << 20) + 3};
  return s;
}

/// The whole suite on one communicator (used by both backends).
inline void run_comm_suite(Communicator& c) {
  for (size_t count : suite_sizes()) {
    SCOPED_TRACE("count " + std::to_string(count));
    check_allreduce<float>(c, count);
    check_allreduce<double>(c, count);
    check_allreduce<half>(c, count);
    check_allreduce<bfloat16>(c, count);
    check_allreduce_or(c, count);
    check_allreduce_sum_or(c, count, false);
    check_allreduce_sum_or(c, count, true);
    check_broadcast_p2p_barrier(c, count);
    check_alltoallv(c, count);
    check_allgatherv(c, count);
  }
}

}  // namespace zen::test
