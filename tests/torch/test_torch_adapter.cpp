// The LibTorch adapter on real nn::Embedding(sparse=true) gradients, n = 1..8 loopback ranks, every
// scheme: GradSync gives every rank the average (or sum) of all ranks' gradients, exactly (integer-
// valued gradients; averages compared with the same division), sparse or dense output, unused
// parameters, dense parameters in buckets, overlap on and off (the sync started during backward,
// proven from inside backward); bad inputs fail on every rank naming the parameter.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

#include "zen/comm/loopback.hpp"
#include "zen/torch.hpp"

using namespace zen;
using zen::libtorch::GradSync;
using zen::libtorch::GradSyncOptions;

namespace {

constexpr int64_t kV = 101;  // rows, not divisible by 2..8
constexpr int64_t kD = 3;

struct Net : ::torch::nn::Module {
  ::torch::nn::Embedding emb{nullptr}, unused{nullptr};
  ::torch::nn::Linear head{nullptr};
  Net() {
    emb = register_module("emb", ::torch::nn::Embedding(::torch::nn::EmbeddingOptions(kV, kD).sparse(true)));
    unused = register_module("unused", ::torch::nn::Embedding(::torch::nn::EmbeddingOptions(17, 2).sparse(true)));
    head = register_module("head", ::torch::nn::Linear(kD, 2));
  }
};

// Rank r's batch: indices with duplicates, 0 and V-1 included; weights are small integers.
at::Tensor batch(int r, int64_t len) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < len; ++i) v.push_back((i * 7 + r * 13) % kV);
  v.push_back(0);
  v.push_back(kV - 1);
  v.push_back(v.front());
  return ::torch::tensor(v, ::torch::kLong);
}
at::Tensor weights(int r, int64_t len) {
  return (::torch::arange(len * kD).reshape({len, kD}).remainder(5) - 2 + r % 3).to(::torch::kFloat);
}

// One rank's backward: loss = sum(emb(idx) * w) + sum(head(emb(idx)))*0 + unused only on odd ranks.
// set_to_none: the gradients start undefined (backward then makes them sparse at every step).
void backward(Net& net, int r, bool set_to_none = false) {
  net.zero_grad(set_to_none);
  const at::Tensor idx = batch(r, 20 + r);
  const at::Tensor e = net.emb->forward(idx);
  at::Tensor loss = (e * weights(r, idx.size(0))).sum() + net.head->forward(e.detach()).sum();
  if (r % 2 == 1) loss = loss + net.unused->forward(::torch::tensor({int64_t{r % 17}}, ::torch::kLong)).sum();
  loss.backward();
}

std::vector<std::string> schemes() {
  auto v = scheme_names();
  v.push_back("auto");
  return v;
}

// n identical models, built on the calling thread (LibTorch's generator is global: rank threads
// building their own would race on it).
std::vector<std::shared_ptr<Net>> identical_nets(int n) {
  std::vector<std::shared_ptr<Net>> nets;
  for (int r = 0; r < n; ++r) {
    ::torch::manual_seed(3);
    nets.push_back(std::make_shared<Net>());
  }
  return nets;
}

