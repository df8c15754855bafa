// Data-parallel word2vec (skip-gram with negative sampling) in LibTorch on MPI ranks, on a text corpus
// (the Brown corpus from scripts/fetch_corpus.sh by default). Both embedding tables are
// nn::Embedding(sparse=true); after every backward the gradients are synchronized by one of:
//   zen:<scheme>  zen::libtorch::GradSync (any zen scheme, e.g. zen:balanced, zen:allgather, zen:auto),
//                 its defaults (sync after backward); zen:<scheme>:overlap starts each parameter's sync
//                 during backward (GradSyncOptions::overlap), zen:<scheme>:no-overlap after it
//   gloo          c10d::ProcessGroupGloo's sparse allreduce over a FileStore, what DDP does with sparse
//                 gradients (an allgather of every rank's indices and values); it binds to the address
//                 of the interface the ranks share (--gloo-iface / GLOO_SOCKET_IFNAME to choose one)
//   dense         MPI_Allreduce of the dense gradient (what sparse=false would cost)
// Every variant starts from the same seed and sees the same data in the same order, so their
// parameters agree up to the summation order of floating-point sums (docs/torch.md). The variants
// run interleaved, step by step (step t of every variant, then step t+1), and the first --warmup
// steps of each are not timed, so every variant's figures are measured over the same period and none
// pays the job's warm-up (connections, first allocations). Prints loss, tokens/s and the share of
// step time spent waiting for the synchronization per interval; writes CSV and a PNG.
//
//   mpirun -np 4 build/bin/train_embedding --steps 300
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <mpi.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <torch/torch.h>
#ifdef ZEN_TRAIN_HAVE_GLOO
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif

#include "zen/comm/mpi.hpp"
#include "zen/detail/thread_pool.hpp"
#include "zen/torch.hpp"
#include "zen/trace/generators.hpp"
#include "zen/trace/stats.hpp"

namespace fs = std::filesystem;

namespace {

struct Cfg {
  std::string corpus = "data/brown/brown.txt";
  std::string sync = "zen:balanced,zen:allgather,gloo,dense";
  int steps = 200;
  int batch = 512;        // center words per rank and step
  int dim = 64;
  int window = 5;
  int negatives = 5;
  double lr = 0.025;
  std::string optimizer = "sgd";
  int64_t max_vocab = 0;
  uint64_t seed = 1;
  int interval = 20;
  int warmup = 5;          // untimed steps per variant before the timed ones
  std::string gloo_iface;  // Gloo's interface ("" = GLOO_SOCKET_IFNAME, else the one every rank shares)
  std::string out;
  bool check = false;
  double tolerance = 1e-5;
};

// splitmix64: the data order depends only on (seed, step, rank, draw).
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return next() % n; }
  double unit() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
};

struct Data {
  std::vector<std::vector<int32_t>> sentences;  // sentences of >= 2 words
  std::vector<double> neg_cdf;                  // unigram^0.75 (word2vec's negative distribution)
  int64_t vocab = 0;
};

Data load(const Cfg& c) {
  const zen::trace::Corpus corpus = zen::trace::load_corpus(c.corpus, zen::trace::SentenceSplit::Lines, c.max_vocab);
  Data d;
  d.vocab = static_cast<int64_t>(corpus.vocab.size());
  for (const auto& s : corpus.sentences)
    if (s.size() >= 2) d.sentences.push_back(s);
  double acc = 0;
  for (int64_t f : corpus.freq) d.neg_cdf.push_back(acc += std::pow(static_cast<double>(f), 0.75));
  for (double& x : d.neg_cdf) x /= acc;
  if (d.sentences.empty()) throw std::runtime_error(c.corpus + ": no sentence of two words or more");
  return d;
}

