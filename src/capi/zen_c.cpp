// C API over the C++ implementation: exceptions become result codes plus a thread-local message.
#include "zen/zen.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <sstream>
#include <tuple>
#include <string>
#include <utility>

#include "zen/comm/loopback.hpp"
#include "zen/cuda/comm.hpp"
#include "zen/cuda/plan.hpp"
#include "zen/detail/call_queue.hpp"
#include "zen/schemes/hierarchical.hpp"
#include "zen/schemes/scheme.hpp"
#ifdef ZEN_HAVE_MPI
#include "zen/comm/mpi.hpp"
#endif

struct zenComm {
  std::unique_ptr<zen::Communicator> comm;
};
// One plan interface for host and device plans: every call dispatches through zen::Plan (device
// plans refuse sparse output and non-blocking calls with Unsupported, naming the rank).
struct zenSparseAllreduce {
  zen::Communicator* comm = nullptr;  // the plan's (world) communicator
  zen::TensorSpec spec;
  std::unique_ptr<zen::Plan> plan;
  zen::SparseTensor result;
};
struct zenRequest {
  zen::Request req;
};

namespace {
thread_local std::string g_last_error;

template <typename F>
zenResult_t guard(F&& f) {
  try {
    f();
    return zenSuccess;
  } catch (const zen::Error& e) {
    g_last_error = e.what();
    return static_cast<zenResult_t>(e.code());
  } catch (const std::bad_alloc& e) {
    g_last_error = std::string("allocation failed: ") + e.what();
    return zenSystemError;
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return zenInternalError;
  }
}

// A collective call's guard: an error of this rank, even one found before the collective starts (a
// bad argument), poisons the communicator so that every peer fails at once instead of waiting (and
// no later call can mix steps); see SparseAllreduce's "errors poison the communicator".
template <typename F>
zenResult_t guard_collective(zen::Communicator* comm, F&& f) {
  const zenResult_t r = guard(std::forward<F>(f));
  if (r != zenSuccess && r != zenRemoteError && comm) comm->abort(g_last_error);
  return r;
}

#define ZEN_C_NOT_NULL(p) \
  if (!(p)) ZEN_THROW(zen::Result::InvalidArgument, std::string(__func__) + ": argument '" #p "' is NULL")

zen::SparseView make_view(const zenSparseAllreduce& op, size_t nnz, const void* indices, zenIndexType_t itype,
                          const void* values) {
  zen::SparseView v;
  v.dense_len = op.spec.dense_len;
  v.row_width = op.spec.row_width;
  v.dtype = op.spec.dtype;
  v.space = op.comm->memory_space();
  v.nnz = nnz;
  v.indices = indices;
  v.values = values;
  if (itype != zenInt32 && itype != zenInt64)
    ZEN_THROW(zen::Result::InvalidArgument, "index type " + std::to_string(static_cast<int>(itype)) + " is not zenInt32 or zenInt64");
  v.index_type = itype == zenInt32 ? zen::IndexType::I32 : zen::IndexType::I64;
  return v;
}
zenOptions_t default_options() {
  const zen::SchemeOptions d;
  zenOptions_t o;
  std::memset(&o, 0, sizeof o);
  o.size = sizeof(zenOptions_t);
  o.pull = static_cast<zenPullEncoding_t>(d.pull);
  o.push = static_cast<zenPullEncoding_t>(d.push);
  o.reject_duplicates = d.duplicates == zen::DuplicatePolicy::Reject;
  o.seed = d.seed;
  o.threads = d.threads;
  o.hash_functions = d.hash_functions;
  o.parallel_factor = d.parallel_factor;
  o.serial_fraction = d.serial_fraction;
  o.validate = d.validate ? 1 : 0;
  o.sparcml_dense_switch = d.sparcml_dense_switch;
  o.block_size = d.block_size;
  o.average = d.output.average;
  o.accumulate = d.output.accumulate;
  o.node_size = 0;
  o.inter_scheme = nullptr;
  o.intra = o.inter = nullptr;
  o.auto_candidates = nullptr;
  o.auto_reevaluate_every = d.autotune.reevaluate_every;
  o.auto_drift = d.autotune.drift;
  o.auto_explore_within = d.autotune.explore_within;
  o.auto_max_explore = d.autotune.max_explore;
  o.auto_trials = d.autotune.trials;
  o.auto_sample_rows = d.autotune.sample_rows;
  o.auto_alpha_s = d.autotune.alpha_s;
  o.auto_message_s = d.autotune.message_s;
  o.auto_bytes_per_s = d.autotune.bytes_per_s;
  o.auto_entry_s = d.autotune.entry_s;
  return o;
}

// The caller's struct as this library reads it: its first opts->size bytes over the defaults.
zenOptions_t read_options(const zenOptions_t* opts) {
  zenOptions_t o = default_options();
  if (!opts) return o;
  const size_t need = offsetof(zenOptions_t, pull) + sizeof(zenPullEncoding_t);
  if (opts->size < need)
    ZEN_THROW(zen::Result::InvalidArgument,
              "zenSparseAllreduceCreate: opts->size is " + std::to_string(opts->size) +
                  "; set it to sizeof(zenOptions_t) (zenOptionsInit does, with every default)");
  if (opts->size > sizeof(zenOptions_t))
    ZEN_THROW(zen::Result::Unsupported, "zenSparseAllreduceCreate: opts->size " + std::to_string(opts->size) +
                                            " is larger than this library's zenOptions_t (" +
                                            std::to_string(sizeof(zenOptions_t)) +
                                            " bytes): the caller was built against a newer zen.h");
  std::memcpy(&o, opts, opts->size);
  o.size = sizeof(zenOptions_t);
  return o;
}

zen::SchemeOptions to_scheme_options(const zenOptions_t& c) {
  zen::SchemeOptions o;
  ZEN_ENFORCE(c.pull >= zenPullAuto && c.pull <= zenPullEliasFano,
              "zenSparseAllreduceCreate: unknown pull encoding " + std::to_string(static_cast<int>(c.pull)));
  ZEN_ENFORCE(c.push >= zenPullAuto && c.push <= zenPullEliasFano,
              "zenSparseAllreduceCreate: unknown push encoding " + std::to_string(static_cast<int>(c.push)));
  ZEN_ENFORCE(c.hash_functions >= 1, "zenSparseAllreduceCreate: hash_functions " + std::to_string(c.hash_functions) + " must be >= 1");
  ZEN_ENFORCE(c.parallel_factor > 0 && c.serial_fraction >= 0,
              "zenSparseAllreduceCreate: parallel_factor must be > 0 and serial_fraction >= 0");
  ZEN_ENFORCE(c.block_size >= 1, "zenSparseAllreduceCreate: block_size must be >= 1");
  ZEN_ENFORCE(c.threads >= 0, "zenSparseAllreduceCreate: threads " + std::to_string(c.threads) + " must be >= 0");
  ZEN_ENFORCE(c.node_size >= 0, "zenSparseAllreduceCreate: node_size " + std::to_string(c.node_size) + " must be >= 0");
  o.pull = static_cast<zen::PullEncoding>(c.pull);
  o.push = static_cast<zen::IndexEncoding>(c.push);
  o.duplicates = c.reject_duplicates ? zen::DuplicatePolicy::Reject : zen::DuplicatePolicy::Sum;
  o.seed = c.seed;
  o.threads = c.threads;
  o.hash_functions = c.hash_functions;
  o.parallel_factor = c.parallel_factor;
  o.serial_fraction = c.serial_fraction;
  o.validate = c.validate != 0;
  o.sparcml_dense_switch = c.sparcml_dense_switch;
  o.block_size = c.block_size;
  o.output.average = c.average != 0;
  o.output.accumulate = c.accumulate != 0;
  if (c.auto_candidates) {
    std::stringstream ss(c.auto_candidates);
    std::string item;
    while (std::getline(ss, item, ','))
      if (!item.empty()) o.autotune.candidates.push_back(item);
  }
  o.autotune.reevaluate_every = c.auto_reevaluate_every;
  o.autotune.drift = c.auto_drift;
  o.autotune.explore_within = c.auto_explore_within;
  o.autotune.max_explore = c.auto_max_explore;
  o.autotune.trials = c.auto_trials;
  o.autotune.sample_rows = c.auto_sample_rows;
  o.autotune.alpha_s = c.auto_alpha_s;
  o.autotune.message_s = c.auto_message_s;
  o.autotune.bytes_per_s = c.auto_bytes_per_s;
  o.autotune.entry_s = c.auto_entry_s;
  return o;
}
zen::Plan& plan_of(zenSparseAllreduce& op) { return *op.plan; }

// Device plans (the communicator's memory space is Device): DeviceBalanced ("balanced") or
// DeviceHierarchical ("hierarchical", over opts->intra / opts->inter device communicators).
std::unique_ptr<zen::Plan> create_device_plan(zen::Communicator& world, const std::string& name, const zenOptions_t& c,
                                              const zen::TensorSpec& spec, const zen::SchemeOptions& o) {
  zen::cuda::DevicePlanOptions d;
  d.limits.max_nnz = static_cast<size_t>(c.device_max_nnz);
  d.limits.recv_capacity = static_cast<size_t>(c.device_recv_capacity);
  d.limits.pull_rows = static_cast<size_t>(c.device_pull_rows);
  d.intra = c.intra ? c.intra->comm.get() : nullptr;
  d.inter = c.inter ? c.inter->comm.get() : nullptr;
  return zen::cuda::make_device_plan(name, world, spec, o, d);
}
}  // namespace

extern "C" {

const char* zenGetErrorString(zenResult_t r) { return zen::result_name(static_cast<zen::Result>(r)); }
const char* zenGetLastError(void) { return g_last_error.c_str(); }
void zenGetVersion(int* major, int* minor) {
  if (major) *major = ZEN_VERSION_MAJOR;
  if (minor) *minor = ZEN_VERSION_MINOR;
}
const char* zenGetVersionString(void) { return ZEN_VERSION_STRING; }

zenResult_t zenCommInitLoopback(zenComm_t* comms, int n) {
  return guard([&] {
    ZEN_C_NOT_NULL(comms);
    auto v = zen::loopback::create(n);
    for (int i = 0; i < n; ++i) comms[i] = new zenComm{std::move(v[static_cast<size_t>(i)])};
  });
}

zenResult_t zenCommInitMpi(zenComm_t* comm, const void* mpi_comm) {
  return guard([&] {
    ZEN_C_NOT_NULL(comm);
    ZEN_C_NOT_NULL(mpi_comm);
#ifdef ZEN_HAVE_MPI
    *comm = new zenComm{zen::mpi::create(*static_cast<const MPI_Comm*>(mpi_comm))};
#else
    ZEN_THROW(zen::Result::Unsupported, "zen was built without MPI (ZEN_WITH_MPI=OFF)");
#endif
  });
}

zenResult_t zenCommDestroy(zenComm_t comm) {
  return guard([&] { delete comm; });
}
zenResult_t zenCommRank(zenComm_t comm, int* rank) {
  return guard([&] {
    ZEN_C_NOT_NULL(comm);
    ZEN_C_NOT_NULL(rank);
    *rank = comm->comm->rank();
  });
}
zenResult_t zenCommSize(zenComm_t comm, int* size) {
  return guard([&] {
    ZEN_C_NOT_NULL(comm);
    ZEN_C_NOT_NULL(size);
    *size = comm->comm->size();
  });
}
zenResult_t zenCommSetTimeout(zenComm_t comm, int ms) {
  return guard([&] {
    ZEN_C_NOT_NULL(comm);
    ZEN_ENFORCE(ms > 0, "zenCommSetTimeout: timeout " + std::to_string(ms) + " ms must be positive");
    comm->comm->set_timeout(std::chrono::milliseconds(ms));
  });
}
zenResult_t zenCommSetCallOrder(zenComm_t comm, zenCallOrder_t order) {
  return guard([&] {
    ZEN_C_NOT_NULL(comm);
    ZEN_ENFORCE(order == zenCallOrderSubmitted || order == zenCallOrderAgreed,
                "zenCommSetCallOrder: unknown order " + std::to_string(static_cast<int>(order)));
    comm->comm->set_call_order(order == zenCallOrderAgreed ? zen::CallOrder::Agreed : zen::CallOrder::Submitted);
  });
}
zenResult_t zenCommTraffic(zenComm_t comm, uint64_t* sent, uint64_t* recv) {
  return guard([&] {
    ZEN_C_NOT_NULL(comm);
    if (sent) *sent = comm->comm->stats().total_sent();
    if (recv) *recv = comm->comm->stats().total_recv();
  });
}

zenResult_t zenOptionsInit(zenOptions_t* opts) {
  return guard([&] {
    ZEN_C_NOT_NULL(opts);
    *opts = default_options();
  });
}

zenResult_t zenCommInitDeviceLoopback(zenComm_t* comms, int n, int device) {
  return guard([&] {
    ZEN_C_NOT_NULL(comms);
    auto v = zen::cuda::loopback::create(n, device);
    for (int i = 0; i < n; ++i) comms[i] = new zenComm{std::move(v[static_cast<size_t>(i)])};
  });
}

zenResult_t zenNcclGetUniqueId(zenNcclUniqueId* id) {
  return guard([&] {
    ZEN_C_NOT_NULL(id);
    const auto u = zen::cuda::nccl::unique_id();
    static_assert(sizeof(id->internal) == std::tuple_size<zen::cuda::nccl::UniqueId>::value, "NCCL id size");
    std::memcpy(id->internal, u.data(), u.size());
  });
}

zenResult_t zenCommInitNccl(zenComm_t* comm, const zenNcclUniqueId* id, int nranks, int rank) {
  return guard([&] {
    ZEN_C_NOT_NULL(comm);
    ZEN_C_NOT_NULL(id);
    zen::cuda::nccl::UniqueId u;
    std::memcpy(u.data(), id->internal, u.size());
    *comm = new zenComm{zen::cuda::nccl::create(u, nranks, rank)};
  });
}

zenResult_t zenCommInitNcclWrap(zenComm_t* comm, const void* nccl_comm) {
  return guard([&] {
    ZEN_C_NOT_NULL(comm);
    ZEN_C_NOT_NULL(nccl_comm);
    *comm = new zenComm{zen::cuda::nccl::wrap(*static_cast<void* const*>(nccl_comm))};
  });
}

zenResult_t zenCommSplitNccl(zenComm_t* out, zenComm_t comm, int color, int key) {
  return guard([&] {
    ZEN_C_NOT_NULL(out);
    ZEN_C_NOT_NULL(comm);
    *out = new zenComm{zen::cuda::nccl::split(*comm->comm, color, key)};
  });
}

zenResult_t zenCommSetStream(zenComm_t comm, void* stream) {
  return guard([&] {
    ZEN_C_NOT_NULL(comm);
    comm->comm->set_stream(stream);
  });
}

zenResult_t zenSparseAllreduceDenseFromDense(zenSparseAllreduce_t op, const void* grad, void* dense_out) {
  return guard_collective(op ? op->comm : nullptr, [&] {
    ZEN_C_NOT_NULL(op);
    if (op->spec.dense_len) {
      ZEN_C_NOT_NULL(grad);
      ZEN_C_NOT_NULL(dense_out);
    }
    plan_of(*op).run_dense_from_dense(grad, dense_out);
  });
}

zenResult_t zenSparseAllreduceSynchronize(zenSparseAllreduce_t op) {
  return guard_collective(op ? op->comm : nullptr, [&] {
    ZEN_C_NOT_NULL(op);
    plan_of(*op).synchronize();
  });
}

zenResult_t zenSparseAllreduceCreate(zenSparseAllreduce_t* op, zenComm_t comm, const char* scheme, uint64_t n_elems,
                                     uint32_t row_width, zenDataType_t dtype, const zenOptions_t* opts) {
  return guard_collective(comm ? comm->comm.get() : nullptr, [&] {
    ZEN_C_NOT_NULL(op);
    ZEN_C_NOT_NULL(comm);
    ZEN_C_NOT_NULL(scheme);
    ZEN_ENFORCE(dtype >= zenFloat32 && dtype <= zenBfloat16, "zenSparseAllreduceCreate: unknown dtype " + std::to_string(static_cast<int>(dtype)));
    const zenOptions_t c = read_options(opts);
    const zen::SchemeOptions o = to_scheme_options(c);
    const zen::TensorSpec spec{n_elems, row_width, static_cast<zen::DType>(dtype)};
    zen::Communicator& world = *comm->comm;
    std::string name = scheme;
    auto plan = std::make_unique<zenSparseAllreduce>();
    plan->comm = &world;
    plan->spec = spec;
    if (world.memory_space() == zen::MemSpace::Device) {
      plan->plan = create_device_plan(world, name, c, spec, o);
      *op = plan.release();
      return;
    }
    std::unique_ptr<zen::SparseAllreduce> s;
    if (name == "hierarchical" || name.rfind("hier_", 0) == 0) {
      std::string inter = name == "hierarchical" ? (c.inter_scheme ? c.inter_scheme : "balanced") : name.substr(5);
      ZEN_ENFORCE((c.intra == nullptr) == (c.inter == nullptr),
                  "zenSparseAllreduceCreate: rank " + std::to_string(world.rank()) +
                      ": give both opts->intra and opts->inter, or neither");
      if (c.intra) {
        s = zen::make_hierarchical(world, *c.intra->comm, *c.inter->comm, spec, o, inter);
      } else {
        zen::HierarchicalOptions h;
        h.node_size = c.node_size > 0 ? c.node_size : world.ranks_on_node();
        h.inter_scheme = inter;
        s = zen::make_hierarchical(world, spec, o, h);
      }
    } else {
      s = zen::make_scheme(name, world, spec, o);
    }
    plan->plan = std::move(s);
    *op = plan.release();
  });
}

zenResult_t zenSparseAllreduceDense(zenSparseAllreduce_t op, size_t nnz, const void* indices, zenIndexType_t itype,
                                    const void* values, void* dense_out) {
  return guard_collective(op ? op->comm : nullptr, [&] {
    ZEN_C_NOT_NULL(op);
    if (op->spec.dense_len) ZEN_C_NOT_NULL(dense_out);
    plan_of(*op).run_dense(make_view(*op, nnz, indices, itype, values), dense_out);
  });
}

zenResult_t zenSparseAllreduceSparse(zenSparseAllreduce_t op, size_t nnz, const void* indices, zenIndexType_t itype,
                                     const void* values, size_t* out_nnz) {
  return guard_collective(op ? op->comm : nullptr, [&] {
    ZEN_C_NOT_NULL(op);
    plan_of(*op).run(make_view(*op, nnz, indices, itype, values), op->result);
    if (out_nnz) *out_nnz = op->result.nnz();
  });
}

zenResult_t zenSparseAllreduceResult(zenSparseAllreduce_t op, int64_t* indices, void* values) {
  return guard([&] {
    ZEN_C_NOT_NULL(op);
    if (op->result.nnz()) {
      ZEN_C_NOT_NULL(indices);
      ZEN_C_NOT_NULL(values);
      std::memcpy(indices, op->result.indices.data(), op->result.nnz() * sizeof(int64_t));
      std::memcpy(values, op->result.values.data(), op->result.values.size());
    }
  });
}

zenResult_t zenSparseAllreduceResultSize(zenSparseAllreduce_t op, size_t* out_nnz) {
  return guard([&] {
    ZEN_C_NOT_NULL(op);
    ZEN_C_NOT_NULL(out_nnz);
    *out_nnz = op->result.nnz();
  });
}

zenResult_t zenSparseAllreduceSparseBound(zenSparseAllreduce_t op, size_t max_nnz, size_t* max_out_nnz) {
  return guard([&] {
    ZEN_C_NOT_NULL(op);
    ZEN_C_NOT_NULL(max_out_nnz);
    const uint64_t rows = op->spec.dense_len / op->spec.row_width;
    const uint64_t n = static_cast<uint64_t>((*op->comm).size());
    const uint64_t m = static_cast<uint64_t>(max_nnz);
    *max_out_nnz = static_cast<size_t>(m != 0 && n > rows / m ? rows : std::min<uint64_t>(rows, n * m));
  });
}

zenResult_t zenSparseAllreduceSparseInto(zenSparseAllreduce_t op, size_t nnz, const void* indices,
                                         zenIndexType_t itype, const void* values, int64_t* out_indices,
                                         void* out_values, size_t capacity, size_t* out_nnz) {
  const zenResult_t r = guard_collective(op ? op->comm : nullptr, [&] {
    ZEN_C_NOT_NULL(op);
    if (capacity) {
      ZEN_C_NOT_NULL(out_indices);
      ZEN_C_NOT_NULL(out_values);
    }
    plan_of(*op).run(make_view(*op, nnz, indices, itype, values), op->result);
  });
  if (r != zenSuccess) return r;
  // The result is identical on every rank, so is this check: no rank needs to be told.
  return guard([&] {
    const size_t got = op->result.nnz();
    if (out_nnz) *out_nnz = got;
    if (got > capacity)
      ZEN_THROW(zen::Result::InvalidArgument,
                "zenSparseAllreduceSparseInto: rank " + std::to_string((*op->comm).rank()) + ": the result has " +
                    std::to_string(got) + " rows but the buffers hold " + std::to_string(capacity) +
                    " (size them with zenSparseAllreduceSparseBound; the result is kept, zenSparseAllreduceResult copies it)");
    if (got) {
      std::memcpy(out_indices, op->result.indices.data(), got * sizeof(int64_t));
      std::memcpy(out_values, op->result.values.data(), op->result.values.size());
    }
  });
}

zenResult_t zenSparseAllreduceDenseStart(zenSparseAllreduce_t op, size_t nnz, const void* indices, zenIndexType_t itype,
                                         const void* values, void* dense_out, zenRequest_t* req) {
  return guard_collective(op ? op->comm : nullptr, [&] {
    ZEN_C_NOT_NULL(op);
    ZEN_C_NOT_NULL(req);
    if (op->spec.dense_len) ZEN_C_NOT_NULL(dense_out);
    auto q = plan_of(*op).start_dense(make_view(*op, nnz, indices, itype, values), dense_out);
    *req = new zenRequest{std::move(q)};
  });
}

zenResult_t zenSparseAllreduceSparseStart(zenSparseAllreduce_t op, size_t nnz, const void* indices, zenIndexType_t itype,
                                          const void* values, zenRequest_t* req) {
  return guard_collective(op ? op->comm : nullptr, [&] {
    ZEN_C_NOT_NULL(op);
    ZEN_C_NOT_NULL(req);
    auto q = plan_of(*op).start(make_view(*op, nnz, indices, itype, values), op->result);
    *req = new zenRequest{std::move(q)};
  });
}

zenResult_t zenRequestWait(zenRequest_t* req) {
  if (!req || !*req) return zenSuccess;
  std::unique_ptr<zenRequest> q(*req);
  *req = nullptr;
  // The call's error already poisoned the communicator where it happened; only report it here.
  return guard([&] { q->req.wait(); });
}

zenResult_t zenRequestTest(zenRequest_t* req, int* done) {
  if (!done) {
    g_last_error = "zenRequestTest: argument 'done' is NULL";
    return zenInvalidArgument;
  }
  if (!req || !*req) {
    *done = 1;
    return zenSuccess;
  }
  bool finished = false;
  const zenResult_t r = guard([&] { finished = (*req)->req.test(); });
  *done = finished || r != zenSuccess;
  if (*done) {
    delete *req;
    *req = nullptr;
  }
  return r;
}

zenResult_t zenSparseAllreduceLastStats(zenSparseAllreduce_t op, uint64_t* sent, uint64_t* recv, double* seconds) {
  return guard([&] {
    ZEN_C_NOT_NULL(op);
    const auto& r = plan_of(*op).report();
    if (sent) *sent = r.sent;
    if (recv) *recv = r.recv;
    if (seconds) *seconds = r.seconds;
  });
}

zenResult_t zenSparseAllreduceLastScheme(zenSparseAllreduce_t op, const char** scheme, const char** decision) {
  return guard([&] {
    ZEN_C_NOT_NULL(op);
    const auto& r = plan_of(*op).report();
    if (scheme) *scheme = r.scheme.c_str();
    if (decision) *decision = r.decision.c_str();
  });
}

zenResult_t zenSparseAllreduceDestroy(zenSparseAllreduce_t op) {
  return guard([&] {
    if (!op) return;
    // This plan's pending non-blocking calls finish first (they write op->result); other plans'
    // calls may be pending from other threads (agreed order) and are not waited for.
    if (auto* s = dynamic_cast<zen::SparseAllreduce*>(op->plan.get())) s->wait_pending();
    plan_of(*op).synchronize();
    delete op;
  });
}

}  // extern "C"

// ---- Reports and communicator collectives (zen.h: added after 0.1.0) ----
namespace {

// A communicator operation in call order: behind the non-blocking calls pending on `c` (on its
// call-queue thread), or at once when none is pending. In agreed order (zenCommSetCallOrder) a
// collective is always an agreed call on the call-queue thread, keyed like a plan setup (plan 0, the
// communicator's setup count): another thread's plan calls may be queued or running there, in a
// different order on each rank, and the collective must take the same place among them on every
// rank. Point-to-point calls and abort involve no agreement (not every rank takes part).
template <typename F>
void in_order(zen::Communicator& c, F&& f, bool collective = false) {
  const bool agreed = collective && c.call_order() == zen::CallOrder::Agreed && !c.on_call_thread();
  if (!agreed && !c.queue_busy()) {
    f();
    return;
  }
  const zen::detail::CallKey key = agreed ? zen::detail::CallKey{0, c.next_setup_index()} : zen::detail::CallKey{};
  auto st = c.call_queue().submit([&f] { f(); }, key);
  zen::detail::wait_state(*st);
  if (st->error) std::rethrow_exception(st->error);
}

zen::Communicator* comm_of(zenComm_t c) { return c ? c->comm.get() : nullptr; }

void check_sizes(const zenComm_t c, const char* fn, size_t bytes, const void* p, const char* what) {
  if (bytes && !p)
    ZEN_THROW(zen::Result::InvalidArgument, std::string(fn) + ": rank " + std::to_string(c->comm->rank()) + ": " +
                                                what + " is NULL but " + std::to_string(bytes) + " bytes were given");
}

}  // namespace

extern "C" {

zenResult_t zenSparseAllreduceLastReport(zenSparseAllreduce_t op, zenReport_t* report) {
  return guard([&] {
    ZEN_C_NOT_NULL(op);
    ZEN_C_NOT_NULL(report);
    const size_t need = offsetof(zenReport_t, sent) + sizeof(uint64_t);
    if (report->size < need)
      ZEN_THROW(zen::Result::InvalidArgument, "zenSparseAllreduceLastReport: report->size is " +
                                                  std::to_string(report->size) + "; set it to sizeof(zenReport_t)");
    const auto& r = plan_of(*op).report();
    zenReport_t full;
    std::memset(&full, 0, sizeof full);
    full.size = sizeof(zenReport_t);
    full.sent = r.sent;
    full.recv = r.recv;
    full.seconds = r.seconds;
    full.push_imbalance = r.push_imbalance;
    full.pull_imbalance = r.pull_imbalance;
    full.result_nnz = r.result_nnz;
    full.bound_bytes = r.bound_bytes;
    full.serial_overflows = r.serial_overflows;
    full.global_rows = r.global_rows;
    full.phases = static_cast<int>(r.phases.size());
    full.scheme = r.scheme.c_str();
    full.decision = r.decision.c_str();
    full.encoding = r.encoding.c_str();
    full.push_encoding = r.push_encoding.c_str();
    // A caller built against an older zen.h gets the fields it knows; its `size` stays its own.
    const size_t keep = report->size;
    std::memcpy(report, &full, std::min(keep, sizeof full));
    report->size = keep;
  });
}

zenResult_t zenSparseAllreduceLastPhase(zenSparseAllreduce_t op, int phase, const char** name, uint64_t* sent,
                                        uint64_t* recv, double* seconds) {
  return guard([&] {
    ZEN_C_NOT_NULL(op);
    const auto& r = plan_of(*op).report();
    if (phase < 0 || static_cast<size_t>(phase) >= r.phases.size())
      ZEN_THROW(zen::Result::InvalidArgument, "zenSparseAllreduceLastPhase: phase " + std::to_string(phase) +
                                                  " is outside [0, " + std::to_string(r.phases.size()) + ")");
    const auto& p = r.phases[static_cast<size_t>(phase)];
    if (name) *name = p.name.c_str();
    if (sent) *sent = p.sent;
    if (recv) *recv = p.recv;
    if (seconds) *seconds = p.seconds;
  });
}

zenResult_t zenCommAllreduce(zenComm_t comm, void* buf, size_t count, zenDataType_t dtype, zenReduceOp_t op) {
  return guard_collective(comm_of(comm), [&] {
    ZEN_C_NOT_NULL(comm);
    ZEN_ENFORCE(dtype >= zenFloat32 && dtype <= zenBfloat16,
                "zenCommAllreduce: rank " + std::to_string(comm->comm->rank()) + ": unknown dtype " +
                    std::to_string(static_cast<int>(dtype)));
    ZEN_ENFORCE(op >= zenSum && op <= zenMin, "zenCommAllreduce: rank " + std::to_string(comm->comm->rank()) +
                                                  ": unknown reduce op " + std::to_string(static_cast<int>(op)));
    check_sizes(comm, "zenCommAllreduce", count, buf, "buf");
    zen::Communicator& c = *comm->comm;
    in_order(c, [&] { c.allreduce(buf, count, static_cast<zen::DType>(dtype), static_cast<zen::ReduceOp>(op)); }, true);
  });
}

zenResult_t zenCommBroadcast(zenComm_t comm, void* buf, size_t bytes, int root) {
  return guard_collective(comm_of(comm), [&] {
    ZEN_C_NOT_NULL(comm);
    check_sizes(comm, "zenCommBroadcast", bytes, buf, "buf");
    zen::Communicator& c = *comm->comm;
    in_order(c, [&] { c.broadcast(buf, bytes, root); }, true);
  });
}

zenResult_t zenCommAllgather(zenComm_t comm, const void* sendbuf, size_t bytes, void* recvbuf) {
  return guard_collective(comm_of(comm), [&] {
    ZEN_C_NOT_NULL(comm);
    check_sizes(comm, "zenCommAllgather", bytes, sendbuf, "sendbuf");
    check_sizes(comm, "zenCommAllgather", bytes, recvbuf, "recvbuf");
    zen::Communicator& c = *comm->comm;
    in_order(c, [&] { c.allgather(sendbuf, bytes, recvbuf); }, true);
  });
}

zenResult_t zenCommAlltoallv(zenComm_t comm, const void* sendbuf, const size_t* send_bytes, const size_t* send_displs,
                             void* recvbuf, const size_t* recv_bytes, const size_t* recv_displs) {
  return guard_collective(comm_of(comm), [&] {
    ZEN_C_NOT_NULL(comm);
    ZEN_C_NOT_NULL(send_bytes);
    ZEN_C_NOT_NULL(send_displs);
    ZEN_C_NOT_NULL(recv_bytes);
    ZEN_C_NOT_NULL(recv_displs);
    zen::Communicator& c = *comm->comm;
    size_t s = 0, r = 0;
    for (int p = 0; p < c.size(); ++p) {
      s += send_bytes[p];
      r += recv_bytes[p];
    }
    check_sizes(comm, "zenCommAlltoallv", s, sendbuf, "sendbuf");
    check_sizes(comm, "zenCommAlltoallv", r, recvbuf, "recvbuf");
    in_order(c, [&] { c.alltoallv(sendbuf, send_bytes, send_displs, recvbuf, recv_bytes, recv_displs); }, true);
  });
}

zenResult_t zenCommBarrier(zenComm_t comm) {
  return guard_collective(comm_of(comm), [&] {
    ZEN_C_NOT_NULL(comm);
    zen::Communicator& c = *comm->comm;
    in_order(c, [&] { c.barrier(); }, true);
  });
}

zenResult_t zenCommSend(zenComm_t comm, const void* buf, size_t bytes, int peer, int tag) {
  return guard_collective(comm_of(comm), [&] {
    ZEN_C_NOT_NULL(comm);
    check_sizes(comm, "zenCommSend", bytes, buf, "buf");
    zen::Communicator& c = *comm->comm;
    in_order(c, [&] { c.send(buf, bytes, peer, tag); });
  });
}

zenResult_t zenCommRecv(zenComm_t comm, void* buf, size_t bytes, int peer, int tag) {
  return guard_collective(comm_of(comm), [&] {
    ZEN_C_NOT_NULL(comm);
    check_sizes(comm, "zenCommRecv", bytes, buf, "buf");
    zen::Communicator& c = *comm->comm;
    in_order(c, [&] { c.recv(buf, bytes, peer, tag); });
  });
}

zenResult_t zenCommAbort(zenComm_t comm, const char* reason) {
  return guard([&] {
    ZEN_C_NOT_NULL(comm);
    zen::Communicator& c = *comm->comm;
    const std::string why = reason ? reason : "zenCommAbort";
    in_order(c, [&] { c.abort(why); });
  });
}

zenResult_t zenCommFailed(zenComm_t comm, int* failed) {
  return guard([&] {
    ZEN_C_NOT_NULL(comm);
    ZEN_C_NOT_NULL(failed);
    *failed = comm->comm->failed() ? 1 : 0;
  });
}

}  // extern "C"
