#pragma once
// The owner exchange of the two-phase schemes (balanced, sparse_ps), private, as named stages on one
// small context (StageCtx):
//
//   layout_push -> [scheme: encode its push segments] -> push -> reduce -> publish_meta
//               -> write_pull -> pull -> open_pulled -> [scheme: decode]
//
// The schemes differ only in their partition policy, which says which owner holds a row and at
// which position of its set: balanced hashes (owner = pi(row) mod n, position = pi(row) div n),
// sparse_ps splits the rows into n contiguous key ranges. The policy gives the owner sets' sizes
// (set_owner_sets) and each scheme's own steps: how its input becomes the per-owner push segments
// (scount, then the bytes at sdispl), and how a position of owner p becomes a row again (decode).
// Everything between (counts, the push rule, the owner sum, the owners' meta, the pull rule, the
// pull and the checks of what arrived) is written once here, so both schemes put the same bytes on
// the wire by construction. The exchange's buffers only grow: steady-state calls allocate nothing.
#include <cstdint>
#include <memory>
#include <vector>

#include "owner_stage.hpp"
#include "plan_util.hpp"
#include "scheme_row.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen::plan {

/// The facts of one call that every stage reads (fixed for the call).
struct StageCtx {
  int n, me;
  size_t un;        // n as a size
  size_t isz;       // bytes of a COO key on the wire (index width of the owner sets)
  size_t D, vs, rb;  // values per row, bytes per value, bytes per row
  uint64_t m;       // size of this rank's owner set
  detail::ThreadPool& tp;
  const char* scheme;  // names the scheme in every error a stage raises
};

/// The buffers of the exchange, part of each scheme's workspace (which derives from it).
struct OwnerExchange {
  std::vector<uint64_t> scount, rcount;  // keys per peer (scount: filled by the scheme's partition)
  std::vector<size_t> sbytes, sdispl, rbytes, rdispl, pbytes, pdispl;
  std::vector<uint8_t> senc, renc;  // push encoding per peer (sent / received), from (m, K) on both sides
  std::vector<size_t> sib, rib;     // bytes of the index part of each push segment
  std::vector<uint8_t> sbuf, rbuf, all, rkeys;
  std::vector<const uint8_t*> rseg;  // start of each received push segment (the own one in sbuf)
  OwnerState owner;
  std::vector<Segment> segs;
  std::vector<wire::OwnerMeta> meta;
  wire::OwnerMeta mine{};
  std::vector<uint64_t> pushed, results;  // per owner: rows pushed to it, rows in its result
  std::vector<uint64_t> owner_base;       // decode: first result row of each owner (n + 1)
  std::vector<uint64_t> val_off;          // decode: offset of each owner's value rows in `all`
  uint64_t received = 0;                  // rows this owner received (its own segment included)
  uint8_t pull_enc = wire::kEncCoo;             // this owner's pull encoding
  size_t ptotal = 0;                      // bytes of the pull buffer
  double bound = 0;                       // information bound of this rank's traffic (report)
};

/// Base of the owner-exchange plans: the stages above as members (they time their phases and fill
/// the report), the owner sets of the scheme's partition policy; the workspace is adopted from plan::Named.
class OwnerExchangePlan : public SparseAllreduce {
 public:
  /// The stages' buffers: the scheme's workspace (made and held by plan::Named).
  void adopt_workspace(OwnerExchange& w) { x_ = &w; }

 protected:
  using SparseAllreduce::SparseAllreduce;

  /// The partition policy's owner set sizes (one per rank); fixes the index width on the wire.
  void set_owner_sets(std::vector<uint64_t> sizes);
  uint64_t owner_set(int p) const { return m_of_[static_cast<size_t>(p)]; }


  StageCtx stage_ctx(size_t value_size);

  /// Exchange the key counts (scount -> rcount), choose each push segment's index code by the push
  /// rule (the own segment stays local as COO), size and place the segments, grow the buffers.
  void layout_push(const StageCtx& c);
  /// The push: alltoallv of the segments (the own one stays in sbuf).
  void push(const StageCtx& c);
  /// The owner sum over the received segments in rank order, or their merge when all arrived sorted.
  template <typename T>
  uint64_t reduce(const StageCtx& c, bool merge);
  /// Choose this owner's pull encoding, publish (K, received, encoding), lay out the pull buffer.
  void publish_meta(const StageCtx& c, uint64_t K);
  /// Write this owner's pull message in place in the pull buffer (clears the presence bits).
  template <typename T>
  void write_pull(const StageCtx& c);
  /// The pull: allgatherv of every owner's message, in place.
  void pull(const StageCtx& c);
  /// Check every owner's pull message against its meta, place its value rows; returns the result rows.
  uint64_t open_pulled(const StageCtx& c);

  OwnerExchange& x() { return *x_; }

  IndexType wire_ = IndexType::I32;

 private:
  std::vector<uint64_t> m_of_;
  OwnerExchange* x_ = nullptr;
};

template <typename T>
uint64_t OwnerExchangePlan::reduce(const StageCtx& c, bool merge) {
  OwnerExchange& w = x();
  Phase ph(*this, "aggregate");
  w.segs.resize(c.un);
  w.rseg.resize(c.un);
  w.received = 0;
  for (int p = 0; p < c.n; ++p) {
    w.rseg[p] = p == c.me ? w.sbuf.data() + w.sdispl[c.me] : w.rbuf.data() + w.rdispl[p];
    w.received += w.rcount[p];
  }
  received_segments(c.n, c.me, w.rseg.data(), w.rcount.data(), w.renc.data(), w.rib.data(), c.m, c.isz, w.rkeys,
                    w.segs.data(), c.scheme);
  return merge ? owner_merge<T>(w.owner, w.segs.data(), c.n, c.isz, c.D, c.m, c.tp, c.me, c.scheme)
               : owner_accumulate<T>(w.owner, w.segs.data(), c.n, c.isz, c.D, c.m, c.tp, c.me, c.scheme);
}

template <typename T>
void OwnerExchangePlan::write_pull(const StageCtx& c) {
  OwnerExchange& w = x();
  Phase ph(*this, "encode");
  owner_write<T>(w.owner, c.isz, c.D, w.pull_enc, w.all.data() + w.pdispl[c.me], c.tp);
}

/// The partition policies of the owner exchange (the cost model's owner loads differ by it).
enum class Partition { Hash, KeyRange };

/// The exchange's traffic model (balanced and sparse_ps rows): counts, push, meta, pull, with the
/// index part of each message by the push and pull rules of src/encode/wire.hpp.
void owner_exchange_traffic(model::TrafficBuilder& b, Partition policy);
/// Rows rank r touches: its input, the rows it receives as an owner, every result row.
double owner_exchange_work(const model::Problem& p, const model::Counts& c, size_t r, Partition policy);

}  // namespace zen::plan
