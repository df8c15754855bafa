// Replays a timing schedule with real models moving through a zen::Communicator.
#include "zen/fl/sim/learner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <iterator>
#include <map>
#include <mutex>

#include "zen/error.hpp"
#include "zen/fl/fedavg.hpp"
#include "zen/fl/sim/wire.hpp"
#include "zen/fl/sparse_aggregate.hpp"

namespace zen::fl::sim {

int actor_rank(int actor, int num_ranks) noexcept {
  if (num_ranks <= 1 || actor == kServer) return 0;
  return 1 + actor % (num_ranks - 1);
}

namespace {

constexpr int kMaxTag = 16384;

struct Action {
  double t;
  int prio;  // 0 receive, 1 server update, 2 train, 3 send
  int event;
  bool operator<(const Action& o) const {
    if (t != o.t) return t < o.t;
    if (prio != o.prio) return prio < o.prio;
    return event < o.event;
  }
};

std::string actor_name(int a) { return a == kServer ? std::string("server") : "satellite " + std::to_string(a); }

struct SatState {
  std::vector<float> model;
  int version = -1;
  std::vector<PartialAggregate> holdings;
  // Compressed updates (Schedule::topk > 0):
  std::vector<SparseAggregate> sparse_holdings;
  std::vector<double> own;        ///< D_k (w_k - w) of its last training, not yet sent
  double own_weight = 0;
  std::vector<double> residual;   ///< error feedback: what its earlier messages did not send
};

class RankRunner {
 public:
  RankRunner(const Schedule& s, const Federation& fed, const Dataset& test, Communicator& comm)
      : s_(s), fed_(fed), test_(test), comm_(comm), n_(comm.size()), me_(comm.rank()) {
    ZEN_ENFORCE(s_.num_satellites == fed_.num_clients(),
                "learner: schedule has " + std::to_string(s_.num_satellites) + " satellites, federation " +
                    std::to_string(fed_.num_clients()) + " clients");
    // Tags: per (sender rank, receiver rank) sequence in event order (= the sender's send order).
    tags_.assign(s_.events.size(), 0);
    std::map<std::pair<int, int>, int> seq;
    for (const Event& e : s_.events) {
      if (!e.is_transfer() || e.failed) continue;
      const int a = actor_rank(e.from, n_), b = actor_rank(e.to, n_);
      if (a == b) continue;
      tags_[static_cast<std::size_t>(e.id)] = seq[{a, b}]++ % kMaxTag;
    }
    for (const Event& e : s_.events) {
      ZEN_CHECK_CODE(e.id >= 0 && static_cast<std::size_t>(e.id) < s_.events.size() &&
                         &s_.events[static_cast<std::size_t>(e.id)] == &e,
                     Result::InvalidArgument, "learner: event ids must be indices (event " + std::to_string(e.id) + ")");
      if (e.failed) continue;
      if (e.is_transfer()) {
        ZEN_ENFORCE(e.end_s > e.start_s, "learner: transfer event " + std::to_string(e.id) + " has no duration");
        if (actor_rank(e.from, n_) == me_) actions_.push_back({e.start_s, 3, e.id});
        if (actor_rank(e.to, n_) == me_) actions_.push_back({e.end_s, 0, e.id});
      } else if (e.kind == EventKind::Train) {
        if (actor_rank(e.from, n_) == me_) actions_.push_back({e.start_s, 2, e.id});
      } else if (e.kind == EventKind::ServerUpdate) {
        if (me_ == 0) actions_.push_back({e.start_s, 1, e.id});
      }
    }
    std::sort(actions_.begin(), actions_.end());
    if (me_ == 0) {
      server_model_ = fed_.global().clone();
      global_ = fed_.global().params();
      weights_.resize(static_cast<std::size_t>(fed_.num_clients()));
      for (int k = 0; k < fed_.num_clients(); ++k) weights_[static_cast<std::size_t>(k)] = fed_.client_weight(k);
      record(0, 0, 0.0, nullptr);
    }
  }

