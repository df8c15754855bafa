#pragma once
// What one transfer puts on a link: a fixed header, then the payload (a float32 model, or a partial
// aggregate's byte image, PartialAggregate::to_bytes). The timing simulator charges exactly these
// bytes for every transfer and the learner sends exactly these bytes through the communicator, as
// one message per transfer, so the simulated payload and the communicator's traffic agree.
#include <cstddef>
#include <cstdint>

#include "zen/fl/fedavg.hpp"
#include "zen/fl/sparse_aggregate.hpp"

namespace zen::fl::sim {

/// Header of every transfer message: the event it belongs to and its simulated [start, end].
struct TransferHeader {
  int32_t event = 0;
  int32_t kind = 0;
  double start_s = 0.0;
  double end_s = 0.0;
  uint64_t payload_bytes = 0;
};
static_assert(sizeof(TransferHeader) == 32, "the wire header is 32 bytes");

/// Message carrying a model of `params` float32 parameters (topk == 0), or a compressed model
/// transfer: exactly min(topk, params) entries of the difference to what the receiver holds from
/// this sender, as a SparseAggregate without members (weight 0).
inline std::size_t model_message_bytes(std::size_t params, std::size_t topk = 0) {
  if (topk == 0) return sizeof(TransferHeader) + params * sizeof(float);
  return sizeof(TransferHeader) + SparseAggregate::wire_bytes(params, topk < params ? topk : params, 0);
}
/// Message carrying a partial aggregate of `members` clients over `params` parameters: the dense
/// mean (topk == 0) or a compressed delta of exactly min(topk, params) entries.
inline std::size_t aggregate_message_bytes(std::size_t params, std::size_t members, std::size_t topk = 0) {
  if (topk == 0) return sizeof(TransferHeader) + PartialAggregate::wire_bytes(params, members);
  return sizeof(TransferHeader) + SparseAggregate::wire_bytes(params, topk < params ? topk : params, members);
}

}  // namespace zen::fl::sim
