#pragma once
// One timeout trial: every rank but `missing` calls `op` on its communicator; the others must fail
// with Result::Timeout naming the missing rank, within 2x the communicator's timeout.
#include <chrono>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "zen/comm/communicator.hpp"

namespace zen::reltest {

struct TrialResult {
  bool participated = false;  ///< false on the missing rank
  bool threw = false;
  Result code = Result::Success;
  std::string what;
  double ms = 0;  ///< time from entering the operation to the error
  /// Timeout error, naming the missing rank, this rank and the operation.
  bool named(int rank, int missing, CommOp op) const {
    return threw && code == Result::Timeout && what.find("peer " + std::to_string(missing)) != std::string::npos &&
           what.find("rank " + std::to_string(rank) + "/") != std::string::npos &&
           what.find(comm_op_name(op)) != std::string::npos;
  }
};

inline const std::vector<CommOp>& blocking_ops() {
  static const std::vector<CommOp> ops{CommOp::Recv,      CommOp::SendRecv,  CommOp::Alltoallv, CommOp::Allgatherv,
                                       CommOp::Allgather, CommOp::Allreduce, CommOp::Broadcast, CommOp::Barrier};
  return ops;
}

/// Run the op on this rank (skipped on `missing`). Point-to-point ops talk to `missing` only
/// (recv from it; sendrecv with it); broadcast uses `missing` as the root.
inline TrialResult timeout_trial(Communicator& c, CommOp op, int missing) {
  TrialResult res;
  const int n = c.size(), me = c.rank();
  if (me == missing) return res;
  res.participated = true;
  std::vector<uint8_t> sb(64 * static_cast<size_t>(n), 1), rb(64 * static_cast<size_t>(n));
  std::vector<size_t> cnt(static_cast<size_t>(n), 64), dis(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) dis[p] = 64 * static_cast<size_t>(p);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    switch (op) {
      case CommOp::Recv: c.recv(rb.data(), 64, missing, 7); break;
      case CommOp::SendRecv: c.sendrecv(sb.data(), 64, missing, rb.data(), 64, missing, 7); break;
      case CommOp::Alltoallv: c.alltoallv(sb.data(), cnt.data(), dis.data(), rb.data(), cnt.data(), dis.data()); break;
      case CommOp::Allgatherv: c.allgatherv(sb.data(), 64, rb.data(), cnt.data(), dis.data()); break;
      case CommOp::Allgather: c.allgather(sb.data(), 64, rb.data()); break;
      case CommOp::Allreduce: {
        std::vector<float> f(16, 1.0f);
        c.allreduce(f.data(), f.size(), DType::F32);
        break;
      }
      case CommOp::Broadcast: c.broadcast(rb.data(), 64, missing); break;
      case CommOp::Barrier: c.barrier(); break;
      default: break;
    }
  } catch (const Error& e) {
    res.threw = true;
    res.code = e.code();
    res.what = e.what();
  }
  res.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace zen::reltest