  LearnResult run() {
    const TrafficStats before = comm_.stats();
    for (const Action& a : actions_) {
      const Event& e = s_.events[static_cast<std::size_t>(a.event)];
      clock_ = std::max(clock_, a.t);
      switch (a.prio) {
        case 0: receive(e); break;
        case 1: server_update(e); break;
        case 2: train(e); break;
        case 3: send(e); break;
      }
    }
    const TrafficStats d = comm_.stats() - before;
    res_.comm_bytes_sent = d.total_sent();
    res_.comm_messages = d.calls[static_cast<std::size_t>(CommOp::Send)];
    if (me_ == 0) res_.final_params = global_;
    return std::move(res_);
  }

 private:
  SatState& sat(int k) { return sats_[k]; }

  /// Compressed aggregate: residual + held partials + own delta, top-k with error feedback.
  std::vector<uint8_t> sparse_payload(const Event& e, SatState& st) {
    const std::size_t n = fed_.global().num_params();
    std::vector<double> acc = std::move(st.residual);
    acc.resize(n, 0.0);
    double W = 0.0;
    std::vector<int> members;
    std::vector<SparseAggregate> keep;
    for (auto& h : st.sparse_holdings) {
      const bool inside = std::all_of(h.members.begin(), h.members.end(), [&](int m) {
        return std::binary_search(e.members.begin(), e.members.end(), m);
      });
      if (!inside) {
        keep.push_back(std::move(h));
        continue;
      }
      h.add_to(acc);
      W += h.weight;
      members.insert(members.end(), h.members.begin(), h.members.end());
    }
    st.sparse_holdings = std::move(keep);
    if (!st.own.empty() && std::binary_search(e.members.begin(), e.members.end(), e.from)) {
      for (std::size_t i = 0; i < n; ++i) acc[i] += st.own[i];
      W += st.own_weight;
      members.push_back(e.from);
      st.own.clear();
    }
    std::sort(members.begin(), members.end());
    ZEN_CHECK_CODE(members == e.members, Result::InternalError,
                   "learner: " + actor_name(e.from) + " holds " + std::to_string(members.size()) + " of the " +
                       std::to_string(e.members.size()) + " clients event " + std::to_string(e.id) + " sends");
    SparseAggregate msg = topk_extract(acc, s_.topk, W, std::move(members));
    st.residual = std::move(acc);
    return msg.to_bytes();
  }

  /// The server's conservation check: sum D_k against the registered weights of the members.
  void check_weight(const std::vector<int>& members, double weight, int from) const {
    double expect = 0.0;
    for (int m : members) {
      ZEN_CHECK_CODE(m >= 0 && m < fed_.num_clients(), Result::InternalError,
                     "server: aggregate names unknown client " + std::to_string(m));
      expect += weights_[static_cast<std::size_t>(m)];
    }
    ZEN_CHECK_CODE(std::abs(weight - expect) <= 1e-9 * std::max(1.0, expect), Result::InternalError,
                   "server: aggregate from " + actor_name(from) + " carries sum D_k = " + std::to_string(weight) +
                       " but its " + std::to_string(members.size()) + " clients hold " + std::to_string(expect));
  }

  /// Model transfer from -> to of `x`: the dense floats, or (compressed downloads) the top-k of
  /// x - M with M what `to` reconstructed from this sender's previous messages (initially the
  /// initial model, which every actor knows); M takes the sent entries, so what was not sent stays
  /// in x - M for the next message to `to` (error feedback).
  std::vector<uint8_t> model_payload(const Event& e, const std::vector<float>& x) {
    if (s_.download_topk == 0) {
      std::vector<uint8_t> b(x.size() * sizeof(float));
      std::memcpy(b.data(), x.data(), b.size());
      return b;
    }
    std::vector<float>& m = mirror(tx_mirror_, e.from, e.to);
    std::vector<double> acc(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) acc[i] = static_cast<double>(x[i]) - static_cast<double>(m[i]);
    const SparseAggregate msg = topk_extract(acc, s_.download_topk, 0.0, {});
    for (std::size_t i = 0; i < msg.positions.size(); ++i) m[msg.positions[i]] += msg.values[i];
    return msg.to_bytes();
  }

  std::vector<float>& mirror(std::map<std::pair<int, int>, std::vector<float>>& m, int from, int to) {
    auto it = m.find({from, to});
    if (it == m.end()) it = m.emplace(std::make_pair(from, to), fed_.global().params()).first;
    return it->second;
  }

