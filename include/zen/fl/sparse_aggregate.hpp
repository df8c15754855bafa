#pragma once
// Compressed FedAvg updates: a partial aggregate of model deltas, top-k sparsified with error
// feedback, on the wire as zen's sparse encodings.
//
// A client k that trained w_k from the global model w contributes c_k = D_k (w_k - w). A sender adds
// what it holds (its own c_k, the partial aggregates it received, and its error-feedback residual e)
// into acc, sends the k entries of acc largest in magnitude and keeps e = acc - sent for its next
// message (Stich et al., arXiv 1809.07599; per-hop re-sparsification as in FedISL's sparse
// aggregation, arXiv 2307.08346). Every message carries exactly k entries, so its size depends only
// on (N, k, members) and the timing knows it before the learning runs.
//
// Wire: "ZFSA" | u32 version=1 | u64 dim | u64 k | u64 nmembers | u32 index encoding (0: Elias-Fano,
// 1: bitmap, whichever zen::encode gives fewer bytes for (dim, k)) | u32 0 | f64 weight |
// i32 members[] | index bytes | f32 values[k] (host byte order).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace zen::fl {

struct SparseAggregate {
  uint64_t dim = 0;
  std::vector<uint64_t> positions;  ///< strictly increasing, < dim
  std::vector<float> values;        ///< one per position
  double weight = 0;                ///< sum_k D_k of the members
  std::vector<int> members;         ///< sorted ascending

  /// Bytes of to_bytes() for k entries out of dim and `num_members` clients.
  static size_t wire_bytes(uint64_t dim, uint64_t k, size_t num_members);
  std::vector<uint8_t> to_bytes() const;
  /// Throws zen::Error naming the defect (size, magic, encoding, order, range, members).
  static SparseAggregate from_bytes(const uint8_t* data, size_t n);
  static SparseAggregate from_bytes(const std::vector<uint8_t>& b) { return from_bytes(b.data(), b.size()); }
  /// dense[positions[i]] += values[i]; dense must have dim entries.
  void add_to(std::vector<double>& dense) const;
};

/// Top-k of acc by magnitude (ties: the lower index), exactly min(k, acc.size()) entries, sent as
/// float32; acc keeps the residual acc - sent (error feedback: what was not sent stays).
SparseAggregate topk_extract(std::vector<double>& acc, size_t k, double weight, std::vector<int> members);

}  // namespace zen::fl
