// C API over the C++ implementation: exceptions become result codes plus a thread-local message.
// This file: version, errors, communicators, plans and requests; the reports and the communicator's
// own collectives are in zen_c_comm.cpp, the handles and the error guard in capi_handles.hpp.
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

#include "capi_handles.hpp"

namespace zen::capi {
thread_local std::string g_last_error;
}  // namespace zen::capi
using namespace zen::capi;

namespace {
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
  o.auto_explore_budget = d.autotune.explore_budget;
  o.auto_explore_share = d.autotune.explore_share;
  o.auto_cold_calls = d.autotune.cold_calls;
  o.auto_cores = d.autotune.cores;
  o.auto_learn_link = d.autotune.learn_link;
  o.auto_cache = nullptr;
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
  o.node_size = c.node_size;  // hierarchical_sparse (the hierarchical mode reads c.node_size itself)
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
  o.autotune.explore_budget = c.auto_explore_budget;
  o.autotune.explore_share = c.auto_explore_share;
  o.autotune.cold_calls = c.auto_cold_calls;
  o.autotune.cores = c.auto_cores;
  o.autotune.learn_link = c.auto_learn_link;
  if (c.auto_cache) o.autotune.cache = c.auto_cache;
  return o;
}

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

namespace {
// The communicator a failed sparse or non-blocking call must abort (guard_collective). A plan on a
// device communicator offers run_dense, run_dense_from_dense and synchronize only; every rank
// refuses those other calls alike (the plan kind is agreed at creation) before any communication,
// so that refusal leaves the communicator usable: nothing to abort, no peer waits.
zen::Communicator* aborted_by(zenSparseAllreduce_t op) {
  if (!op || !op->comm || op->comm->memory_space() == zen::MemSpace::Device) return nullptr;
  return op->comm;
}
}  // namespace

zenResult_t zenSparseAllreduceSparse(zenSparseAllreduce_t op, size_t nnz, const void* indices, zenIndexType_t itype,
                                     const void* values, size_t* out_nnz) {
  return guard_collective(aborted_by(op), [&] {
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
  const zenResult_t r = guard_collective(aborted_by(op), [&] {
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
  return guard_collective(aborted_by(op), [&] {
    ZEN_C_NOT_NULL(op);
    ZEN_C_NOT_NULL(req);
    if (op->spec.dense_len) ZEN_C_NOT_NULL(dense_out);
    auto q = plan_of(*op).start_dense(make_view(*op, nnz, indices, itype, values), dense_out);
    *req = new zenRequest{std::move(q)};
  });
}

zenResult_t zenSparseAllreduceSparseStart(zenSparseAllreduce_t op, size_t nnz, const void* indices, zenIndexType_t itype,
                                          const void* values, zenRequest_t* req) {
  return guard_collective(aborted_by(op), [&] {
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