  std::vector<uint8_t> payload_for_send(const Event& e) {
    if (e.kind == EventKind::Download) {
      ZEN_CHECK_CODE(version_ == e.version, Result::InternalError,
                     "learner: event " + std::to_string(e.id) + " downloads version " + std::to_string(e.version) +
                         " but the server holds version " + std::to_string(version_));
      return model_payload(e, global_);
    }
    SatState& st = sat(e.from);
    if (e.kind == EventKind::IslModel) {
      ZEN_CHECK_CODE(st.version >= 0, Result::InternalError,
                     "learner: " + actor_name(e.from) + " relays a model it never received (event " +
                         std::to_string(e.id) + ")");
      return model_payload(e, st.model);
    }
    if (s_.topk > 0) return sparse_payload(e, st);
    // IslAggregate / Upload: merge the holdings that make up exactly the scheduled members.
    PartialAggregate out;
    std::vector<PartialAggregate> keep;
    for (auto& h : st.holdings) {
      const bool inside = std::all_of(h.members.begin(), h.members.end(), [&](int m) {
        return std::binary_search(e.members.begin(), e.members.end(), m);
      });
      if (inside) out.merge(h);
      else keep.push_back(std::move(h));
    }
    st.holdings = std::move(keep);
    ZEN_CHECK_CODE(out.members == e.members, Result::InternalError,
                   "learner: " + actor_name(e.from) + " holds " + std::to_string(out.members.size()) +
                       " of the " + std::to_string(e.members.size()) + " clients event " + std::to_string(e.id) +
                       " sends");
    return out.to_bytes();
  }

  /// One message per transfer: TransferHeader + payload, exactly the bytes the schedule charged.
  void send(const Event& e) {
    const std::vector<uint8_t> body = payload_for_send(e);
    TransferHeader h;
    h.event = e.id;
    h.kind = static_cast<int32_t>(e.kind);
    h.start_s = e.start_s;
    h.end_s = e.end_s;
    h.payload_bytes = body.size();
    std::vector<uint8_t> msg(sizeof(h) + body.size());
    std::memcpy(msg.data(), &h, sizeof(h));
    if (!body.empty()) std::memcpy(msg.data() + sizeof(h), body.data(), body.size());
    ZEN_CHECK_CODE(msg.size() == e.bytes, Result::InternalError,
                   "learner: " + actor_name(e.from) + " sends " + std::to_string(msg.size()) + " bytes for event " +
                       std::to_string(e.id) + " (" + event_kind_name(e.kind) + "), the schedule charged " +
                       std::to_string(e.bytes));
    const int dst = actor_rank(e.to, n_);
    if (dst == me_) {
      local_[e.id] = std::move(msg);
      return;
    }
    comm_.send(msg.data(), msg.size(), dst, tags_[static_cast<std::size_t>(e.id)]);
  }

