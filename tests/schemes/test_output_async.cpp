// Output options (average, accumulate) and the non-blocking form (start / wait / test), for every
// scheme, n = 1..8 loopback ranks: results bitwise equal to an independent reference, identical on
// every rank, and the non-blocking results equal to the blocking ones while the caller computes; a
// started call is still pending while its peers have not entered (the caller got control back).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "cases.hpp"
#include "zen/comm/loopback.hpp"
#include "zen/schemes/hierarchical.hpp"

using namespace zen;
using test::Case;

namespace {

using Param = std::tuple<std::string, int>;
std::string param_name(const ::testing::TestParamInfo<Param>& i) {
  return std::get<0>(i.param) + "_n" + std::to_string(std::get<1>(i.param));
}
class OutputAsync : public ::testing::TestWithParam<Param> {};

const char* kKinds[] = {"empty", "single", "sparse1", "full", "dups", "cancel", "one_rank_all"};

/// value bytes -> value bytes: each element x becomes T(A(x) / n) (the documented average).
std::vector<uint8_t> averaged(const std::vector<uint8_t>& b, DType t, int n) {
  std::vector<uint8_t> out(b);
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    using A = std::conditional_t<sizeof(T) == 2, float, double>;
    for (size_t i = 0; i < b.size() / sizeof(T); ++i) {
      T x;
      std::memcpy(&x, b.data() + i * sizeof(T), sizeof(T));
      x = static_cast<T>(static_cast<A>(x) / static_cast<A>(n));
      std::memcpy(out.data() + i * sizeof(T), &x, sizeof(T));
    }
  });
  return out;
}

/// The prefilled accumulator of rank r: small integers (exact in every dtype), different per rank.
std::vector<double> prefill(const Case& c, int r) {
  std::vector<double> v(c.N());
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(static_cast<int>((i * 7 + static_cast<size_t>(r)) % 9) - 4);
  return v;
}

void expect_same_everywhere(Communicator& comm, const void* p, size_t bytes, const std::string& where) {
  const auto all = comm.allgather_value(test::fnv(p, bytes));
  for (size_t q = 0; q < all.size(); ++q) EXPECT_EQ(all[q], all[0]) << where << ": rank " << q << " differs from rank 0";
}

TEST_P(OutputAsync, AverageAndAccumulate) {
  const auto& [scheme, n] = GetParam();
  for (const char* kind : kKinds)
    for (int v = 0; v < 4; ++v) {
      Case cs = test::make_case(kind, n, v);
      const auto ref = test::reference(cs);
      const auto avg_vals = averaged(ref.vals, cs.dtype, n);
      const auto avg_dense = averaged(ref.dense, cs.dtype, n);
      loopback::run(n, [&](Communicator& c) {
        const int r = c.rank();
        const std::string where = scheme + " " + cs.name + " n=" + std::to_string(n) + " rank " + std::to_string(r);
        test::Input in;
        test::make_input(cs, r, in);
        // average: sparse and dense outputs
        SchemeOptions o = cs.opt;
        o.output.average = true;
        auto s = make_scheme(scheme, c, cs.spec(), o);
        SparseTensor out;
        s->run(in.view, out);
        EXPECT_EQ(out.indices, ref.rows) << where << " (average, sparse)";
        EXPECT_TRUE(out.values == avg_vals) << where << " (average, sparse values)";
        std::vector<uint8_t> dense(cs.N() * dtype_size(cs.dtype), 0xCD);
        s->run_dense(in.view, dense.data());
        EXPECT_TRUE(dense == avg_dense) << where << " (average, dense)";
        expect_same_everywhere(c, dense.data(), dense.size(), where);
        // accumulate (sum, then average) into a prefilled buffer: prefill + result, support rows only
        for (bool avg : {false, true}) {
          SchemeOptions oa = cs.opt;
          oa.output.accumulate = true;
          oa.output.average = avg;
          auto sa = make_scheme(scheme, c, cs.spec(), oa);
          const auto pre = prefill(cs, r);
          auto acc = test::to_bytes(pre, cs.dtype);
          sa->run_dense(in.view, acc.data());
          // expected: pre[i] + (avg ? averaged : plain) reference, added in the accumulation type
          const auto& add = avg ? avg_dense : ref.dense;
          std::vector<uint8_t> want(acc.size());
          dispatch_dtype(cs.dtype, [&](auto tag) {
            using T = decltype(tag);
            using A = typename accum_of<T>::type;
            for (size_t i = 0; i < cs.N(); ++i) {
              T a;
              std::memcpy(&a, add.data() + i * sizeof(T), sizeof(T));
              const T w = static_cast<T>(static_cast<A>(static_cast<T>(pre[i])) + static_cast<A>(a));
              std::memcpy(want.data() + i * sizeof(T), &w, sizeof(T));
            }
          });
          size_t wrong = 0;
          for (size_t i = 0; i < acc.size(); ++i) wrong += acc[i] != want[i];
          EXPECT_EQ(wrong, 0u) << where << " (accumulate, average=" << avg << ")";
          // accumulate with a sparse output is a usage error (and poisons the communicator)
        }
      });
    }
}

