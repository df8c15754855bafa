#include "zen/schemes/scheme.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <new>
#include <stdexcept>
#include <functional>
#include <map>
#include <type_traits>

#include "common.hpp"
#include "scheme_row.hpp"
#include "zen/error.hpp"

namespace zen {

namespace detail {
double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace detail

namespace {
struct SetupRecord {
  uint64_t dense_len;
  uint32_t row_width;
  uint32_t dtype;
  uint64_t name_hash;
};
}  // namespace

namespace detail {
void require_host_memory(const Communicator& comm, const char* where, const std::string& scheme) {
  // Host plans read and write their buffers on the CPU; a device communicator's buffers are device
  // memory (and its allreduce_or / sum_or have no host loops to fall back to).
  if (comm.memory_space() == MemSpace::Host) return;
  std::string device;  // the schemes whose row says make_device_plan has them
  for (const auto& r : scheme_table())
    if (r.has(kDevicePlan)) device += std::string(device.empty() ? "" : ", ") + r.name;
  ZEN_THROW(Result::Unsupported, std::string(where) + ": rank " + std::to_string(comm.rank()) + ": scheme '" + scheme +
                                     "' is a host plan and communicator '" + comm.backend_name() +
                                     "' holds device memory (device plans: zen::cuda::make_device_plan of " + device +
                                     " or hierarchical, DeviceBalanced, DeviceHierarchical)");
}
}  // namespace detail

void Plan::unsupported(const char* call) const {
  ZEN_THROW(Result::Unsupported, std::string(call) + ": rank " + std::to_string(comm_.rank()) + " plan '" + name() +
                                     "' on " + comm_.backend_name() +
                                     ": a device plan offers run_dense and run_dense_from_dense (stream-ordered; "
                                     "synchronize() waits), not sparse output or non-blocking calls");
}
void Plan::run(const SparseView&, SparseTensor&) { unsupported("run (sparse output)"); }
Request Plan::start(const SparseView&, SparseTensor&) { unsupported("start"); }
Request Plan::start_dense(const SparseView&, void*) { unsupported("start_dense"); }

void Plan::run_dense_from_dense(const void* grad, void* dense_out) {
  ZEN_CHECK_CODE(comm_.memory_space() == MemSpace::Host, Result::InternalError,
                 std::string("run_dense_from_dense: plan '") + name() + "' has no device implementation of it");
  // The rows holding a value != 0 are the input entries (-0.0 counts as zero, as on the device).
  const size_t D = spec_.row_width, es = dtype_size(spec_.dtype);
  const uint64_t rows = spec_.dense_len / D;
  dd_rows_.clear();
  dd_vals_.clear();
  dispatch_dtype(spec_.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* g = static_cast<const T*>(grad);
    for (uint64_t r = 0; r < rows; ++r) {
      bool any = false;
      for (size_t k = 0; k < D && !any; ++k) any = static_cast<typename accum_of<T>::type>(g[r * D + k]) != 0;
      if (!any) continue;
      dd_rows_.push_back(static_cast<int64_t>(r));
      const auto* b = reinterpret_cast<const uint8_t*>(g + r * D);
      dd_vals_.insert(dd_vals_.end(), b, b + D * es);
    }
  });
  SparseView v;
  v.dense_len = spec_.dense_len;
  v.row_width = spec_.row_width;
  v.dtype = spec_.dtype;
  v.nnz = dd_rows_.size();
  v.index_type = IndexType::I64;
  v.indices = dd_rows_.data();
  v.values = dd_vals_.data();
  run_dense(v, dense_out);
}

SparseAllreduce::SparseAllreduce(Communicator& comm, const TensorSpec& spec, const SchemeOptions& opt)
    : Plan(comm, spec), opt_(opt), output_(opt.output), plan_id_(comm.next_plan_id()) {
  // Output options are applied once, here in the base class; plans built from opt_ inside a scheme
  // (auto's candidates, hierarchical's inter-node scheme) must not apply them a second time.
  opt_.output = OutputOptions{};
  detail::require_host_memory(comm, "sparse allreduce setup", "(host)");
  const std::string where = "rank " + std::to_string(comm.rank()) + " sparse allreduce setup: ";
  ZEN_ENFORCE(spec.row_width >= 1, where + "row width must be >= 1");
  ZEN_ENFORCE(spec.dense_len % spec.row_width == 0, where + "dense length " + std::to_string(spec.dense_len) +
                                                        " is not divisible by row width " + std::to_string(spec.row_width));
  // Agree on the h0 seed (rank 0's) and check that every rank has the same tensor spec: one small
  // allgather at setup, nothing per call. Not for a plan made by a plan that did both (AgreedSetup).
  if (detail::AgreedSetup::active()) return;
  comm_.broadcast(&opt_.seed, sizeof(opt_.seed), 0);
  SetupRecord mine{spec.dense_len, spec.row_width, static_cast<uint32_t>(spec.dtype), 0};
  auto all = comm_.allgather_value(mine);
  for (int p = 0; p < comm_.size(); ++p) {
    const auto& o = all[static_cast<size_t>(p)];
    if (o.dense_len != mine.dense_len || o.row_width != mine.row_width || o.dtype != mine.dtype)
      ZEN_THROW(Result::InvalidUsage,
                where + "rank " + std::to_string(p) + " has N=" + std::to_string(o.dense_len) + " D=" +
                    std::to_string(o.row_width) + " dtype=" + dtype_name(static_cast<DType>(o.dtype)) + " but rank " +
                    std::to_string(comm_.rank()) + " has N=" + std::to_string(mine.dense_len) + " D=" +
                    std::to_string(mine.row_width) + " dtype=" + dtype_name(spec.dtype));
  }
}

void SparseAllreduce::prepare(const SparseView& in) {
  // Built on a stack buffer: the per-call checks allocate nothing (messages are built on failure).
  char op[96];
  std::snprintf(op, sizeof op, "sparse allreduce (%s)", name());
  auto where = [&] { return "rank " + std::to_string(comm_.rank()) + " " + op + ": "; };
  ZEN_ENFORCE(in.dense_len == spec_.dense_len, where() + "input N=" + std::to_string(in.dense_len) +
                                                   " differs from the scheme's N=" + std::to_string(spec_.dense_len));
  ZEN_ENFORCE(in.row_width == spec_.row_width, where() + "input row width " + std::to_string(in.row_width) +
                                                   " differs from the scheme's " + std::to_string(spec_.row_width));
  ZEN_ENFORCE(in.dtype == spec_.dtype, where() + "input dtype " + dtype_name(in.dtype) + " differs from the scheme's " +
                                           dtype_name(spec_.dtype));
  if (opt_.validate) validate(in, comm_.rank(), op);
  if (opt_.duplicates == DuplicatePolicy::Reject && has_duplicates(in)) {
    std::vector<int64_t> idx(in.nnz);
    for (size_t i = 0; i < in.nnz; ++i) idx[i] = in.index_at(i);
    std::sort(idx.begin(), idx.end());
    const auto dup = std::adjacent_find(idx.begin(), idx.end());
    ZEN_THROW(Result::InvalidArgument, where() + "duplicate index " + std::to_string(*dup) +
                                           " in the input (policy: reject; use DuplicatePolicy::Sum to sum duplicates)");
  }
}

namespace detail {
namespace {
thread_local bool agreed_setup = false;
}
AgreedSetup::AgreedSetup() : was_(agreed_setup) { agreed_setup = true; }
AgreedSetup::~AgreedSetup() { agreed_setup = was_; }
bool AgreedSetup::active() { return agreed_setup; }
}  // namespace detail

detail::ThreadPool& SparseAllreduce::pool() {
  if (!pool_)
    pool_ = std::make_unique<detail::ThreadPool>(opt_.threads > 0 ? opt_.threads
                                                                 : detail::default_plan_threads(comm_.ranks_on_node()));
  return *pool_;
}

void SyncReport::clear() {
  phases.clear();  // keeps its capacity: no allocation in steady state
  sent = recv = 0;
  seconds = 0;
  push_imbalance = pull_imbalance = 1.0;
  result_nnz = 0;
  encoding.clear();
  push_encoding.clear();
  bound_bytes = 0;
  serial_overflows = 0;
  global_rows = 0;
  scheme.clear();
  decision.clear();
}

void SparseAllreduce::reset_report() { report_.clear(); }

void SparseAllreduce::execute_checked(const SparseView& in, SparseTensor* sparse_out, void* dense_out) {
  Communicator::OwnerScope own(comm_, holder_);
  // A workspace that cannot be allocated is a clear error naming the rank and the scheme, not a bare
  // std::bad_alloc (the loopback runner / the caller then aborts the communicator).
  try {
    execute(in, sparse_out, dense_out);
  } catch (const std::bad_alloc&) {
    ZEN_THROW(Result::SystemError, "rank " + std::to_string(comm_.rank()) + " sparse allreduce (" + name() +
                                       "): workspace allocation failed (N=" + std::to_string(spec_.dense_len) +
                                       ", nnz=" + std::to_string(in.nnz) + ", dtype " + dtype_name(spec_.dtype) + ")");
  } catch (const std::length_error& e) {
    ZEN_THROW(Result::SystemError, "rank " + std::to_string(comm_.rank()) + " sparse allreduce (" + name() +
                                       "): workspace allocation failed (N=" + std::to_string(spec_.dense_len) +
                                       ", nnz=" + std::to_string(in.nnz) + "): " + e.what());
  } catch (const Error& e) {
    // Input errors found inside a plan (an index checked while hashing or coalescing, when the
    // caller skipped validation) get the rank and the scheme, like validate()'s messages.
    const std::string m = e.what();
    if (e.code() != Result::InvalidArgument || m.find("rank ") != std::string::npos) throw;
    const std::string head = std::string("zen ") + result_name(e.code()) + ": ";
    const std::string rest = m.rfind(head, 0) == 0 ? m.substr(head.size()) : m;
    throw Error(e.code(), head + "rank " + std::to_string(comm_.rank()) + " sparse allreduce (" + name() + "): " + rest);
  }
}

// Any error of this rank during a call (bad input, allocation, a worker's exception, a communicator
// error) poisons the communicator: every peer is told at once (an abort message that all their wait
// loops watch) and fails with RemoteError naming this rank instead of waiting out its timeout, and
// no rank can mix this call's data with a later one's (the communicator refuses further use on every
// rank; the caller builds a new one). A RemoteError is itself the echo of a peer's failure.
template <typename F>
void SparseAllreduce::poisoning(F&& body) {
  try {
    body();
  } catch (const Error& e) {
    if (e.code() != Result::RemoteError) comm_.abort(e.what());
    throw;
  } catch (const std::exception& e) {
    comm_.abort(e.what());
    throw;
  }
}

void SparseAllreduce::run_now(const SparseView& in, SparseTensor& out) {
  poisoning([&] {
    reset_report();
    const double t0 = detail::seconds_now();
    if (output_.accumulate)
      ZEN_THROW(Result::InvalidUsage, "rank " + std::to_string(comm_.rank()) + " sparse allreduce (" + name() +
                                          "): OutputOptions::accumulate needs a dense output (run_dense / start_dense)");
    prepare(in);
    // The caller's tensor keeps its storage (capacity) across calls.
    out.dense_len = spec_.dense_len;
    out.row_width = spec_.row_width;
    out.dtype = spec_.dtype;
    try {
      execute_checked(in, &out, nullptr);
    } catch (...) {
      // A failed call leaves no rows behind (a scheme that writes its result piece by piece, like
      // dense_native, may have written some); the storage stays the caller's.
      out.indices.clear();
      out.values.clear();
      throw;
    }
    finish_output(&out, nullptr);
    report_.seconds = detail::seconds_now() - t0;
    report_.result_nnz = out.nnz();
    if (report_.scheme.empty()) report_.scheme = name();
  });
}

void SparseAllreduce::run_dense_now(const SparseView& in, void* dense_out) {
  poisoning([&] {
    reset_report();
    const double t0 = detail::seconds_now();
    prepare(in);
    if (output_.accumulate) {
      // The sum lands in a sparse workspace first (it keeps its capacity) and is then added into
      // the caller's buffer on its support only.
      acc_.dense_len = spec_.dense_len;
      acc_.row_width = spec_.row_width;
      acc_.dtype = spec_.dtype;
      execute_checked(in, &acc_, nullptr);
      report_.result_nnz = acc_.nnz();
    } else {
      execute_checked(in, nullptr, dense_out);
    }
    finish_output(nullptr, dense_out);
    report_.seconds = detail::seconds_now() - t0;
    if (report_.scheme.empty()) report_.scheme = name();
  });
}

namespace {
template <typename T>
void scale_values(T* v, size_t count, int n) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, std::conditional_t<std::is_same_v<T, float>, double, float>>;
  const A d = static_cast<A>(n);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<T>(static_cast<A>(v[i]) / d);
}
}  // namespace

