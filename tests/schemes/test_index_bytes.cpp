// The index encodings of balanced and sparse_ps held against docs/algorithms.md ("Index encodings",
// "sparse_ps", "balanced") by an oracle written from that text alone: it shares no code with the
// schemes or the cost model (whose pick_encoding / pick_push_encoding / index_part_bytes are the
// schemes' own). From the inputs it derives each owner's position set (sparse_ps: the contiguous
// ranges; balanced: owner = pi(row) mod n, position = pi(row) div n, with pi the seeded bijection of
// zen/hash/hash.hpp), the rows every rank pushes to every owner and every owner's result rows, then
// the encoding the documented rules choose for every push and pull message and the bytes of its
// index part (COO K*w_i, bitmap ceil(m/8), Elias-Fano ceil(U/8) + ceil(K*L/8)). The measured bytes of
// the phases counts, push, meta and pull of every rank, and the encodings the report names, must
// equal the oracle's, with every code forced and under Auto. A density sweep at row widths 1..16
// (Auto) crosses the push rule's 1/8 threshold and the pull's bitmap / Elias-Fano / COO boundaries;
// the test checks that it does.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cases.hpp"
#include "zen/comm/loopback.hpp"
#include "zen/encode/elias_fano.hpp"
#include "zen/hash/hash.hpp"

using namespace zen;
using test::Case;