TEST_P(OutputAsync, NonBlockingEqualsBlockingWhileCallerComputes) {
  const auto& [scheme, n] = GetParam();
  std::vector<Case> cases;
  std::vector<test::Reference> refs;
  for (const char* kind : kKinds) {
    cases.push_back(test::make_case(kind, n, 1));
    refs.push_back(test::reference(cases.back()));
  }
  loopback::run(n, [&](Communicator& c) {
    const int r = c.rank();
    std::vector<test::Input> ins(cases.size());
    std::vector<std::unique_ptr<SparseAllreduce>> plans;
    std::vector<SparseTensor> outs(cases.size());
    std::vector<std::vector<uint8_t>> dense(cases.size());
    std::vector<Request> sreq, dreq;
    for (size_t i = 0; i < cases.size(); ++i) {
      test::make_input(cases[i], r, ins[i]);
      plans.push_back(make_scheme(scheme, c, cases[i].spec(), cases[i].opt));
      dense[i].assign(cases[i].N() * dtype_size(cases[i].dtype), 0xEE);
    }
    // Start everything (two calls per plan), compute meanwhile, then complete in reverse order.
    for (size_t i = 0; i < cases.size(); ++i) {
      sreq.push_back(plans[i]->start(ins[i].view, outs[i]));
      dreq.push_back(plans[i]->start_dense(ins[i].view, dense[i].data()));
    }
    double acc = 0;  // the caller's own work while the calls run
    for (int k = 1; k < 200000; ++k) acc += std::sqrt(static_cast<double>(k));
    EXPECT_GT(acc, 0.0);
    for (size_t i = cases.size(); i-- > 0;) {
      dreq[i].wait();
      while (!sreq[i].test()) std::this_thread::yield();
      EXPECT_FALSE(sreq[i].valid());
      EXPECT_TRUE(sreq[i].test());  // a completed request stays complete
    }
    for (size_t i = 0; i < cases.size(); ++i) {
      const std::string where = scheme + " " + cases[i].name + " n=" + std::to_string(n) + " rank " + std::to_string(r);
      EXPECT_EQ(outs[i].indices, refs[i].rows) << where << " (start)";
      EXPECT_TRUE(outs[i].values == refs[i].vals) << where << " (start)";
      EXPECT_TRUE(dense[i] == refs[i].dense) << where << " (start_dense)";
    }
    // A blocking call issued while non-blocking ones are pending queues behind them.
    SparseTensor a, b;
    Request q = plans[2]->start(ins[2].view, a);
    plans[3]->run(ins[3].view, b);
    q.wait();
    EXPECT_EQ(a.indices, refs[2].rows);
    EXPECT_EQ(b.indices, refs[3].rows);
    EXPECT_TRUE(b.values == refs[3].vals);
    // Destroying plans while their calls are pending is safe: the destructor waits for them.
    std::vector<uint8_t> late(cases[1].N() * dtype_size(cases[1].dtype), 0xEE);
    Request r1 = plans[1]->start_dense(ins[1].view, late.data());
    for (auto& p : plans) p.reset();
    EXPECT_TRUE(r1.test()) << "the plan's destructor returned before its pending call finished";
    EXPECT_TRUE(late == refs[1].dense);
  });
}

// The non-blocking form gives control back before the call can complete: ranks 1..n-1 enter only
// after rank 0 has started both forms, seen them pending (test() == false) and done its own work
// (they wait for a flag rank 0 sets). For n >= 2 no scheme can finish without its peers, so a
// pending request is the only correct state there; a start() that ran the call itself would block
// rank 0 in it until the 5 s timeout instead (the flag is set in every case, so the test ends).
class OutputAsyncLatePeers : public ::testing::TestWithParam<Param> {};