void SparseAllreduce::finish_output(SparseTensor* sparse_out, void* dense_out) {
  const int n = comm_.size();
  const bool avg = output_.average && n > 1;
  if (sparse_out) {
    if (avg)
      dispatch_dtype(spec_.dtype, [&](auto tag) {
        using T = decltype(tag);
        scale_values(reinterpret_cast<T*>(sparse_out->values.data()), sparse_out->nnz() * spec_.row_width, n);
      });
    return;
  }
  if (!output_.accumulate) {
    if (avg && spec_.dense_len)
      dispatch_dtype(spec_.dtype, [&](auto tag) {
        using T = decltype(tag);
        scale_values(static_cast<T*>(dense_out), spec_.dense_len, n);
      });
    return;
  }
  if (avg)
    dispatch_dtype(spec_.dtype, [&](auto tag) {
      using T = decltype(tag);
      scale_values(reinterpret_cast<T*>(acc_.values.data()), acc_.nnz() * spec_.row_width, n);
    });
  dispatch_dtype(spec_.dtype, [&](auto tag) {
    using T = decltype(tag);
    using A = typename accum_of<T>::type;
    const size_t D = spec_.row_width;
    T* out = static_cast<T*>(dense_out);
    const T* src = reinterpret_cast<const T*>(acc_.values.data());
    for (size_t k = 0; k < acc_.nnz(); ++k) {
      T* row = out + static_cast<size_t>(acc_.indices[k]) * D;
      const T* add = src + k * D;
      for (size_t j = 0; j < D; ++j) row[j] = static_cast<T>(static_cast<A>(row[j]) + static_cast<A>(add[j]));
    }
  });
}

