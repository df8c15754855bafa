#pragma once
// The C API's handles and its error guard, shared by its two sources (zen_c.cpp: version, errors,
// communicators, plans and requests; zen_c_comm.cpp: reports and the communicator's own
// collectives). Private to libzen.
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "zen/error.hpp"
#include "zen/schemes/scheme.hpp"
#include "zen/zen.h"

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

namespace zen::capi {
/// The message of this thread's last failed call (zenGetLastError).
extern thread_local std::string g_last_error;

template <typename F>
inline zenResult_t guard(F&& f) {
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
inline zenResult_t guard_collective(zen::Communicator* comm, F&& f) {
  const zenResult_t r = guard(std::forward<F>(f));
  if (r != zenSuccess && r != zenRemoteError && comm) comm->abort(g_last_error);
  return r;
}

#define ZEN_C_NOT_NULL(p) \
  if (!(p)) ZEN_THROW(zen::Result::InvalidArgument, std::string(__func__) + ": argument '" #p "' is NULL")

inline zen::Plan& plan_of(::zenSparseAllreduce& op) { return *op.plan; }
}  // namespace zen::capi