// Rank r's batch of step t: centers, contexts (within the window) and negatives.
void make_batch(const Data& d, const Cfg& c, int t, int r, at::Tensor& center, at::Tensor& context, at::Tensor& neg) {
  Rng g(c.seed * 0x100000001b3ULL ^ (static_cast<uint64_t>(t) << 20) ^ static_cast<uint64_t>(r) * 0x9e3779b97f4a7c15ULL);
  center = at::empty({c.batch}, at::kLong);
  context = at::empty({c.batch}, at::kLong);
  neg = at::empty({c.batch, c.negatives}, at::kLong);
  auto* pc = center.data_ptr<int64_t>();
  auto* po = context.data_ptr<int64_t>();
  auto* pn = neg.data_ptr<int64_t>();
  for (int b = 0; b < c.batch; ++b) {
    const auto& s = d.sentences[g.below(d.sentences.size())];
    const int len = static_cast<int>(s.size());
    const int i = static_cast<int>(g.below(static_cast<uint64_t>(len)));
    const int off = 1 + static_cast<int>(g.below(static_cast<uint64_t>(c.window)));
    int j = (g.next() & 1) ? i + off : i - off;
    if (j < 0 || j >= len) j = i + off < len ? i + off : (i - off >= 0 ? i - off : (i + 1) % len);
    if (j == i) j = (i + 1) % len;
    pc[b] = s[static_cast<size_t>(i)];
    po[b] = s[static_cast<size_t>(j)];
    for (int k = 0; k < c.negatives; ++k) {
      const double u = g.unit();
      pn[b * c.negatives + k] =
          static_cast<int64_t>(std::upper_bound(d.neg_cdf.begin(), d.neg_cdf.end(), u) - d.neg_cdf.begin());
      if (pn[b * c.negatives + k] >= d.vocab) pn[b * c.negatives + k] = d.vocab - 1;
    }
  }
}

struct SkipGram : torch::nn::Module {
  torch::nn::Embedding in{nullptr}, out{nullptr};
  SkipGram(int64_t V, int64_t D) {
    in = register_module("in", torch::nn::Embedding(torch::nn::EmbeddingOptions(V, D).sparse(true)));
    out = register_module("out", torch::nn::Embedding(torch::nn::EmbeddingOptions(V, D).sparse(true)));
    torch::NoGradGuard ng;
    in->weight.uniform_(-0.5 / static_cast<double>(D), 0.5 / static_cast<double>(D));
    out->weight.zero_();  // word2vec's initialization
  }
  at::Tensor loss(const at::Tensor& c, const at::Tensor& o, const at::Tensor& n) {
    const at::Tensor vc = in->forward(c);                                 // (B, D)
    const at::Tensor pos = (vc * out->forward(o)).sum(1);                 // (B)
    const at::Tensor negs = torch::bmm(out->forward(n), vc.unsqueeze(2)).squeeze(2);  // (B, K)
    return -(torch::log_sigmoid(pos) + torch::log_sigmoid(-negs).sum(1));  // (B): one loss per center word
  }
};

struct Interval {
  int step;
  double time_s, loss, tokens_per_s, sync_ms, sync_share;
};