namespace {
// A blocking call goes through the call queue when non-blocking calls are pending on the
// communicator (it queues behind them) or, in agreed order, always (its place in the order is
// agreed like any call's); on the call-queue thread itself (a plan inside another plan's call) it runs.
bool through_queue(Communicator& c) {
  if (c.call_order() == CallOrder::Agreed) return !c.call_queue().on_call_thread();
  return c.queue_busy();
}
}  // namespace

void SparseAllreduce::run(const SparseView& in, SparseTensor& out) {
  if (through_queue(comm_)) return start(in, out).wait();
  run_now(in, out);
}

void SparseAllreduce::run_dense(const SparseView& in, void* dense_out) {
  if (through_queue(comm_)) return start_dense(in, dense_out).wait();
  run_dense_now(in, dense_out);
}

void SparseAllreduce::wait_pending() noexcept {
  if (comm_.on_call_thread()) return;  // a plan inside another plan's call has no queued calls
  std::vector<std::shared_ptr<detail::AsyncState>> calls;
  {
    std::lock_guard<std::mutex> lk(inflight_m_);
    calls.swap(inflight_);
  }
  for (auto& st : calls) detail::wait_state(*st);  // complete: the requests test true from here on
}

// Queue one call of this plan (key: this plan's id and call number, the same on every rank); the
// plan remembers it until it has completed (wait_pending waits for it).
template <typename F>
Request SparseAllreduce::submit(F&& call) {
  poisoning([&] { comm_.check_async_support(); });
  const detail::CallKey key{plan_id_, calls_.fetch_add(1, std::memory_order_relaxed) + 1};
  auto st = comm_.call_queue().submit(std::forward<F>(call), key);
  {
    std::lock_guard<std::mutex> lk(inflight_m_);
    inflight_.erase(std::remove_if(inflight_.begin(), inflight_.end(),
                                   [](const auto& x) { return x->done.load(std::memory_order_acquire); }),
                    inflight_.end());
    inflight_.push_back(st);
  }
  return Request(std::move(st));
}

