// zen_perf's runner (runner.hpp): node groups of the hierarchical mode, one contender's call and
// statistics, the contenders of a run, and the rounds that time them.
#include "runner.hpp"

#include <algorithm>
#include <numeric>
#include <random>
#include <chrono>
#include <cstdio>

#include "options.hpp"
#include "zen/error.hpp"
#include "zen/schemes/hierarchical.hpp"
#ifdef ZEN_HAVE_MPI
#include "zen/comm/mpi.hpp"
#endif

namespace zen_perf {

using namespace zen;

std::shared_ptr<NodeGroups> make_node_groups(Communicator& world, const std::string& how) {
  auto g = std::make_shared<NodeGroups>();
  const int n = world.size();
  if (how == "host") {
#ifdef ZEN_HAVE_MPI
    ZEN_ENFORCE(std::string(world.backend_name()) == "mpi", "--node-size host needs mpirun (with --threads give a number)");
    MPI_Comm intra = MPI_COMM_NULL, inter = MPI_COMM_NULL;
    const int r = world.rank();
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, r, MPI_INFO_NULL, &intra);
    int local = 0, L = 0;
    MPI_Comm_rank(intra, &local);
    MPI_Comm_size(intra, &L);
    MPI_Comm_split(MPI_COMM_WORLD, local, r, &inter);
    // Every host the same size, its ranks consecutive (rank = node * L + local): what the scheme assumes.
    const auto sizes = world.allgather_value(static_cast<int64_t>(L));
    const auto locals = world.allgather_value(static_cast<int64_t>(local));
    for (int q = 0; q < n; ++q)
      ZEN_ENFORCE(sizes[static_cast<size_t>(q)] == L && locals[static_cast<size_t>(q)] == q % L,
                  "--node-size host: rank " + std::to_string(q) + " has local index " +
                      std::to_string(locals[static_cast<size_t>(q)]) + " on a host of " +
                      std::to_string(sizes[static_cast<size_t>(q)]) + " ranks; place the same number of consecutive ranks on every host (mpirun --map-by ppr:K:node)");
    g->intra = mpi::create(intra);
    g->inter = mpi::create(inter);
    MPI_Comm_free(&intra);
    MPI_Comm_free(&inter);
    g->node_size = L;
    return g;
#else
    ZEN_THROW(Result::InvalidArgument, "--node-size host needs the MPI build; give a number of ranks per node");
#endif
  }
  int L = 0;
  try {
    L = std::stoi(how);
  } catch (const std::exception&) {
    ZEN_THROW(Result::InvalidArgument, "--node-size '" + how + "': use 'host' or a number of ranks per node");
  }
  ZEN_ENFORCE(L >= 1 && n % L == 0, "--node-size " + how + " must divide the rank count " + std::to_string(n));
  NodeComms nc = split_nodes(world, L);
  g->intra = std::move(nc.intra);
  g->inter = std::move(nc.inter);
  g->node_size = L;
  return g;
}

void Runner::call(const SparseView& in, bool dense_out) {
#ifdef ZEN_HAVE_MPI
  if (raw) {
    raw->run(in, dense_result(dense_out), dense.data(), sparse);
    return;
  }
#endif
  if (dense_out) plan->run_dense(in, dense.data());
  else plan->run(in, sparse);
}

void Runner::account() {
#ifdef ZEN_HAVE_MPI
  if (raw) {
    sent_sum += raw->sent;
    recv_sum += raw->recv;
    encoding = dense_only ? "dense" : "coo";
    ++calls;
    return;
  }
#endif
  const SyncReport& rep = plan->report();
  if (!rep.decision.empty() && (decisions.empty() || decisions.back() != rep.decision)) decisions.push_back(rep.decision);
  if (name == "auto") {
    auto it = std::find_if(ran.begin(), ran.end(), [&](const auto& x) { return x.first == rep.scheme; });
    if (it == ran.end()) ran.emplace_back(rep.scheme, 1);
    else ++it->second;
  }
  sent_sum += rep.sent;
  recv_sum += rep.recv;
  bound_sum += rep.bound_bytes;
  push = std::max(push, rep.push_imbalance);
  pull = std::max(pull, rep.pull_imbalance);
  // Every distinct pull encoding of the timed calls, in the order first seen: a trace's iterations
  // may choose differently, and the row describes all of them (not the last call's alone).
  if (!rep.encoding.empty() && ("," + encoding + ",").find("," + rep.encoding + ",") == std::string::npos)
    encoding += (encoding.empty() ? "" : ",") + rep.encoding;
  // Phases: bytes of the last call, seconds and CPU seconds averaged over the timed calls.
  if (phases.size() != rep.phases.size()) {
    phases = rep.phases;
    phase_sum.assign(phases.size(), 0.0);
    phase_cpu_sum.assign(phases.size(), 0.0);
  } else {
    for (size_t i = 0; i < phases.size(); ++i) phases[i].sent = rep.phases[i].sent, phases[i].recv = rep.phases[i].recv;
  }
  for (size_t i = 0; i < phases.size() && i < phase_sum.size(); ++i) {
    phase_sum[i] += rep.phases[i].seconds;
    phase_cpu_sum[i] += rep.phases[i].cpu_seconds;
  }
  ++calls;
  for (size_t i = 0; i < phases.size(); ++i) {
    phases[i].seconds = phase_sum[i] / static_cast<double>(calls);
    phases[i].cpu_seconds = phase_cpu_sum[i] / static_cast<double>(calls);
  }
}