  void receive(const Event& e) {
    const int src = actor_rank(e.from, n_);
    std::vector<uint8_t> msg;
    TransferLog log;
    log.event = e.id;
    log.kind = e.kind;
    log.from = e.from;
    log.to = e.to;
    if (src == me_) {
      auto it = local_.find(e.id);
      ZEN_CHECK_CODE(it != local_.end(), Result::InternalError,
                     "learner: local transfer " + std::to_string(e.id) + " was never sent");
      msg = std::move(it->second);
      local_.erase(it);
    } else {
      msg.resize(e.bytes);
      comm_.recv(msg.data(), msg.size(), src, tags_[static_cast<std::size_t>(e.id)]);
      log.via_comm = true;
    }
    TransferHeader h;
    ZEN_CHECK_CODE(msg.size() >= sizeof(h), Result::InternalError,
                   "learner: event " + std::to_string(e.id) + " arrived with " + std::to_string(msg.size()) + " bytes");
    std::memcpy(&h, msg.data(), sizeof(h));
    ZEN_CHECK_CODE(h.event == e.id && h.kind == static_cast<int32_t>(e.kind) &&
                       h.payload_bytes == msg.size() - sizeof(h),
                   Result::InternalError,
                   "learner: rank " + std::to_string(me_) + " expected event " + std::to_string(e.id) + " from rank " +
                       std::to_string(src) + " but got event " + std::to_string(h.event) + " with " +
                       std::to_string(h.payload_bytes) + " payload bytes");
    log.start_s = h.start_s;
    log.end_s = h.end_s;
    log.bytes = msg.size();
    const std::vector<uint8_t> body(msg.begin() + static_cast<std::ptrdiff_t>(sizeof(h)), msg.end());
    res_.transfers.push_back(log);
    if (e.kind == EventKind::Download || e.kind == EventKind::IslModel) {
      SatState& st = sat(e.to);
      const std::size_t n = fed_.global().num_params();
      if (s_.download_topk > 0) {  // compressed: the base this receiver keeps for the sender, plus the entries
        const SparseAggregate d = SparseAggregate::from_bytes(body);
        ZEN_CHECK_CODE(d.dim == n && d.members.empty() &&
                           d.positions.size() == std::min<std::size_t>(s_.download_topk, n),
                       Result::InternalError,
                       "learner: compressed model message of event " + std::to_string(e.id) + " has dim " +
                           std::to_string(d.dim) + " and " + std::to_string(d.positions.size()) + " entries");
        std::vector<float>& base = mirror(rx_base_, e.from, e.to);
        for (std::size_t i = 0; i < d.positions.size(); ++i) base[d.positions[i]] += d.values[i];
        st.model = base;
      } else {
        ZEN_CHECK_CODE(body.size() == n * sizeof(float), Result::InternalError,
                       "learner: model message of " + std::to_string(body.size()) + " bytes, expected " +
                           std::to_string(n * sizeof(float)));
        st.model.resize(n);
        std::memcpy(st.model.data(), body.data(), body.size());
      }
      st.version = e.version;
      return;
    }
    if (s_.topk > 0) {
      SparseAggregate agg = SparseAggregate::from_bytes(body);
      ZEN_CHECK_CODE(agg.members == e.members && agg.dim == fed_.global().num_params(), Result::InternalError,
                     "learner: event " + std::to_string(e.id) + " delivered other clients or another dimension");
      if (e.kind == EventKind::IslAggregate) {
        sat(e.to).sparse_holdings.push_back(std::move(agg));
        return;
      }
      check_weight(agg.members, agg.weight, e.from);
      std::vector<int> both;
      std::merge(sparse_members_.begin(), sparse_members_.end(), agg.members.begin(), agg.members.end(),
                 std::back_inserter(both));
      ZEN_CHECK_CODE(std::adjacent_find(both.begin(), both.end()) == both.end(), Result::InternalError,
                     "server: a client would be counted twice in round " + std::to_string(e.round));
      sparse_members_ = std::move(both);
      sparse_weight_ += agg.weight;
      sparse_acc_.resize(global_.size(), 0.0);
      agg.add_to(sparse_acc_);
      return;
    }
    PartialAggregate agg = PartialAggregate::from_bytes(body);
    ZEN_CHECK_CODE(agg.members == e.members, Result::InternalError,
                   "learner: event " + std::to_string(e.id) + " delivered other clients than scheduled");
    if (e.kind == EventKind::IslAggregate) {
      sat(e.to).holdings.push_back(std::move(agg));
      return;
    }
    check_weight(agg.members, agg.weight, e.from);
    if (s_.scheme == "fedbuff") {  // the client's delta, buffered until an update takes it
      buffered_[e.from].push_back(agg.finalize());
      return;
    }
    if (s_.scheme == "ring-async") incoming_[e.orbit].merge(agg);
    else if (s_.scheme == "fedasync") incoming_[e.from].merge(agg);
    else round_acc_.merge(agg);  // throws when a client would be counted twice
  }