Request SparseAllreduce::start(const SparseView& in, SparseTensor& out) {
  SparseTensor* o = &out;
  return submit([this, in, o] { run_now(in, *o); });
}

Request SparseAllreduce::start_dense(const SparseView& in, void* dense_out) {
  return submit([this, in, dense_out] { run_dense_now(in, dense_out); });
}

namespace detail {
std::unique_ptr<SparseAllreduce> setup_in_order(Communicator& comm,
                                                const std::function<std::unique_ptr<SparseAllreduce>()>& make) {
  if (comm.call_order() != CallOrder::Agreed || comm.call_queue().on_call_thread()) return make();
  std::unique_ptr<SparseAllreduce> plan;
  auto st = comm.call_queue().submit([&] { plan = make(); }, CallKey{0, comm.next_setup_index()});
  wait_state(*st);
  if (st->error) std::rethrow_exception(st->error);
  return plan;
}
}  // namespace detail

Request& Request::operator=(Request&& o) noexcept {
  if (this != &o) {
    if (s_) detail::wait_state(*s_);
    s_ = std::move(o.s_);
  }
  return *this;
}

Request::~Request() {
  if (s_) detail::wait_state(*s_);
}

void Request::finish() {
  auto s = std::move(s_);
  if (s->error) std::rethrow_exception(s->error);
}