bool Runner::note_decision(double dt, bool timed) {
  if (!plan) return false;
  const SyncReport& rep = plan->report();
  bool stats = false;
  for (const auto& p : rep.phases) stats = stats || p.name == "auto_stats";
  if (stats || deciding) {
    ++decision_calls;
    decision_s += dt;
    if (timed) ++decision_timed;
  }
  // Measuring now, or deferred to a later call ("measured after N calls": auto's budget for it grows
  // with the calls it serves): its decision is not over yet.
  deciding = rep.decision.rfind("auto exploring", 0) == 0 || rep.decision.find("; measured after ") != std::string::npos;
  return deciding;
}
bool dense_cost(const std::string& s) {
  return s == "dense" || s == "dense_native" || s == "sparcml" || s == "omnireduce" || s == "mpi_allreduce" ||
         s == "mpi_allgatherv";
}

std::vector<Runner> make_runners(Communicator& comm, const std::vector<std::string>& names, const TensorSpec& spec,
                                 const SchemeOptions& opt, bool dense_out, bool from_all, const std::string& node_size) {
  std::vector<Runner> out;
  std::shared_ptr<NodeGroups> nodes;
  const uint64_t bytes = spec.dense_len * dtype_size(spec.dtype);
  for (const auto& shown : names) {
    const std::string name = shown.substr(0, shown.find('#'));  // NAME#TAG: another instance of NAME
    if (from_all && dense_cost(name) && bytes > (uint64_t{4} << 30)) {
      if (comm.rank() == 0)
        std::printf("# %s skipped: it needs N-value buffers (%.1f GiB); name it in --scheme to run it anyway\n",
                    name.c_str(), static_cast<double>(bytes) / static_cast<double>(uint64_t{1} << 30));
      continue;
    }
    Runner rn;
    rn.name = shown;
    if (is_raw(name)) {
#ifdef ZEN_HAVE_MPI
      rn.raw = make_raw(name);
      rn.dense_only = name == "mpi_allreduce";
      raw_value_type(spec.dtype);  // f32/f64 only: a clear error otherwise
#endif
    } else if (name.rfind("hier_", 0) == 0) {
      if (!nodes) nodes = make_node_groups(comm, node_size);
      rn.nodes = nodes;
      rn.plan = make_hierarchical(comm, *nodes->intra, *nodes->inter, spec, opt, name.substr(5));
    } else if (const size_t colon = name.find(':'); colon != std::string::npos) {
      // SCHEME:PUSH/PULL: the scheme with its own push and pull encodings (timed beside the others).
      Config c;
      const size_t slash = name.find('/', colon);
      c.push = name.substr(colon + 1, slash - colon - 1);
      c.pull = name.substr(slash + 1);
      SchemeOptions o = opt;
      const SchemeOptions e = scheme_options(c);
      o.push = e.push;
      o.pull = e.pull;
      rn.plan = make_scheme(name.substr(0, colon), comm, spec, o);
    } else if (name == "hierarchical_sparse" && node_size != "host") {
      SchemeOptions o = opt;  // --node-size N: N consecutive ranks per node (host: ranks_on_node())
      try {
        o.node_size = std::stoi(node_size);
      } catch (const std::exception&) {
        ZEN_THROW(Result::InvalidArgument, "--node-size '" + node_size + "': use 'host' or a number of ranks per node");
      }
      rn.plan = make_scheme(name, comm, spec, o);
    } else {
      rn.plan = make_scheme(name, comm, spec, opt);
    }
    if (rn.dense_result(dense_out)) rn.dense.resize(spec.dense_len * dtype_size(spec.dtype));
    out.push_back(std::move(rn));
  }
  return out;
}

double timed_call(Communicator& comm, Runner& rn, const SparseView& in, bool dense_out) {
  comm.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  rn.call(in, dense_out);
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto all = comm.allgather_value(dt);
  return *std::max_element(all.begin(), all.end());
}

void time_runners(Communicator& comm, const std::vector<Group>& groups, bool dense_out, int warmup, int iters,
                  bool settle) {
  constexpr uint64_t kMaxSettleCalls = 1000;  // auto explores at most max_explore x trials calls
  // Still deciding, or auto not called yet (-w 0: its first call gathers the statistics).
  auto undecided = [](const Runner& rn) { return rn.deciding || (rn.name == "auto" && rn.decision_calls == 0); };
  std::vector<size_t> order;  // this round's order of a group's runners
  for (int k = 0; k < warmup + iters; ++k) {
    if (settle && k == warmup)
      for (const Group& g : groups)
        for (auto& rn : *g.runners)
          for (uint64_t extra = 0; undecided(rn); ++extra) {
            ZEN_ENFORCE(extra < kMaxSettleCalls, "zen_perf: " + rn.name + " still deciding after " +
                                                     std::to_string(kMaxSettleCalls) + " warm-up calls");
            const SparseView& in = (*g.views)[static_cast<size_t>(warmup + extra) % g.views->size()];
            rn.note_decision(timed_call(comm, rn, in, dense_out), false);
          }
    for (const Group& g : groups) {
      const SparseView& in = (*g.views)[static_cast<size_t>(k) % g.views->size()];
      // Each round in its own order (a permutation seeded by the round: the same on every rank): a
      // call's time depends on what ran just before it (a scheme right after omnireduce, dense and
      // dense_native finds the caches cold), so a fixed order would always hand the same schemes
      // the same disadvantage (docs/benchmarks.md).
      order.resize(g.runners->size());
      std::iota(order.begin(), order.end(), size_t{0});
      std::shuffle(order.begin(), order.end(), std::mt19937_64(0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(k)));
      for (size_t j : order) {
        Runner& rn = (*g.runners)[j];
        const double dt = timed_call(comm, rn, in, dense_out);
        rn.note_decision(dt, k >= warmup);
        if (k < warmup) continue;
        rn.times.push_back(dt);
        rn.account();
      }
    }
  }
}

}  // namespace zen_perf