struct Outcome {
  std::string variant;
  std::vector<Interval> curve;
  double tokens_per_s = 0, sync_ms = 0, sync_share = 0, final_loss = 0;
  std::vector<at::Tensor> params;  // rank 0: final parameters
  bool ranks_agree = true;
};

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double max_over_ranks(double x) {
  double m = 0;
  MPI_Allreduce(&x, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}
double sum_over_ranks(double x) {
  double m = 0;
  MPI_Allreduce(&x, &m, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return m;
}

uint64_t fnv(const at::Tensor& t, uint64_t h) {
  const auto* b = static_cast<const uint8_t*>(t.data_ptr());
  for (int64_t i = 0; i < t.numel() * static_cast<int64_t>(t.element_size()); ++i) h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}

// One variant's model, optimizer and synchronization, stepped by Trainer::run in turn with the others.
struct Variant {
  std::string name;
  std::unique_ptr<SkipGram> model;
  std::unique_ptr<torch::optim::Optimizer> opt;
  std::unique_ptr<zen::libtorch::GradSync> zsync;
  double t_sync = 0, t_step = 0, loss_acc = 0, total_sync = 0, total_step = 0;
  int in_interval = 0, timed_in_interval = 0, timed_steps = 0;
  Outcome o;
};

class Trainer {
 public:
  Trainer(const Cfg& c, const Data& d, zen::Communicator& comm) : c_(c), d_(d), comm_(comm) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &n_);
  }

#ifdef ZEN_TRAIN_HAVE_GLOO
  void set_gloo(c10::intrusive_ptr<c10d::ProcessGroupGloo> pg) { gloo_ = std::move(pg); }
#endif

  // Every variant for c.steps steps, interleaved: step t of each variant (in the order given), then
  // step t + 1. The first c.warmup steps are trained but not timed.
  std::vector<Outcome> run(const std::vector<std::string>& names) {
    std::vector<Variant> vs;
    for (const auto& name : names) vs.push_back(make(name));
    const double t_start = now_s();
    for (int t = 0; t < c_.steps; ++t) {
      at::Tensor cen, ctx, neg;
      make_batch(d_, c_, t, rank_, cen, ctx, neg);
      for (auto& v : vs) step(v, t, cen, ctx, neg, t_start);
    }
    std::vector<Outcome> out;
    for (auto& v : vs) out.push_back(finish(v));
    return out;
  }

 private:
  Variant make(const std::string& name) {
    Variant v;
    v.name = v.o.variant = name;
    torch::manual_seed(static_cast<uint64_t>(c_.seed));
    v.model = std::make_unique<SkipGram>(d_.vocab, c_.dim);
    if (c_.optimizer == "sgd")
      v.opt = std::make_unique<torch::optim::SGD>(v.model->parameters(), torch::optim::SGDOptions(c_.lr));
    else
      v.opt = std::make_unique<torch::optim::Adagrad>(v.model->parameters(), torch::optim::AdagradOptions(c_.lr));
    if (name.rfind("zen:", 0) == 0) {
      zen::libtorch::GradSyncOptions go;
      go.scheme = name.substr(4);
      for (const std::string suffix : {":overlap", ":no-overlap"})
        if (go.scheme.size() > suffix.size() &&
            go.scheme.compare(go.scheme.size() - suffix.size(), suffix.size(), suffix) == 0) {
          go.scheme.resize(go.scheme.size() - suffix.size());
          go.overlap = suffix == ":overlap";
        }
      v.zsync = std::make_unique<zen::libtorch::GradSync>(comm_, *v.model, go);
    } else if (name != "dense" && name != "gloo") {
      throw std::runtime_error("unknown --sync variant '" + name + "'");
    }
    return v;
  }

  void step(Variant& v, int t, const at::Tensor& cen, const at::Tensor& ctx, const at::Tensor& neg, double t_start) {
    MPI_Barrier(MPI_COMM_WORLD);  // every rank starts the variant's step together
    const double t0 = now_s();
    v.opt->zero_grad();
    // word2vec's update: the gradient of the summed loss (per-pair SGD steps, batched), averaged over ranks.
    const at::Tensor losses = v.model->loss(cen, ctx, neg);
    losses.sum().backward();
    const at::Tensor loss = losses.mean().detach();
    const double t1 = now_s();
    if (v.zsync) v.zsync->synchronize();
    else sync_other(v.name, *v.model);
    const double t2 = now_s();
    v.opt->step();
    const double t3 = now_s();
    v.loss_acc += loss.item<double>();  // the loss curve counts every step
    ++v.in_interval;
    if (t >= c_.warmup || t + 1 == c_.steps) {  // warm-up steps are trained, not timed (the last one always is)
      v.t_sync += t2 - t1;
      v.t_step += t3 - t0;
      ++v.timed_in_interval;
      ++v.timed_steps;
    }
    if ((t + 1) % c_.interval == 0 || t + 1 == c_.steps) {
      // The slowest rank sets the pace: max over ranks of step and sync time (0 for an interval of
      // warm-up steps only).
      const double step_s = max_over_ranks(v.t_step), sync_s = max_over_ranks(v.t_sync);
      const double mean_loss = sum_over_ranks(v.loss_acc) / n_ / v.in_interval;
      const int timed = v.timed_in_interval;
      Interval iv{t + 1, now_s() - t_start, mean_loss,
                  timed ? static_cast<double>(c_.batch) * n_ * timed / step_s : 0.0,
                  timed ? 1e3 * sync_s / timed : 0.0, timed ? sync_s / step_s : 0.0};
      v.o.curve.push_back(iv);
      if (rank_ == 0 && !timed)
        std::printf("%-22s step %5d  loss %.5f  (warm-up, not timed)\n", v.name.c_str(), iv.step, iv.loss);
      else if (rank_ == 0)
        std::printf("%-22s step %5d  loss %.5f  tokens/s %10.0f  sync %8.3f ms/step (%4.1f%% of the step)\n",
                    v.name.c_str(), iv.step, iv.loss, iv.tokens_per_s, iv.sync_ms, 100 * iv.sync_share);
      v.total_sync += sync_s;
      v.total_step += step_s;
      v.t_sync = v.t_step = v.loss_acc = 0;
      v.in_interval = v.timed_in_interval = 0;
    }
  }

  Outcome finish(Variant& v) {
    Outcome o = std::move(v.o);
    o.tokens_per_s = static_cast<double>(c_.batch) * n_ * v.timed_steps / v.total_step;
    o.sync_ms = 1e3 * v.total_sync / v.timed_steps;
    o.sync_share = v.total_sync / v.total_step;
    o.final_loss = o.curve.back().loss;
    // Every rank must hold the same parameters.
    uint64_t h = 1469598103934665603ULL;
    for (const auto& p : v.model->parameters()) h = fnv(p.detach().contiguous(), h);
    uint64_t lo = 0, hi = 0;
    MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    o.ranks_agree = lo == hi;
    for (const auto& p : v.model->parameters()) o.params.push_back(p.detach().clone());
    return o;
  }

  void sync_other(const std::string& variant, SkipGram& model) {
    for (auto& p : model.parameters()) {
      at::Tensor& g = p.mutable_grad();
      if (variant == "dense") {
        at::Tensor dense = g.is_sparse() ? g.to_dense() : g.contiguous();
        MPI_Allreduce(MPI_IN_PLACE, dense.data_ptr<float>(), static_cast<int>(dense.numel()), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
        g = dense.div_(n_);
      } else if (variant == "gloo") {
#ifdef ZEN_TRAIN_HAVE_GLOO
        std::vector<at::Tensor> ts{g};
        auto w = gloo_->allreduce(ts);
        w->wait();
        g = w->result()[0].coalesce().div(static_cast<double>(n_));
#endif
      }
    }
  }

  const Cfg& c_;
  const Data& d_;
  zen::Communicator& comm_;
  int rank_ = 0, n_ = 1;
#ifdef ZEN_TRAIN_HAVE_GLOO
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo_;
#endif
};

// The IPv4 address Gloo binds to on this rank (collective over MPI_COMM_WORLD). Gloo's peers connect
// to the address each rank publishes in the store, so it must be one the other ranks reach:
// 127.0.0.1 when every rank sees the same interfaces (one host); otherwise the address of this
// rank's first interface whose subnet holds an address of every other rank (on scripts/cluster.sh's
// namespaces: eth0's 10.231.0.x). An error names the rank when no such interface exists.
std::string gloo_address(int rank, int n) {
  constexpr int kMax = 16;
  uint32_t mine[2 * kMax] = {0};  // (address, netmask) pairs, network byte order; 0 = unused
  int k = 0;
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) == 0) {
    for (ifaddrs* i = ifs; i && k < kMax; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !i->ifa_netmask || (i->ifa_flags & IFF_LOOPBACK) ||
          !(i->ifa_flags & IFF_UP))
        continue;
      mine[2 * k] = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
      mine[2 * k + 1] = reinterpret_cast<const sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr;
      ++k;
    }
    freeifaddrs(ifs);
  }
  std::vector<uint32_t> all(static_cast<size_t>(n) * 2 * kMax);
  MPI_Allgather(mine, 2 * kMax, MPI_UINT32_T, all.data(), 2 * kMax, MPI_UINT32_T, MPI_COMM_WORLD);
  bool same = true;
  for (int q = 0; q < n; ++q) same = same && std::equal(mine, mine + 2 * kMax, all.begin() + q * 2 * kMax);
  if (same) return "127.0.0.1";
  for (int j = 0; j < k; ++j) {
    const uint32_t net = mine[2 * j] & mine[2 * j + 1];
    bool everyone = true;
    for (int q = 0; q < n && everyone; ++q) {
      bool found = false;
      for (int m = 0; m < kMax && !found; ++m) {
        const uint32_t a = all[static_cast<size_t>(q) * 2 * kMax + 2 * m];
        found = a != 0 && (a & mine[2 * j + 1]) == net;
      }
      everyone = found;
    }
    if (everyone) {
      char buf[INET_ADDRSTRLEN] = {0};
      in_addr a{};
      a.s_addr = mine[2 * j];
      inet_ntop(AF_INET, &a, buf, sizeof buf);
      return buf;
    }
  }
  throw std::runtime_error("gloo: rank " + std::to_string(rank) +
                           " has no interface on a subnet every rank shares; pass --gloo-iface (or set GLOO_SOCKET_IFNAME)");
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> v;
  size_t a = 0;
  while (a <= s.size()) {
    const size_t b = s.find(',', a);
    const std::string x = s.substr(a, b == std::string::npos ? std::string::npos : b - a);
    if (!x.empty()) v.push_back(x);
    if (b == std::string::npos) break;
    a = b + 1;
  }
  return v;
}