class TorchAdapter : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(TorchAdapter, GradSyncEqualsTheAverageOfAllRanks) {
  const auto& [scheme, n] = GetParam();
  // Reference: every rank's gradient, computed here on identical models.
  ::torch::manual_seed(3);
  Net ref_net;
  at::Tensor sum_emb = ::torch::zeros({kV, kD}), sum_unused = ::torch::zeros({17, 2});
  at::Tensor sum_w = ::torch::zeros({2, kD}), sum_b = ::torch::zeros({2});
  for (int r = 0; r < n; ++r) {
    backward(ref_net, r);
    sum_emb += ref_net.emb->weight.grad().to_dense();
    if (ref_net.unused->weight.grad().defined()) sum_unused += ref_net.unused->weight.grad().to_dense();
    sum_w += ref_net.head->weight.grad();
    sum_b += ref_net.head->bias.grad();
  }
  for (bool overlap : {false, true})
  for (bool average : {false, true})
    for (bool dense_output : {false, true}) {
      std::mutex mu;
      const std::vector<std::shared_ptr<Net>> nets = identical_nets(n);
      loopback::run(n, [&](Communicator& c) {
        Net& net = *nets[static_cast<size_t>(c.rank())];
        GradSyncOptions o;
        o.scheme = scheme;
        o.average = average;
        o.dense_output = dense_output;
        o.overlap = overlap;
        o.scheme_options.autotune.trials = 1;
        GradSync sync(c, net, o);
        // Plans are reused from the second step on; with overlap the syncs start in backward from then
        // on, the gradients set to none so that they are sparse at every step (dense output included).
        for (int step = 0; step < (overlap ? 3 : 2); ++step) {
          backward(net, c.rank(), overlap);
          sync.synchronize();
          const at::Tensor g = net.emb->weight.grad();
          std::lock_guard<std::mutex> lk(mu);
          const std::string where = scheme + " n=" + std::to_string(n) + " rank " + std::to_string(c.rank()) +
                                    (average ? " average" : " sum") + (dense_output ? " dense" : " sparse") +
                                    (overlap ? " overlap" : "") + " step " + std::to_string(step);
          EXPECT_EQ(sync.last().overlapped, overlap && step > 0 ? (n > 1 && c.rank() % 2 ? 2 : 1) : 0) << where;
          EXPECT_EQ(sync.last().resynced, 0) << where;
          ASSERT_EQ(g.is_sparse(), !dense_output) << where;
          if (!dense_output) {
            EXPECT_TRUE(g.is_coalesced()) << where;
          }
          const double d = n;
          const at::Tensor want = average ? sum_emb / d : sum_emb;
          EXPECT_TRUE(::torch::equal(g.to_dense(), want)) << where << "\n" << (g.to_dense() - want).abs().max();
          const at::Tensor wu = average ? sum_unused / d : sum_unused;
          if (n == 1 && step == 0) {
            EXPECT_FALSE(net.unused->weight.grad().defined()) << where << " (unused everywhere)";
          } else if (n > 1) {
            EXPECT_TRUE(::torch::equal(net.unused->weight.grad().to_dense(), wu)) << where << " (unused on even ranks)";
          }
          EXPECT_TRUE(::torch::allclose(net.head->weight.grad(), average ? sum_w / d : sum_w, 1e-6, 1e-6)) << where;
          EXPECT_TRUE(::torch::allclose(net.head->bias.grad(), average ? sum_b / d : sum_b, 1e-6, 1e-6)) << where;
          // With dense output the gradients stay dense (backward accumulates into them) from the
          // second step on, and go through the dense buckets.
          if (!dense_output || step == 0 || overlap) {
            EXPECT_EQ(sync.last().sparse_tensors, n > 1 ? 2 : 1) << where;
            EXPECT_EQ(sync.last().dense_tensors, 2) << where;
          }
          EXPECT_EQ(sync.last().dense_buckets, 1) << where;  // one bucket of f32 for all dense gradients
        }
      });
    }
}

INSTANTIATE_TEST_SUITE_P(All, TorchAdapter, ::testing::Combine(::testing::ValuesIn(schemes()), ::testing::Range(1, 9)),
                         [](const auto& i) { return std::get<0>(i.param) + "_n" + std::to_string(std::get<1>(i.param)); });

// An autograd node that calls probe(slot) from its backward. Created before the embedding's forward,
// it runs after the embedding's backward and AccumulateGrad (the engine runs the ready node of the
// highest sequence number first; AccumulateGrad's is the highest), so its probe sees what happened
// when backward produced the embedding's gradient, while backward is still running.
std::array<std::function<void()>, 8> probes;
struct Probe : public ::torch::autograd::Function<Probe> {
  static at::Tensor forward(::torch::autograd::AutogradContext* ctx, const at::Tensor& x, int64_t slot) {
    ctx->saved_data["slot"] = slot;
    return x.clone();
  }
  static ::torch::autograd::variable_list backward(::torch::autograd::AutogradContext* ctx,
                                                   ::torch::autograd::variable_list g) {
    probes[static_cast<size_t>(ctx->saved_data["slot"].toInt())]();
    return {g[0], at::Tensor()};
  }
};