  void train(const Event& e) {
    SatState& st = sat(e.from);
    ZEN_CHECK_CODE(st.version == e.version, Result::InternalError,
                   "learner: " + actor_name(e.from) + " trains from version " + std::to_string(st.version) +
                       ", scheduled " + std::to_string(e.version) + " (event " + std::to_string(e.id) + ")");
    LocalOptions opt;
    if (e.epochs > 0) opt.epochs = e.epochs;
    if (s_.prox_mu > 0) opt.prox_mu = s_.prox_mu;
    ClientUpdate u = fed_.local_update(e.from, st.model, e.round, opt);
    res_.train_wall_s += u.stats.wall_seconds;
    ++res_.trainings;
    if (s_.scheme == "fedbuff") {  // FedBuff uploads the delta from the model it trained from
      std::vector<float> delta(u.params.size());
      for (std::size_t i = 0; i < delta.size(); ++i) delta[i] = u.params[i] - st.model[i];
      PartialAggregate p;
      p.add(delta, u.weight, e.from);
      st.holdings.push_back(std::move(p));
      return;
    }
    if (s_.topk > 0) {  // the delta from the model it trained from, weighted
      st.own.resize(u.params.size());
      for (std::size_t i = 0; i < u.params.size(); ++i)
        st.own[i] = u.weight * (static_cast<double>(u.params[i]) - static_cast<double>(st.model[i]));
      st.own_weight = u.weight;
      return;
    }
    PartialAggregate p;
    p.add(u.params, u.weight, e.from);
    st.holdings.push_back(std::move(p));
  }

  void server_update(const Event& e) {
    if (s_.scheme == "fedbuff") {
      // w <- w + server_lr sum_i s_i delta_i / K over the buffered deltas, in arrival order.
      ZEN_CHECK_CODE(!e.orbit_weights.empty(), Result::InternalError,
                     "server: fedbuff update " + std::to_string(e.version) + " has an empty buffer");
      std::vector<double> sum(global_.size(), 0.0);
      for (const auto& [client, sw] : e.orbit_weights) {
        auto it = buffered_.find(client);
        ZEN_CHECK_CODE(it != buffered_.end() && !it->second.empty(), Result::InternalError,
                       "server: fedbuff update " + std::to_string(e.version) + " has no delta from satellite " +
                           std::to_string(client));
        const std::vector<float>& d = it->second.front();
        for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += sw * static_cast<double>(d[i]);
        it->second.pop_front();
      }
      const double scale = s_.server_lr / static_cast<double>(e.orbit_weights.size());
      for (std::size_t i = 0; i < global_.size(); ++i)
        global_[i] = static_cast<float>(static_cast<double>(global_[i]) + scale * sum[i]);
    } else if (s_.scheme == "fedasync") {
      // w <- (1 - a_t) w + a_t w_k with the schedule's staleness-weighted a_t.
      ZEN_CHECK_CODE(e.members.size() == 1 && e.mix > 0 && e.mix <= 1, Result::InternalError,
                     "server: fedasync update " + std::to_string(e.version) + " must mix one client with a_t in (0, 1]");
      const auto it = incoming_.find(e.members[0]);
      ZEN_CHECK_CODE(it != incoming_.end() && it->second.members == e.members, Result::InternalError,
                     "server: fedasync update " + std::to_string(e.version) + " has no upload from satellite " +
                         std::to_string(e.members[0]));
      const std::vector<float> w = it->second.finalize();
      incoming_.erase(it);
      for (std::size_t i = 0; i < global_.size(); ++i)
        global_[i] = static_cast<float>((1.0 - e.mix) * global_[i] + e.mix * static_cast<double>(w[i]));
    } else if (s_.scheme == "ring-async") {
      PartialAggregate& in = incoming_[e.orbit];
      ZEN_CHECK_CODE(in.members == e.members, Result::InternalError,
                     "server: orbit " + std::to_string(e.orbit) + " delivered " + std::to_string(in.members.size()) +
                         " clients, scheduled " + std::to_string(e.members.size()));
      latest_[e.orbit] = std::move(in);
      incoming_.erase(e.orbit);
      std::vector<double> sum(global_.size(), 0.0);
      double W = 0.0;
      for (const auto& [orbit, sw] : e.orbit_weights) {
        const auto it = latest_.find(orbit);
        ZEN_CHECK_CODE(it != latest_.end(), Result::InternalError,
                       "server: no pair of orbit " + std::to_string(orbit));
        for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += sw * it->second.weighted_sum[i];
        W += sw * it->second.weight;
      }
      for (std::size_t i = 0; i < sum.size(); ++i) global_[i] = static_cast<float>(sum[i] / W);
    } else if (s_.topk > 0) {
      ZEN_CHECK_CODE(sparse_members_ == e.members && sparse_weight_ > 0, Result::InternalError,
                     "server: round " + std::to_string(e.round) + " received " +
                         std::to_string(sparse_members_.size()) + " clients, scheduled " +
                         std::to_string(e.members.size()));
      sparse_acc_.resize(global_.size(), 0.0);
      for (std::size_t i = 0; i < global_.size(); ++i)
        global_[i] = static_cast<float>(static_cast<double>(global_[i]) + sparse_acc_[i] / sparse_weight_);
      sparse_acc_.assign(global_.size(), 0.0);
      sparse_weight_ = 0.0;
      sparse_members_.clear();
    } else {
      ZEN_CHECK_CODE(round_acc_.members == e.members, Result::InternalError,
                     "server: round " + std::to_string(e.round) + " received " +
                         std::to_string(round_acc_.members.size()) + " clients, scheduled " +
                         std::to_string(e.members.size()));
      global_ = round_acc_.finalize();
      round_acc_.clear();
    }
    ++version_;
    ZEN_CHECK_CODE(version_ == e.version, Result::InternalError,
                   "server: produced version " + std::to_string(version_) + ", scheduled " + std::to_string(e.version));
    record(e.version, e.round, e.start_s, &s_.updates.at(static_cast<std::size_t>(e.version - 1)));
  }