double max_rel_diff(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double scale = std::max(a[i].abs().max().item<double>(), 1e-30);
    m = std::max(m, (a[i] - b[i]).abs().max().item<double>() / scale);
  }
  return m;
}

void write_outputs(const std::string& dir, const std::vector<Outcome>& runs, int n) {
  fs::create_directories(dir);
  std::ofstream csv(fs::path(dir) / "train_embedding.csv");
  csv << "variant,step,time_s,loss,tokens_per_s,sync_ms_per_step,sync_share\n";
  for (const auto& r : runs)
    for (const auto& iv : r.curve)
      csv << r.variant << ',' << iv.step << ',' << iv.time_s << ',' << iv.loss << ',' << iv.tokens_per_s << ','
          << iv.sync_ms << ',' << iv.sync_share << '\n';
  csv.close();
  const std::string gp = zen::trace::find_gnuplot();
  if (gp.empty() || gp == "none") {
    std::fprintf(stderr, "train_embedding: gnuplot not found; PNG skipped (CSV written)\n");
    return;
  }
  std::ofstream g(fs::path(dir) / "train_embedding.gp");
  g << "set terminal pngcairo size 900,540 font 'sans,11'\nset output 'train_embedding.png'\n"
    << "set datafile separator ','\nset grid\nset key top right\nset xlabel 'wall time (s)'\nset ylabel 'loss'\n"
    << "set title 'word2vec SGNS, " << n << " ranks: loss vs time per gradient synchronization'\nplot ";
  for (size_t i = 0; i < runs.size(); ++i)
    g << (i ? ", " : "") << "'train_embedding.csv' using (strcol(1) eq '" << runs[i].variant
      << "' ? $3 : 1/0):4 with linespoints lw 2 title '" << runs[i].variant << "'";
  g << "\n";
  g.close();
  const std::string cmd = "cd '" + fs::absolute(dir).string() + "' && '" + gp + "' train_embedding.gp 2>gnuplot.log";
  if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "train_embedding: gnuplot failed (see %s/gnuplot.log)\n", dir.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  zen::mpi::Environment env(&argc, &argv);
  Cfg c;
  CLI::App app{"word2vec (skip-gram, negative sampling) with sparse embeddings, data-parallel over MPI ranks; "
               "compares gradient synchronizations: zen schemes, Gloo (DDP's sparse path), dense MPI_Allreduce"};
  app.add_option("--corpus", c.corpus, "text corpus, one sentence per line (scripts/fetch_corpus.sh)")->capture_default_str();
  app.add_option("--sync", c.sync, "comma-separated: zen:<scheme>[:overlap|:no-overlap] (sync during / after backward), gloo, dense")->capture_default_str();
  app.add_option("--steps", c.steps, "training steps per variant")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--batch", c.batch, "center words per rank and step")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--dim", c.dim, "embedding dimension")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--window", c.window, "context window")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--negatives", c.negatives, "negative samples per center word")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--lr", c.lr, "learning rate")->capture_default_str();
  app.add_option("--optimizer", c.optimizer, "sgd or adagrad (both take sparse gradients)")
      ->capture_default_str()->check(CLI::IsMember({"sgd", "adagrad"}));
  app.add_option("--max-vocab", c.max_vocab, "keep the most frequent words only (0 = all)")->capture_default_str();
  app.add_option("--seed", c.seed, "seed of the model and the data order")->capture_default_str();
  app.add_option("--interval", c.interval, "steps per printed line")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--warmup", c.warmup, "untimed steps per variant before the timed ones (trained like the others)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--gloo-iface", c.gloo_iface,
                 "network interface Gloo binds to (default: $GLOO_SOCKET_IFNAME, else 127.0.0.1 on one host, else "
                 "the interface whose subnet every rank shares)");
  app.add_option("--out", c.out, "directory for train_embedding.csv and train_embedding.png");
  app.add_flag("--check", c.check, "exit 1 unless every variant's parameters and loss curve agree with the first's");
  app.add_option("--tolerance", c.tolerance, "--check: relative tolerance")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank == 0 ? app.exit(e) : (e.get_exit_code() ? 1 : 0);
  }
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  try {
    const auto variants = split(c.sync);
    if (variants.empty()) throw std::runtime_error("--sync names no variant");
    auto comm = zen::mpi::create(MPI_COMM_WORLD);
    torch::set_num_threads(zen::detail::default_plan_threads(comm->ranks_on_node()));
    if (!fs::exists(c.corpus))
      throw std::runtime_error("corpus '" + c.corpus + "' not found: run scripts/fetch_corpus.sh (Brown corpus) or pass --corpus");
    const Data d = load(c);
    if (rank == 0)
      std::printf("# corpus %s: %zu sentences, vocabulary %lld; %d ranks, batch %d per rank, dim %d, %d negatives, "
                  "%s lr %g, %d steps (%d untimed), variants interleaved step by step\n",
                  c.corpus.c_str(), d.sentences.size(), static_cast<long long>(d.vocab), n, c.batch, c.dim,
                  c.negatives, c.optimizer.c_str(), c.lr, c.steps, std::min(c.warmup, c.steps - 1));
    Trainer tr(c, d, *comm);
#ifdef ZEN_TRAIN_HAVE_GLOO
    std::string store_dir;
    if (std::find(variants.begin(), variants.end(), "gloo") != variants.end()) {
      char buf[256] = {0};
      if (rank == 0) {
        std::string tmpl = (fs::temp_directory_path() / "zen-gloo-XXXXXX").string();
        if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
        std::snprintf(buf, sizeof buf, "%s", tmpl.c_str());
      }
      MPI_Bcast(buf, sizeof buf, MPI_CHAR, 0, MPI_COMM_WORLD);
      store_dir = buf;
      auto store = c10::make_intrusive<c10d::FileStore>(store_dir + "/store", n);
      auto opts = c10d::ProcessGroupGloo::Options::create();
      std::string iface = c.gloo_iface;
      if (iface.empty() && std::getenv("GLOO_SOCKET_IFNAME")) iface = std::getenv("GLOO_SOCKET_IFNAME");
      const std::string addr = iface.empty() ? gloo_address(rank, n) : "";
      opts->devices.push_back(iface.empty() ? c10d::ProcessGroupGloo::createDeviceForHostname(addr)
                                            : c10d::ProcessGroupGloo::createDeviceForInterface(iface));
      if (rank == 0) std::printf("# gloo: rank 0 binds to %s\n", iface.empty() ? addr.c_str() : ("interface " + iface).c_str());
      tr.set_gloo(c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, n, opts));
    }