// Overlap's property: from the second step on, the embedding's sync is started by backward and its
// bytes cross the communicator before backward returns. Inside backward, after the embedding's
// gradient was accumulated, each rank sees its sync started (started_in_backward) and waits (at most
// 5 s) for the communicator's call queue to run it: its traffic counters must have moved. Without
// overlap nothing is started nor sent inside backward. n = 2 and 3; the results stay exact.
TEST(GradSyncOverlap, SyncStartsAndSendsDuringBackward) {
  for (int n : {2, 3})
    for (bool overlap : {true, false}) {
      const std::vector<std::shared_ptr<Net>> nets = identical_nets(n);
      std::mutex mu;
      loopback::run(n, [&](Communicator& c) {
        const int r = c.rank();
        Net& net = *nets[static_cast<size_t>(r)];
        GradSyncOptions o;
        o.overlap = overlap;
        GradSync sync(c, net, o);
        for (int step = 0; step < 3; ++step) {
          net.zero_grad(true);
          int started = -1;
          bool grad_seen = false;
          uint64_t sent_in_backward = 0;
          const uint64_t sent0 = c.stats().total_sent();
          probes[static_cast<size_t>(r)] = [&] {
            grad_seen = net.emb->weight.grad().defined();
            started = sync.started_in_backward();
            const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
            while (c.queue_busy() && std::chrono::steady_clock::now() < until)
              std::this_thread::sleep_for(std::chrono::milliseconds(1));
            if (!c.queue_busy()) sent_in_backward = c.stats().total_sent() - sent0;
          };
          const at::Tensor x = ::torch::ones({2}, ::torch::requires_grad());
          const at::Tensor probe_part = Probe::apply(x, int64_t{r}).sum();  // created first: runs last
          const at::Tensor idx = batch(r, 20 + r);
          const at::Tensor loss = (net.emb->forward(idx) * weights(r, idx.size(0))).sum() + probe_part;
          loss.backward();
          sync.synchronize();
          std::lock_guard<std::mutex> lk(mu);
          const std::string where = "n=" + std::to_string(n) + " rank " + std::to_string(r) + " step " +
                                    std::to_string(step) + (overlap ? " overlap" : " no overlap");
          EXPECT_TRUE(grad_seen) << where << ": the probe ran before the embedding's gradient was accumulated";
          if (overlap && step > 0) {
            EXPECT_EQ(started, 1) << where << ": the embedding's sync was not started by backward";
            EXPECT_GT(sent_in_backward, 0u) << where << ": nothing was sent while backward ran";
          } else {
            EXPECT_EQ(started, 0) << where;
            EXPECT_EQ(sent_in_backward, 0u) << where;
          }
          EXPECT_EQ(sync.last().overlapped, started) << where;
        }
      });
      // After 3 steps every rank holds the same sum: the last step's gradient, averaged.
      at::Tensor want = ::torch::zeros({kV, kD});
      for (int r = 0; r < n; ++r) {
        const at::Tensor idx = batch(r, 20 + r);
        want.index_add_(0, idx, weights(r, idx.size(0)));
      }
      for (int r = 0; r < n; ++r)
        EXPECT_TRUE(::torch::equal(nets[static_cast<size_t>(r)]->emb->weight.grad().to_dense(), want / n))
            << "n=" << n << " rank " << r;
    }
}

