// C API over the C++ implementation: exceptions become result codes plus a thread-local message.
#include "zen/zen.h"

#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "zen/comm/loopback.hpp"
#include "zen/schemes/scheme.hpp"
#ifdef ZEN_HAVE_MPI
#include "zen/comm/mpi.hpp"
#endif

struct zenComm {
  std::unique_ptr<zen::Communicator> comm;
};
struct zenSparseAllreduce {
  std::unique_ptr<zen::SparseAllreduce> op;
  zen::SparseTensor result;
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

zen::SparseView make_view(const zen::SparseAllreduce& op, size_t nnz, const void* indices, zenIndexType_t itype,
                          const void* values) {
  zen::SparseView v;
  v.dense_len = op.spec().dense_len;
  v.row_width = op.spec().row_width;
  v.dtype = op.spec().dtype;
  v.nnz = nnz;
  v.indices = indices;
  v.values = values;
  if (itype != zenInt32 && itype != zenInt64)
    ZEN_THROW(zen::Result::InvalidArgument, "index type " + std::to_string(static_cast<int>(itype)) + " is not zenInt32 or zenInt64");
  v.index_type = itype == zenInt32 ? zen::IndexType::I32 : zen::IndexType::I64;
  return v;
}
}  // namespace

extern "C" {

const char* zenGetErrorString(zenResult_t r) { return zen::result_name(static_cast<zen::Result>(r)); }
const char* zenGetLastError(void) { return g_last_error.c_str(); }
void zenGetVersion(int* major, int* minor) {
  if (major) *major = ZEN_VERSION_MAJOR;
  if (minor) *minor = ZEN_VERSION_MINOR;
}

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
zenResult_t zenCommTraffic(zenComm_t comm, uint64_t* sent, uint64_t* recv) {
  return guard([&] {
    ZEN_C_NOT_NULL(comm);
    if (sent) *sent = comm->comm->stats().total_sent();
    if (recv) *recv = comm->comm->stats().total_recv();
  });
}

zenResult_t zenSparseAllreduceCreate(zenSparseAllreduce_t* op, zenComm_t comm, const char* scheme, uint64_t n_elems,
                                     uint32_t row_width, zenDataType_t dtype, const zenOptions_t* opts) {
  return guard_collective(comm ? comm->comm.get() : nullptr, [&] {
    ZEN_C_NOT_NULL(op);
    ZEN_C_NOT_NULL(comm);
    ZEN_C_NOT_NULL(scheme);
    ZEN_ENFORCE(dtype >= zenFloat32 && dtype <= zenBfloat16, "zenSparseAllreduceCreate: unknown dtype " + std::to_string(static_cast<int>(dtype)));
    zen::SchemeOptions o;
    if (opts) {
      ZEN_ENFORCE(opts->pull >= zenPullAuto && opts->pull <= zenPullBitmap, "zenSparseAllreduceCreate: unknown pull encoding " + std::to_string(static_cast<int>(opts->pull)));
      o.pull = static_cast<zen::PullEncoding>(opts->pull);
      o.duplicates = opts->reject_duplicates ? zen::DuplicatePolicy::Reject : zen::DuplicatePolicy::Sum;
      o.seed = opts->seed;
      o.threads = opts->threads;
    }
    auto s = zen::make_scheme(scheme, *comm->comm, zen::TensorSpec{n_elems, row_width, static_cast<zen::DType>(dtype)}, o);
    *op = new zenSparseAllreduce{std::move(s), {}};
  });
}

zenResult_t zenSparseAllreduceDense(zenSparseAllreduce_t op, size_t nnz, const void* indices, zenIndexType_t itype,
                                    const void* values, void* dense_out) {
  return guard_collective(op ? &op->op->comm() : nullptr, [&] {
    ZEN_C_NOT_NULL(op);
    if (op->op->spec().dense_len) ZEN_C_NOT_NULL(dense_out);
    op->op->run_dense(make_view(*op->op, nnz, indices, itype, values), dense_out);
  });
}

zenResult_t zenSparseAllreduceSparse(zenSparseAllreduce_t op, size_t nnz, const void* indices, zenIndexType_t itype,
                                     const void* values, size_t* out_nnz) {
  return guard_collective(op ? &op->op->comm() : nullptr, [&] {
    ZEN_C_NOT_NULL(op);
    op->op->run(make_view(*op->op, nnz, indices, itype, values), op->result);
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

zenResult_t zenSparseAllreduceLastStats(zenSparseAllreduce_t op, uint64_t* sent, uint64_t* recv, double* seconds) {
  return guard([&] {
    ZEN_C_NOT_NULL(op);
    const auto& r = op->op->report();
    if (sent) *sent = r.sent;
    if (recv) *recv = r.recv;
    if (seconds) *seconds = r.seconds;
  });
}

zenResult_t zenSparseAllreduceLastScheme(zenSparseAllreduce_t op, const char** scheme, const char** decision) {
  return guard([&] {
    ZEN_C_NOT_NULL(op);
    const auto& r = op->op->report();
    if (scheme) *scheme = r.scheme.c_str();
    if (decision) *decision = r.decision.c_str();
  });
}

zenResult_t zenSparseAllreduceDestroy(zenSparseAllreduce_t op) {
  return guard([&] { delete op; });
}

}  // extern "C"
