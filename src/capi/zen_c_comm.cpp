// C API, part two: the plans' reports (zenSparseAllreduceLastReport / LastPhase) and the
// communicator's own collectives and point to point (zenCommAllreduce ... zenCommFailed), each in
// call order behind the non-blocking calls. Handles and the error guard: capi_handles.hpp.
#include <string>

#include "capi_handles.hpp"
#include "zen/comm/communicator.hpp"
#include "zen/detail/call_queue.hpp"

using namespace zen::capi;

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