// Gradient accumulation: a second backward before synchronize() changes a gradient whose sync was
// already started; it is synced again on every rank and the result is the sum of both backwards.
TEST(GradSyncOverlap, SecondBackwardBeforeSynchronizeIsResynced) {
  const int n = 3;
  const std::vector<std::shared_ptr<Net>> nets = identical_nets(n);
  std::mutex mu;
  loopback::run(n, [&](Communicator& c) {
    const int r = c.rank();
    Net& net = *nets[static_cast<size_t>(r)];
    GradSyncOptions o;
    o.average = false;
    o.overlap = true;
    GradSync sync(c, net, o);
    backward(net, r, true);
    sync.synchronize();
    backward(net, r, true);
    // Rank 0 alone accumulates a second backward: every rank must still agree to resync.
    if (r == 0) {
      const at::Tensor idx = batch(r, 20 + r);
      (net.emb->forward(idx) * weights(r, idx.size(0))).sum().backward();
    }
    sync.synchronize();
    std::lock_guard<std::mutex> lk(mu);
    EXPECT_EQ(sync.last().overlapped, r % 2 ? 2 : 1) << "rank " << r;
    EXPECT_EQ(sync.last().resynced, 1) << "rank " << r;
  });
  at::Tensor want = ::torch::zeros({kV, kD});
  for (int r = 0; r < n; ++r) {
    const at::Tensor idx = batch(r, 20 + r);
    want.index_add_(0, idx, weights(r, idx.size(0)) * (r == 0 ? 2 : 1));
  }
  for (int r = 0; r < n; ++r)
    EXPECT_TRUE(::torch::equal(nets[static_cast<size_t>(r)]->emb->weight.grad().to_dense(), want)) << "rank " << r;
}

// Every rank gets an error naming the parameter (no hang, no crash), at once: within 2 s of entering
// `body`, under a 10 s timeout (docs/reliability.md, "Timing bounds in tests"). A rank reports the
// error itself (any code but RemoteError, naming `must_contain`) or a RemoteError that names a rank
// which did and quotes it; at least one rank reports it itself.
template <typename F>
void expect_error_everywhere(int n, F&& body, const std::string& must_contain) {
  struct Got {
    bool threw = false;
    Result code = Result::Success;
    std::string what;
    double ms = 0;
  };
  std::vector<Got> got(static_cast<size_t>(n));
  loopback::run(
      n,
      [&](Communicator& c) {
        Got g;
        const auto t0 = std::chrono::steady_clock::now();
        try {
          body(c);
        } catch (const Error& e) {
          g.threw = true;
          g.code = e.code();
          g.what = e.what();
        }
        g.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        got[static_cast<size_t>(c.rank())] = g;
      },
      std::chrono::milliseconds(10000));
  std::vector<int> origins;
  for (int r = 0; r < n; ++r) {
    const Got& g = got[static_cast<size_t>(r)];
    if (g.threw && g.code != Result::RemoteError && g.what.find(must_contain) != std::string::npos) origins.push_back(r);
  }
  EXPECT_FALSE(origins.empty()) << "no rank reported '" << must_contain << "' itself; rank 0: " << got[0].what;
  for (int r = 0; r < n; ++r) {
    const Got& g = got[static_cast<size_t>(r)];
    EXPECT_TRUE(g.threw) << "rank " << r << " returned normally";
    if (!g.threw) continue;
    EXPECT_LT(g.ms, 2000.0) << "rank " << r << " failed after " << g.ms << " ms: " << g.what;
    if (std::find(origins.begin(), origins.end(), r) != origins.end()) continue;
    EXPECT_EQ(g.code, Result::RemoteError) << "rank " << r << ": " << g.what;
    bool names = false;
    for (int q : origins) names |= g.what.find("rank " + std::to_string(q) + " aborted") != std::string::npos;
    EXPECT_TRUE(names) << "rank " << r << " does not name the failing rank: " << g.what;
    EXPECT_NE(g.what.find(must_contain), std::string::npos) << "rank " << r << " does not quote the error: " << g.what;
  }
}

TEST(TorchAdapterErrors, MismatchedShapesAcrossRanks) {
  expect_error_everywhere(3, [](Communicator& c) {
    ::torch::nn::Embedding e(::torch::nn::EmbeddingOptions(c.rank() == 1 ? 11 : 10, 4).sparse(true));
    e->forward(::torch::tensor({int64_t{1}}, ::torch::kLong)).sum().backward();
    GradSync s(c, *e);
    s.synchronize();
  }, "parameter 'weight'");
}