#else
    for (const auto& v : variants)
      if (v == "gloo") throw std::runtime_error("--sync gloo: built without the gloo headers (Debian libgloo-dev)");
#endif
    MPI_Barrier(MPI_COMM_WORLD);
    const std::vector<Outcome> runs = tr.run(variants);
    int bad = 0;
    if (rank == 0) {
      std::printf("\n| sync | tokens/s | sync ms/step | sync share | final loss | max rel. param diff vs %s | ranks agree |\n"
                  "|---|---|---|---|---|---|---|\n",
                  runs[0].variant.c_str());
      for (const auto& r : runs) {
        const double diff = max_rel_diff(runs[0].params, r.params);
        double curve = 0;
        for (size_t i = 0; i < r.curve.size() && i < runs[0].curve.size(); ++i)
          curve = std::max(curve, std::fabs(r.curve[i].loss - runs[0].curve[i].loss) / std::max(1e-30, std::fabs(runs[0].curve[i].loss)));
        std::printf("| %s | %.0f | %.3f | %.1f%% | %.5f | %.2e (loss curve %.2e) | %s |\n", r.variant.c_str(),
                    r.tokens_per_s, r.sync_ms, 100 * r.sync_share, r.final_loss, diff, curve, r.ranks_agree ? "yes" : "NO");
        if (c.check && (diff > c.tolerance || curve > c.tolerance || !r.ranks_agree)) ++bad;
      }
      if (!c.out.empty()) {
        write_outputs(c.out, runs, n);
        std::printf("wrote %s/train_embedding.csv and train_embedding.png\n", c.out.c_str());
      }
      if (c.check) std::printf("check: %s (tolerance %g)\n", bad ? "FAILED" : "all variants agree", c.tolerance);
    }
#ifdef ZEN_TRAIN_HAVE_GLOO
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0 && !store_dir.empty()) fs::remove_all(store_dir);
#endif
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return bad ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_embedding: rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
    return 2;
  }
}