bool Request::test() {
  if (!s_) return true;
  if (!s_->done.load(std::memory_order_acquire)) return false;
  finish();
  return true;
}

void Request::wait() {
  if (!s_) return;
  detail::wait_state(*s_);
  finish();
}

namespace {
// CPU seconds of the calling thread and of the pool's workers (the pool runs a phase's tasks on both).
double phase_cpu_now(const detail::ThreadPool* pool) {
  return detail::clock_seconds(CLOCK_THREAD_CPUTIME_ID) + (pool ? pool->workers_cpu_seconds() : 0.0);
}
}  // namespace

SparseAllreduce::Phase::Phase(SparseAllreduce& s, const char* name) : s_(s), before_(s.comm_.stats()), t0_(detail::seconds_now()) {
  r_.name = name;
  if (s_.opt_.phase_cpu_time) cpu0_ = phase_cpu_now(s_.pool_.get());
}

SparseAllreduce::Phase::~Phase() {
  TrafficStats d = s_.comm_.stats() - before_;
  r_.sent = d.total_sent();
  r_.recv = d.total_recv();
  r_.seconds = detail::seconds_now() - t0_;
  // A pool made during the phase started its workers' clocks at 0 (cpu0_ did not count them).
  r_.cpu_seconds = s_.opt_.phase_cpu_time ? std::max(0.0, phase_cpu_now(s_.pool_.get()) - cpu0_) : 0.0;
  s_.report_.sent += r_.sent;
  s_.report_.recv += r_.recv;
  s_.report_.phases.push_back(r_);
}