TEST(TorchAdapterErrors, SparseOnOneRankDenseOnAnother) {
  expect_error_everywhere(2, [](Communicator& c) {
    ::torch::nn::Embedding e(::torch::nn::EmbeddingOptions(10, 4).sparse(c.rank() == 0));
    e->forward(::torch::tensor({int64_t{1}}, ::torch::kLong)).sum().backward();
    GradSync s(c, *e);
    s.synchronize();
  }, "sparse on rank 0 but dense on rank 1");
}

TEST(TorchAdapterErrors, DenseTensorWhereSparseIsRequiredAndTwoSparseDims) {
  expect_error_everywhere(2, [](Communicator& c) {
    auto plan = libtorch::make_plan(c, ::torch::zeros({10, 4}), "balanced");
    libtorch::allreduce_sparse(*plan, ::torch::zeros({10, 4}), false, "my_grad");
  }, "my_grad: expected a sparse COO tensor");
  expect_error_everywhere(2, [](Communicator& c) {
    auto plan = libtorch::make_plan(c, ::torch::zeros({10, 4}), "balanced");
    const at::Tensor two = ::torch::ones({10, 4}).to_sparse(2);
    libtorch::allreduce_sparse(*plan, two, false, "two_dims");
  }, "sparse_dim is 2");
  expect_error_everywhere(2, [](Communicator& c) {
    auto plan = libtorch::make_plan(c, ::torch::zeros({10, 4}), "balanced");
    libtorch::allreduce_sparse(*plan, ::torch::zeros({10, 4}, ::torch::kInt).to_sparse(1), false, "ints");
  }, "ints: dtype Int is not supported");
}

// One rank's bad gradient while its peer is already in the collective: the bad rank tells it at once
// (the peer must not wait out its timeout), at the plan and at GradSync's layout check.
TEST(TorchAdapterErrors, OneRanksBadGradientReachesItsPeerAtOnce) {
  expect_error_everywhere(2, [](Communicator& c) {
    auto plan = libtorch::make_plan(c, ::torch::zeros({10, 4}), "balanced");
    const at::Tensor good = ::torch::ones({10, 4}).to_sparse(1);
    libtorch::allreduce_sparse(*plan, c.rank() == 1 ? ::torch::zeros({10, 4}) : good, false, "my_grad");
  }, "my_grad: expected a sparse COO tensor");
  expect_error_everywhere(3, [](Communicator& c) {
    ::torch::nn::Embedding e(::torch::nn::EmbeddingOptions(10, 4).sparse(true));
    e->forward(::torch::tensor({int64_t{1}}, ::torch::kLong)).sum().backward();
    if (c.rank() == 2) e->weight.mutable_grad() = e->weight.grad().to_dense().to_sparse(2);
    GradSync s(c, *e);
    s.synchronize();
  }, "parameter 'weight': gradient");
}

TEST(TorchAdapterErrors, SixteenBitAndDoubleGradients) {
  for (auto st : {::torch::kDouble, ::torch::kHalf, ::torch::kBFloat16}) {
    loopback::run(3, [&](Communicator& c) {
      const at::Tensor idx = ::torch::tensor({int64_t{0}, int64_t{5}, int64_t{5}, int64_t{9}}, ::torch::kLong).reshape({1, 4});
      const at::Tensor val = (::torch::arange(8).reshape({4, 2}) + c.rank()).to(st);
      const at::Tensor g = ::torch::sparse_coo_tensor(idx, val, {10, 2});
      auto plan = libtorch::make_plan(c, ::torch::zeros({10, 2}, ::torch::TensorOptions().dtype(st)), "balanced");
      const at::Tensor got = libtorch::allreduce_sparse(*plan, g, true, "g");
      at::Tensor want = ::torch::zeros({10, 2}, ::torch::kDouble);
      for (int r = 0; r < 3; ++r)
        want += ::torch::sparse_coo_tensor(idx, (::torch::arange(8).reshape({4, 2}) + r).to(::torch::kDouble), {10, 2}).to_dense();
      EXPECT_TRUE(::torch::equal(got.to(::torch::kDouble), want)) << c10::toString(st);
    });
  }
}

}  // namespace