TEST_P(OutputAsyncLatePeers, StartReturnsBeforeALatePeerEnters) {
  const auto& [scheme, n] = GetParam();
  const Case cs = test::make_case("sparse1", n, 1);
  const auto ref = test::reference(cs);
  std::atomic<bool> go{false};
  loopback::run(
      n,
      [&](Communicator& c) {
        const int r = c.rank();
        const std::string where = scheme + " n=" + std::to_string(n) + " rank " + std::to_string(r);
        test::Input in;
        test::make_input(cs, r, in);
        auto plan = make_scheme(scheme, c, cs.spec(), cs.opt);
        SparseTensor out;
        std::vector<uint8_t> dense(cs.N() * dtype_size(cs.dtype), 0xEE);
        if (r == 0) {
          struct Release {
            std::atomic<bool>& go;
            ~Release() { go.store(true); }
          } release{go};
          Request qs = plan->start(in.view, out);
          Request qd = plan->start_dense(in.view, dense.data());
          auto pending = [&](Request& q, const char* what) {
            try {
              EXPECT_FALSE(q.test()) << where << ": " << what
                                     << " returned a finished call although ranks 1.." << n - 1 << " had not entered";
            } catch (const Error& e) {
              ADD_FAILURE() << where << ": " << what << " failed before the peers entered: " << e.what();
            }
          };
          pending(qs, "start");
          pending(qd, "start_dense");
          double acc = 0;  // the caller's own work while both calls are pending
          for (int k = 1; k < 200000; ++k) acc += std::sqrt(static_cast<double>(k));
          EXPECT_GT(acc, 0.0);
          pending(qs, "start (after the caller's work)");
          pending(qd, "start_dense (after the caller's work)");
          go.store(true);
          qs.wait();
          qd.wait();
        } else {
          while (!go.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
          Request qs = plan->start(in.view, out);
          plan->run_dense(in.view, dense.data());  // queues behind the pending start
          qs.wait();
        }
        EXPECT_EQ(out.indices, ref.rows) << where << " (start)";
        EXPECT_TRUE(out.values == ref.vals) << where << " (start)";
        EXPECT_TRUE(dense == ref.dense) << where << " (start_dense)";
      },
      std::chrono::milliseconds(5000));
}

std::vector<std::string> all_schemes() {
  auto v = scheme_names();
  v.push_back("auto");
  return v;
}

INSTANTIATE_TEST_SUITE_P(Schemes, OutputAsync,
                         ::testing::Combine(::testing::ValuesIn(all_schemes()), ::testing::Range(1, 9)), param_name);
// n >= 2: with one rank a call needs no peer, so it may well finish before start() returns.
INSTANTIATE_TEST_SUITE_P(Schemes, OutputAsyncLatePeers,
                         ::testing::Combine(::testing::ValuesIn(all_schemes()), ::testing::Range(2, 9)), param_name);

// Every rank asks for the forbidden combination. A rank may be told by a faster peer first
// (RemoteError quoting it), but some rank must report the original InvalidUsage itself.
TEST(OutputAsyncErrors, AccumulateWithSparseOutputIsAnError) {
  std::atomic<int> original{0}, errors{0};
  loopback::run(3, [&](Communicator& c) {
    SchemeOptions o;
    o.output.accumulate = true;
    SparseView v;
    v.dense_len = 10;
    SparseTensor out;
    try {
      auto s = make_scheme("balanced", c, TensorSpec{10, 1, DType::F32}, o);
      s->run(v, out);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      ++errors;
      EXPECT_TRUE(e.code() == Result::InvalidUsage || e.code() == Result::RemoteError) << e.what();
      EXPECT_NE(std::string(e.what()).find("accumulate"), std::string::npos) << e.what();
      if (e.code() == Result::InvalidUsage) ++original;
    }
  });
  EXPECT_EQ(errors.load(), 3);
  EXPECT_GE(original.load(), 1) << "no rank reported the InvalidUsage itself";
}

TEST(OutputAsyncErrors, AnErrorReachesEveryRanksWait) {
  for (int n : {2, 5}) {
    std::atomic<int> local{0}, remote{0};
    loopback::run(n, [&](Communicator& c) {
      c.set_timeout(std::chrono::milliseconds(60000));  // the error must arrive at once, not by timeout
      std::vector<int64_t> idx{c.rank() == n - 1 ? 100 : 5};  // rank n-1: out of range
      std::vector<float> val{1.0f};
      SparseView v;
      v.dense_len = 100;
      v.nnz = 1;
      v.indices = idx.data();
      v.values = val.data();
      std::vector<float> dense(100);
      Request q;
      try {
        // A fast rank may fail while a slow one is still in the setup: the error reaches it there.
        auto s = make_scheme("balanced", c, TensorSpec{100, 1, DType::F32});
        q = s->start_dense(v, dense.data());
        q.wait();
        ADD_FAILURE() << "rank " << c.rank() << ": no error";
      } catch (const Error& e) {
        if (e.code() == Result::InvalidArgument) {
          ++local;
          EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(n - 1)), std::string::npos) << e.what();
        } else {
          EXPECT_EQ(e.code(), Result::RemoteError) << e.what();
          ++remote;
        }
      }
      EXPECT_FALSE(q.valid());
    });
    EXPECT_EQ(local.load(), 1);
    EXPECT_EQ(remote.load(), n - 1);
  }
}

TEST(OutputAsyncErrors, HierarchicalNonBlocking) {
  // The hierarchical mode runs its sub-communicators' operations on the world's call-queue thread.
  const int n = 6;
  Case cs = test::make_case("sparse1", n, 0);
  const auto ref = test::reference(cs);
  loopback::run(n, [&](Communicator& c) {
    test::Input in;
    test::make_input(cs, c.rank(), in);
    HierarchicalOptions h;
    h.node_size = 3;
    auto s = make_hierarchical(c, cs.spec(), cs.opt, h);
    std::vector<uint8_t> dense(cs.N() * dtype_size(cs.dtype));
    Request q = s->start_dense(in.view, dense.data());
    q.wait();
    EXPECT_TRUE(dense == ref.dense);
  });
}

}  // namespace