namespace detail {
// The library's schemes, one row each, defined in the scheme's own file (constants, so no order of
// initialization matters). The list below gives the registry's order (scheme_names()); auto's order
// is each row's auto_position.
extern const SchemeRow balanced_row;
extern const SchemeRow dense_ring_row;
extern const SchemeRow dense_native_row;
extern const SchemeRow allgather_row;
extern const SchemeRow sparcml_row;
extern const SchemeRow omnireduce_row;
extern const SchemeRow sparse_ps_row;
extern const SchemeRow hierarchical_sparse_row;

namespace {
void check_row(const std::vector<SchemeRow>& table, const SchemeRow& row) {
  const std::string name = row.name ? row.name : "";
  ZEN_ENFORCE(!name.empty() && name != "auto", "scheme registry: a scheme needs a name other than 'auto', got '" + name + "'");
  ZEN_ENFORCE(row.auto_position >= 0, "scheme registry: scheme '" + name + "' has a negative auto position");
  for (const auto& r : table) {
    ZEN_ENFORCE(name != r.name, "scheme registry: scheme '" + name + "' is registered twice");
    ZEN_ENFORCE(row.auto_position == kNotAuto || row.auto_position != r.auto_position,
                "scheme registry: schemes '" + std::string(r.name) + "' and '" + name + "' both take auto position " +
                    std::to_string(row.auto_position));
  }
}

std::vector<SchemeRow>& table() {
  static std::vector<SchemeRow> t = [] {
    std::vector<SchemeRow> v;
    for (const SchemeRow* r : {&balanced_row, &dense_ring_row, &dense_native_row, &allgather_row, &sparcml_row,
                               &omnireduce_row, &sparse_ps_row, &hierarchical_sparse_row}) {
      check_row(v, *r);
      v.push_back(*r);
    }
    return v;
  }();
  return t;
}

std::vector<std::string>& names() {
  static std::vector<std::string> v = [] {
    std::vector<std::string> out;
    for (const auto& r : table()) out.emplace_back(r.name);
    return out;
  }();
  return v;
}
}  // namespace

const std::vector<SchemeRow>& scheme_table() { return table(); }

const SchemeRow* find_scheme(const std::string& name) {
  for (const auto& r : table())
    if (name == r.name) return &r;
  return nullptr;
}

void register_scheme(const SchemeRow& row) {
  check_row(table(), row);
  names();  // built from the table before the row joins both
  table().push_back(row);
  names().emplace_back(row.name);
}

std::vector<std::string> auto_candidates() {
  std::vector<const SchemeRow*> rows;
  for (const auto& r : table())
    if (r.auto_position != kNotAuto) rows.push_back(&r);
  std::stable_sort(rows.begin(), rows.end(), [](const SchemeRow* a, const SchemeRow* b) { return a->auto_position < b->auto_position; });
  std::vector<std::string> out;
  for (const SchemeRow* r : rows) out.emplace_back(r->name);
  return out;
}
}  // namespace detail

std::unique_ptr<SparseAllreduce> make_auto(Communicator&, const TensorSpec&, const SchemeOptions&);

IndexEncoding parse_index_encoding(const std::string& name) {
  if (name == "auto") return IndexEncoding::Auto;
  if (name == "coo") return IndexEncoding::Coo;
  if (name == "bitmap") return IndexEncoding::Bitmap;
  if (name == "ef") return IndexEncoding::EliasFano;
  ZEN_THROW(Result::InvalidArgument, "index encoding must be auto, coo, bitmap or ef, got '" + name + "'");
}

const std::vector<std::string>& scheme_names() { return detail::names(); }

std::unique_ptr<SparseAllreduce> make_scheme(const std::string& name, Communicator& comm, const TensorSpec& spec,
                                             const SchemeOptions& opt) {
  detail::require_host_memory(comm, "make_scheme", name);
  if (const detail::SchemeRow* row = detail::find_scheme(name))
    return detail::setup_in_order(comm, [&] { return row->make(comm, spec, opt); });
  if (name == "auto") return detail::setup_in_order(comm, [&] { return make_auto(comm, spec, opt); });
  std::string all;
  for (const auto& n : scheme_names()) all += (all.empty() ? "" : ", ") + n;
  all += ", auto";
  ZEN_THROW(Result::InvalidArgument, "unknown scheme '" + name + "' (known: " + all + ")");
}

}  // namespace zen