namespace {

// ---- the documented formulas (docs/algorithms.md, "Index encodings") ----
enum Code { kCoo = 0, kBitmap = 1, kEf = 2 };
const char* code_name(int c) { return c == kBitmap ? "bitmap" : c == kEf ? "ef" : "coo"; }

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
uint64_t floor_log2(uint64_t x) {
  uint64_t l = 0;
  while (x >>= 1) ++l;
  return l;
}

// COO key width for a key space of X keys: 4 bytes if X <= 2^31, else 8.
uint64_t key_width(uint64_t X) { return X <= (uint64_t{1} << 31) ? 4 : 8; }

// Elias-Fano: 0 when K = 0; L = 0 when m <= K, else floor(log2(floor(m/K))); U = K + (m >> L) upper
// bits, then K*L lower bits, each part padded to whole bytes.
uint64_t ef_index_bytes(uint64_t m, uint64_t K) {
  if (K == 0) return 0;
  const uint64_t L = m <= K ? 0 : floor_log2(m / K);
  const uint64_t U = K + (m >> L);
  return ceil_div(U, 8) + ceil_div(K * L, 8);
}

uint64_t index_bytes(int code, uint64_t m, uint64_t K, uint64_t wi) {
  if (code == kBitmap) return ceil_div(m, 8);
  if (code == kEf) return ef_index_bytes(m, K);
  return K * wi;
}

// Pull, Auto: the smallest of the three index parts, ties to COO, then the bitmap.
int pull_code(IndexEncoding opt, uint64_t m, uint64_t K, uint64_t wi) {
  if (opt == IndexEncoding::Coo) return kCoo;
  if (opt == IndexEncoding::Bitmap) return kBitmap;
  if (opt == IndexEncoding::EliasFano) return kEf;
  const uint64_t coo = K * wi, bm = ceil_div(m, 8), ef = ef_index_bytes(m, K);
  if (coo <= bm && coo <= ef) return kCoo;
  return bm <= ef ? kBitmap : kEf;
}

// Push, Auto: COO unless the smaller sorted code (bitmap or Elias-Fano, ties to the bitmap) saves
// at least 1/8 of the COO message (K*w_i + K*D*w_v); an empty message (K = 0) is COO. Owner sets
// above 2^32 positions push COO.
int push_code(IndexEncoding opt, uint64_t m, uint64_t K, uint64_t wi, uint64_t row_bytes) {
  if (m > (uint64_t{1} << 32)) return kCoo;
  if (opt != IndexEncoding::Auto) return pull_code(opt, m, K, wi);
  if (K == 0) return kCoo;
  const uint64_t bm = ceil_div(m, 8), ef = ef_index_bytes(m, K);
  const int sorted = bm <= ef ? kBitmap : kEf;
  const uint64_t coo_msg = K * wi + K * row_bytes, sorted_msg = std::min(bm, ef) + K * row_bytes;
  return sorted_msg < coo_msg && 8 * (coo_msg - sorted_msg) >= coo_msg ? sorted : kCoo;
}

// ---- owner sets and loads from the inputs ----
struct Loads {
  std::vector<uint64_t> m;                   // positions of owner o's set
  std::vector<std::vector<uint64_t>> k;      // k[r][o]: distinct rows rank r pushes to owner o
  std::vector<uint64_t> K;                   // result rows of owner o
};

Loads loads_of(const std::string& scheme, const Case& c, int n) {
  const uint64_t R = c.rows, un = static_cast<uint64_t>(n);
  Loads l;
  l.m.assign(un, 0);
  l.K.assign(un, 0);
  l.k.assign(un, std::vector<uint64_t>(un, 0));
  std::vector<int> owner_of(R);
  if (scheme == "sparse_ps") {
    // owner o serves [L_o, L_{o+1}), L_o = o*floor(R/n) + min(o, R mod n)
    auto L = [&](uint64_t o) { return o * (R / un) + std::min<uint64_t>(o, R % un); };
    for (uint64_t o = 0; o < un; ++o) {
      l.m[o] = L(o + 1) - L(o);
      for (uint64_t x = L(o); x < L(o + 1); ++x) owner_of[x] = static_cast<int>(o);
    }
  } else {
    // owner(idx) = pi(idx) mod n; |I_i| = ceil((R - i)/n), which the count over pi must confirm
    const Partitioner part = Partitioner::make(R, static_cast<uint32_t>(n), c.opt.seed);
    std::vector<uint64_t> counted(un, 0);
    for (uint64_t x = 0; x < R; ++x) {
      const uint64_t y = part.permute(x);
      EXPECT_LT(y, R) << "pi leaves [0, R)";
      owner_of[x] = static_cast<int>(y % un);
      ++counted[y % un];
    }
    for (uint64_t i = 0; i < un; ++i) {
      l.m[i] = R > i ? ceil_div(R - i, un) : 0;
      EXPECT_EQ(counted[i], l.m[i]) << "owner " << i << " of R=" << R << " n=" << n << ": |I_i| is not ceil((R-i)/n)";
    }
  }
  std::set<int64_t> all;
  for (int r = 0; r < n; ++r) {
    const std::set<int64_t> mine(c.idx[static_cast<size_t>(r)].begin(), c.idx[static_cast<size_t>(r)].end());
    for (int64_t x : mine) ++l.k[static_cast<size_t>(r)][static_cast<size_t>(owner_of[static_cast<size_t>(x)])];
    all.insert(mine.begin(), mine.end());
  }
  for (int64_t x : all) ++l.K[static_cast<size_t>(owner_of[static_cast<size_t>(x)])];
  return l;
}

// What every rank must measure, phase by phase, and the encodings it must name.
struct Expected {
  std::map<std::string, std::vector<uint64_t>> sent, recv;  // phase -> per rank
  std::vector<std::string> push_name;                       // per rank: its push messages
  std::string pull_name;                                    // all owners' pull messages
  std::set<std::string> push_codes;                         // codes of the push messages that carry rows
  std::set<std::string> pull_codes;                         // codes of the pull messages (n > 1)
};

Expected oracle(const std::string& scheme, const Case& c, int n) {
  const Loads l = loads_of(scheme, c, n);
  const auto un = static_cast<size_t>(n);
  const uint64_t wi = key_width(l.m[0]);  // the largest owner set is owner 0's
  const uint64_t row_bytes = c.D * dtype_size(c.dtype);
  Expected e;
  for (const char* ph : {"counts", "push", "meta", "pull"}) {
    e.sent[ph].assign(un, 0);
    e.recv[ph].assign(un, 0);
  }
  std::vector<int> pcode(un);
  std::vector<uint64_t> P(un);  // owner o's pull message: index part + K_o value rows
  for (size_t o = 0; o < un; ++o) {
    pcode[o] = pull_code(c.opt.pull, l.m[o], l.K[o], wi);
    P[o] = index_bytes(pcode[o], l.m[o], l.K[o], wi) + l.K[o] * row_bytes;
    if (n > 1) e.pull_codes.insert(code_name(pcode[o]));
  }
  e.pull_name = code_name(pcode[0]);
  for (size_t o = 1; o < un; ++o)
    if (pcode[o] != pcode[0]) e.pull_name = "mixed";
  e.push_name.assign(un, "coo");  // no peer: nothing pushed
  for (size_t r = 0; r < un; ++r) {
    std::set<int> codes;
    for (size_t o = 0; o < un; ++o) {
      if (o == r) continue;  // the own segment stays local
      e.sent["counts"][r] += 8;
      e.recv["counts"][r] += 8;
      e.sent["meta"][r] += 24;
      e.recv["meta"][r] += 24;
      e.sent["pull"][r] += P[r];
      e.recv["pull"][r] += P[o];
      const uint64_t K = l.k[r][o];
      const int code = push_code(c.opt.push, l.m[o], K, wi, row_bytes);
      const uint64_t s = index_bytes(code, l.m[o], K, wi) + K * row_bytes;
      e.sent["push"][r] += s;
      e.recv["push"][o] += s;
      if (K) e.push_codes.insert(code_name(code));
      codes.insert(code);
    }
    if (!codes.empty()) e.push_name[r] = codes.size() == 1 ? code_name(*codes.begin()) : "mixed";
  }
  return e;
}

// ---- cases: the shared kinds plus a density sweep across the rules' boundaries ----
std::vector<Case> index_cases(int n) {
  std::vector<Case> v;
  for (const char* kind : {"empty", "single", "sparse1", "half", "full", "skew", "dups", "disjoint", "one_rank_all"})
    for (int var = 0; var < 2; ++var) v.push_back(test::make_case(kind, n, var));
  const struct {
    uint32_t D;
    DType t;
  } widths[] = {{1, DType::F32}, {2, DType::F16}, {4, DType::F32}, {8, DType::F64}, {16, DType::BF16}};
  for (const auto& w : widths)
    for (double d : {0.002, 0.02, 0.06, 0.12, 0.25, 0.4, 0.6, 0.9}) {
      Case c;
      c.name = "sweep/D" + std::to_string(w.D) + "/" + dtype_name(w.t) + "/d" + std::to_string(d);
      c.rows = 2003;  // prime: not divisible by 2..8
      c.D = w.D;
      c.dtype = w.t;
      c.idx.assign(static_cast<size_t>(n), {});
      c.val.assign(static_cast<size_t>(n), {});
      test::Rng g(static_cast<uint64_t>(d * 1000) * 131 + w.D * 7 + static_cast<uint64_t>(n));
      for (int r = 0; r < n; ++r)
        for (int64_t row : test::sample_rows(c.rows, d, g)) test::add_row(c, r, row, g);
      test::add_row(c, 0, 0, g);
      test::add_row(c, n - 1, static_cast<int64_t>(c.rows - 1), g);
      v.push_back(std::move(c));
    }
  return v;
}

using Param = std::tuple<std::string, int>;
class IndexCodes : public ::testing::TestWithParam<Param> {};

TEST_P(IndexCodes, PushAndPullBytesFollowTheDocumentedRules) {
  const auto& [scheme, n] = GetParam();
#if defined(__SANITIZE_ADDRESS__)
  // The bytes do not depend on the build; under ASan (CI's sanitize suite, where n = 4..8 took 60 s
  // of test time) the cases at n <= 3 check the memory safety of the same code paths.
  if (n > 3) GTEST_SKIP() << "ASan build: n <= 3 (the plain build runs n = 1..8)";
#endif
  std::set<std::string> auto_push, auto_pull;  // codes Auto chose for messages with rows
  for (Case cs : index_cases(n))
    for (IndexEncoding code : {IndexEncoding::Auto, IndexEncoding::Coo, IndexEncoding::Bitmap, IndexEncoding::EliasFano}) {
      // The sweep is there for Auto's boundaries; the forced codes run on the shared kinds.
      if (code != IndexEncoding::Auto && cs.name.rfind("sweep/", 0) == 0) continue;
      cs.opt.push = code;
      cs.opt.pull = code;
      const Expected want = oracle(scheme, cs, n);
      if (code == IndexEncoding::Auto) {
        auto_push.insert(want.push_codes.begin(), want.push_codes.end());
        auto_pull.insert(want.pull_codes.begin(), want.pull_codes.end());
      }
      const auto ref = test::reference(cs);
      std::mutex mu;
      loopback::run(n, [&](Communicator& c) {
        const int r = c.rank();
        const auto ur = static_cast<size_t>(r);
        const std::string where = scheme + " " + cs.name + " code " + std::to_string(static_cast<int>(code)) +
                                  " n=" + std::to_string(n) + " rank " + std::to_string(r);
        SyncReport rs, rd;
        test::check_case(c, scheme, cs, ref, &rs, &rd);  // the values are right, too
        std::lock_guard<std::mutex> lk(mu);
        for (const SyncReport* rep : {&rs, &rd}) {
          std::map<std::string, std::pair<uint64_t, uint64_t>> got;
          for (const auto& ph : rep->phases) {
            got[ph.name].first += ph.sent;
            got[ph.name].second += ph.recv;
          }
          uint64_t sent_all = 0, recv_all = 0;
          for (const auto& [ph, sent] : want.sent) {
            EXPECT_EQ(got[ph].first, sent[ur]) << where << " phase " << ph << " sent";
            EXPECT_EQ(got[ph].second, want.recv.at(ph)[ur]) << where << " phase " << ph << " received";
            sent_all += sent[ur];
            recv_all += want.recv.at(ph)[ur];
          }
          EXPECT_EQ(rep->sent, sent_all) << where << ": bytes outside counts, push, meta and pull";
          EXPECT_EQ(rep->recv, recv_all) << where << ": bytes outside counts, push, meta and pull";
          if (n > 1) {
            EXPECT_EQ(rep->push_encoding, want.push_name[ur]) << where << " push encoding";
            EXPECT_EQ(rep->encoding, want.pull_name) << where << " pull encoding";
          }
        }
      });
      if (::testing::Test::HasFailure()) return;  // one case's messages are enough to read
    }
  // The sweep reaches both sides of the push rule (COO kept for wide rows, bitmap and Elias-Fano
  // chosen for narrow ones) and all three pull codes (COO only for empty results: a set of K >= 1
  // positions out of m <= 2^30 is always smaller in Elias-Fano). n > 1: messages exist.
  if (n > 1) {
    EXPECT_EQ(auto_push, (std::set<std::string>{"bitmap", "coo", "ef"})) << "push codes Auto chose";
    EXPECT_EQ(auto_pull, (std::set<std::string>{"bitmap", "coo", "ef"})) << "pull codes Auto chose";
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, IndexCodes,
                         ::testing::Combine(::testing::Values("balanced", "sparse_ps"), ::testing::Range(1, 9)),
                         [](const ::testing::TestParamInfo<Param>& i) {
                           return std::get<0>(i.param) + "_n" + std::to_string(std::get<1>(i.param));
                         });

// The Elias-Fano size the encoder uses equals the documented layout over a grid of (m, K) far
// beyond the scheme cases (m up to 2^40, K from 1 to m), and the encoder fills exactly that many
// bytes for small sets.
TEST(IndexCodes, EliasFanoSizeIsTheDocumentedLayout) {
  for (uint64_t m : {uint64_t{1}, uint64_t{2}, uint64_t{7}, uint64_t{8}, uint64_t{9}, uint64_t{100}, uint64_t{1000},
                     uint64_t{65537}, uint64_t{1} << 31, (uint64_t{1} << 32) + 5, uint64_t{1} << 40})
    for (uint64_t K : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}, m / 100, m / 8, m / 3, m / 2, m - 1, m}) {
      if (K > m) continue;
      EXPECT_EQ(encode::ef_bytes(m, K), ef_index_bytes(m, K)) << "m=" << m << " K=" << K;
    }
  for (uint64_t m : {uint64_t{5}, uint64_t{64}, uint64_t{1000}})
    for (uint64_t K = 1; K <= m; K += 1 + K / 3) {
      std::vector<uint64_t> pos;
      for (uint64_t i = 0; i < K; ++i) pos.push_back(i * m / K);
      std::vector<uint8_t> buf(ef_index_bytes(m, K) + 16, 0xAA);
      encode::ef_encode(pos.data(), pos.size(), m, buf.data());
      for (size_t b = ef_index_bytes(m, K); b < buf.size(); ++b) ASSERT_EQ(buf[b], 0xAA) << "m=" << m << " K=" << K << ": wrote past the layout";
      std::vector<uint64_t> back;
      encode::ef_decode(buf.data(), ef_index_bytes(m, K), m, K, back);
      EXPECT_EQ(back, pos) << "m=" << m << " K=" << K;
    }
}

}  // namespace