  void record(int version, int round, double t, const UpdateRecord* u) {
    server_model_->set_params(global_);
    const Model::Eval ev = server_model_->evaluate(test_);
    LearnRow r;
    r.version = version;
    r.round = round;
    r.time_s = t;
    r.accuracy = ev.accuracy;
    r.loss = ev.loss;
    if (u) {
      r.ps_transfers = u->ps_transfers;
      r.ps_bits = u->ps_bits;
      r.isl_bits = u->isl_bits;
      r.isl_transfers = u->isl_transfers;
    }
    res_.rows.push_back(r);
  }

  const Schedule& s_;
  const Federation& fed_;
  const Dataset& test_;
  Communicator& comm_;
  int n_, me_;
  std::vector<int> tags_;
  std::vector<Action> actions_;
  std::map<int, SatState> sats_;
  std::map<int, std::vector<uint8_t>> local_;
  double clock_ = 0.0;
  // server
  std::unique_ptr<Model> server_model_;
  std::vector<float> global_;
  std::vector<double> weights_;
  int version_ = 0;
  PartialAggregate round_acc_;
  std::vector<double> sparse_acc_;  ///< compressed: sum of the round's uploads
  double sparse_weight_ = 0.0;
  std::vector<int> sparse_members_;
  std::map<int, PartialAggregate> incoming_, latest_;
  std::map<int, std::deque<std::vector<float>>> buffered_;  ///< fedbuff: deltas per client, arrival order
  /// Compressed downloads: per (sender, receiver), what the receiver reconstructed so far; the
  /// sender's copy (tx) and the receiver's (rx) live on their actors' ranks.
  std::map<std::pair<int, int>, std::vector<float>> tx_mirror_, rx_base_;
  LearnResult res_;
};

}  // namespace

LearnResult execute(const Schedule& s, const Federation& fed, const Dataset& test, Communicator& comm) {
  RankRunner r(s, fed, test, comm);
  return r.run();
}

LearnResult merge_ranks(std::vector<LearnResult> per) {
  ZEN_ENFORCE(!per.empty(), "merge_ranks: no per-rank results");
  LearnResult out = std::move(per[0]);
  for (std::size_t r = 1; r < per.size(); ++r) {
    out.transfers.insert(out.transfers.end(), per[r].transfers.begin(), per[r].transfers.end());
    out.comm_bytes_sent += per[r].comm_bytes_sent;
    out.comm_messages += per[r].comm_messages;
    out.train_wall_s += per[r].train_wall_s;
    out.trainings += per[r].trainings;
  }
  std::sort(out.transfers.begin(), out.transfers.end(),
            [](const TransferLog& a, const TransferLog& b) { return a.event < b.event; });
  return out;
}

LearnRunner on_communicator(Communicator& comm) {
  return [&comm](const Schedule& s, const Federation& fed, const Dataset& test) { return execute(s, fed, test, comm); };
}

}  // namespace zen::fl::sim
