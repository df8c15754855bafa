#pragma once
// BalancedImpl<B>: Balanced Parallelism with the device kernels, written once for both backends
// (see include/zen/cuda/balanced.hpp and docs/gpu.md). B = Gpu: device memory, CUDA kernels, stream
// waits through the communicator (zen::cuda::stream_wait); B = Host: host memory, the same kernel
// bodies on the CPU, nothing to wait for.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "../../src/encode/wire.hpp"
#include "balanced_core.hpp"
#include "kernels/workspace.hpp"
#include "zen/cuda/comm.hpp"
#include "zen/encode/bitmap.hpp"
#include "zen/encode/coo.hpp"

namespace zen::cuda::detail {

using wire::OwnerMeta;  // the CPU schemes' meta record (src/encode/wire.hpp)

// What every rank tells the others at setup: its spec (checked) and its limits (agreed).
struct SetupRecord {
  uint64_t dense_len;
  uint32_t row_width;
  uint32_t dtype;
  uint64_t max_nnz, recv_capacity, pull_rows;
};

inline double imbalance_of(const std::vector<uint64_t>& load) {
  uint64_t total = 0, mx = 0;
  for (uint64_t v : load) {
    total += v;
    mx = std::max(mx, v);
  }
  return total == 0 ? 1.0 : static_cast<double>(mx) * static_cast<double>(load.size()) / static_cast<double>(total);
}

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// The limits every rank uses, from every rank's request (see DeviceBalancedLimits).
inline DeviceBalancedLimits agree_limits(const std::vector<SetupRecord>& all, uint64_t rows, size_t own_max_nnz) {
  uint64_t sum = 0;
  for (const auto& r : all) sum += r.max_nnz;
  DeviceBalancedLimits a;
  a.max_nnz = own_max_nnz;
  for (const auto& r : all) {
    a.recv_capacity = std::max<size_t>(a.recv_capacity, r.recv_capacity ? r.recv_capacity : sum);
    a.pull_rows = std::max<size_t>(a.pull_rows, r.pull_rows ? r.pull_rows : std::min<uint64_t>(rows, sum));
  }
  return a;
}

// Sizes derived from the spec, n and the agreed limits (shared by the query and the constructor).
struct Dims {
  uint64_t rows, m0;
  uint32_t n, D;
  size_t vs, rb, isz, eb;
  size_t E, Rc, Kmax, pull_rows, pull_bytes, msg_bytes;
  HashParams hp;
};

inline Dims dims(const TensorSpec& spec, int n_ranks, const SchemeOptions& opt, const DeviceBalancedLimits& lim,
                 const Partitioner& part) {
  Dims d{};
  d.n = static_cast<uint32_t>(n_ranks);
  d.D = spec.row_width;
  d.rows = spec.row_width ? spec.dense_len / spec.row_width : 0;
  d.m0 = part.owner_size(0);
  d.vs = dtype_size(spec.dtype);
  d.rb = d.vs * d.D;
  d.isz = index_size(encode::wire_index_type(d.m0));
  d.eb = d.isz + d.rb;
  d.E = lim.max_nnz;
  d.Rc = lim.recv_capacity;
  d.Kmax = std::min<uint64_t>(d.Rc, d.m0);
  d.pull_rows = lim.pull_rows;
  uint64_t bm_total = 0;
  for (uint32_t p = 0; p < d.n; ++p) bm_total += encode::bitmap_bytes(part.owner_size(p));
  d.pull_bytes = bm_total + d.pull_rows * (d.isz + d.rb);
  d.msg_bytes = std::max<size_t>(encode::bitmap_bytes(d.m0), d.Kmax * d.isz) + d.Kmax * d.rb;
  d.hp.hash_functions = opt.hash_functions;
  d.hp.parallel_factor = opt.parallel_factor;
  d.hp.serial_fraction = opt.serial_fraction;
  return d;
}

/// The defaults for n ranks of lim.max_nnz each (workspace_bytes() before any agreement).
inline DeviceBalancedLimits uniform_limits(const DeviceBalancedLimits& lim, int n, uint64_t rows) {
  std::vector<SetupRecord> all(static_cast<size_t>(n), SetupRecord{0, 0, 0, lim.max_nnz, lim.recv_capacity, lim.pull_rows});
  return agree_limits(all, rows, lim.max_nnz);
}

template <class B>
struct Prepared {
  HashPrepared hash;
  NonzeroPrepared nonzero;
  AggregatePrepared agg;
  ScatterPrepared scatter;
  static Prepared make(const Dims& d) {
    Prepared p;
    p.hash = Kernels<B>::hash_prepare(d.E, d.n, d.hp);
    p.nonzero = Kernels<B>::nonzero_prepare(d.rows);
    p.agg = Kernels<B>::aggregate_prepare(d.Rc, d.m0);
    p.scatter = Kernels<B>::scatter_prepare(d.m0);
    return p;
  }
};

struct Layout {
  // hashing
  void* hash_ws;
  void* nz_ws;
  int64_t* rows_list;
  uint64_t* nz_count;
  uint32_t* entry;
  uint64_t* pos;
  uint64_t* counts;
  uint32_t* serial;
  uint64_t* spilled;
  DeviceError* err;
  // push
  uint64_t *rcounts, *sdispl, *item_off, *rdispl;
  uint8_t *sbuf, *rbuf;
  // aggregation
  void* agg_ws;
  uint64_t* res_pos;
  uint8_t* res_val;
  uint64_t* num_runs;
  // pull
  uint8_t *flags, *msg, *all;
  void* bm_ws;
  uint64_t* meta;  // 3 * (n + 1)
  size_t total;
};

template <class B>
Layout layout(void* base, const Dims& d, const Prepared<B>& pp) {
  Carver c{static_cast<uint8_t*>(base)};
  Layout L{};
  L.hash_ws = c.take<uint8_t>(pp.hash.bytes);
  L.nz_ws = c.take<uint8_t>(pp.nonzero.bytes);
  L.rows_list = c.take<int64_t>(d.E);
  L.nz_count = c.take<uint64_t>(1);
  L.entry = c.take<uint32_t>(d.E);
  L.pos = c.take<uint64_t>(d.E);
  L.counts = c.take<uint64_t>(d.n);
  L.serial = c.take<uint32_t>(d.n);
  L.spilled = c.take<uint64_t>(1);
  L.err = c.take<DeviceError>(1);
  L.rcounts = c.take<uint64_t>(d.n);
  L.sdispl = c.take<uint64_t>(d.n);
  L.item_off = c.take<uint64_t>(d.n + 1);
  L.rdispl = c.take<uint64_t>(d.n);
  L.sbuf = c.take<uint8_t>(d.E * d.eb);
  L.rbuf = c.take<uint8_t>(d.Rc * d.eb);
  L.agg_ws = c.take<uint8_t>(pp.agg.bytes);
  L.res_pos = c.take<uint64_t>(d.Kmax);
  L.res_val = c.take<uint8_t>(d.Kmax * d.rb);
  L.num_runs = c.take<uint64_t>(1);
  L.flags = c.take<uint8_t>(d.m0);
  L.msg = c.take<uint8_t>(d.msg_bytes);
  L.all = c.take<uint8_t>(d.pull_bytes);
  L.bm_ws = c.take<uint8_t>(pp.scatter.bytes);
  L.meta = c.take<uint64_t>(3 * (d.n + 1));
  L.total = c.bytes();
  return L;
}

template <class B>
size_t workspace_for(const TensorSpec& spec, int n, const SchemeOptions& opt, const DeviceBalancedLimits& lim) {
  ZEN_ENFORCE(n >= 1, "DeviceBalanced::workspace_bytes: rank count " + std::to_string(n) + " must be >= 1");
  ZEN_ENFORCE(spec.row_width >= 1, "DeviceBalanced::workspace_bytes: row width must be >= 1");
  const uint64_t rows = spec.dense_len / spec.row_width;
  const Partitioner part = Partitioner::make(rows, static_cast<uint32_t>(n), opt.seed);
  const Dims d = dims(spec, n, opt, uniform_limits(lim, n, rows), part);
  return layout<B>(nullptr, d, Prepared<B>::make(d)).total;
}

// Host staging for the counts the host must read (pinned on the GPU).
struct Staging {
  uint64_t* counts;
  uint64_t* rcounts;
  uint32_t* serial;
  uint64_t* scalars;  // [0] spilled, [1] nz count, [2] num_runs
  DeviceError* err;
  uint64_t* meta;     // 3 * (n + 1)
  uint8_t* setup;     // (n + 1) setup records
};

template <class B>
class BalancedImpl final : public DeviceBalanced::Core {
 public:
  using K = Kernels<B>;
  using M = Memory<B>;

  BalancedImpl(Communicator& c, const TensorSpec& s, const SchemeOptions& o, const DeviceBalancedLimits& l,
               SyncReport& report, void* ws, size_t ws_bytes)
      : comm_(c), spec_(s), opt_(o), report_(report) {
    setup(l, ws, ws_bytes);
  }

  const DeviceBalancedLimits& limits() const override { return agreed_; }

  void quiesce() noexcept override {
    if constexpr (std::is_same_v<B, Gpu>) {
      try {
        if (comm_.stream() != nullptr) M::synchronize(comm_.stream());
      } catch (...) {
        // destructors report nothing; the stream's error is the caller's to see
      }
    }
  }

  void synchronize() override {
    d2h(h_.err, L_.err, sizeof(DeviceError));
    wait();
    check_device_error("found by the decode of the last call");
  }

  void run_dense_from_dense(const void* d_grad, void* d_out) override {
    // Extra host sync (a count): the number of non-zero rows must fit the workspace.
    {
      PhaseRec ph(*this, "scan");
      K::count_nonzero_rows(pp_.nonzero, d_grad, spec_.dtype, d_.rows, d_.D, L_.nz_count, L_.nz_ws, pp_.nonzero.bytes,
                            stream());
      d2h(&h_.scalars[1], L_.nz_count, 8);
      wait();
      if (h_.scalars[1] > d_.E)
        ZEN_THROW(Result::InvalidArgument, where() + "the dense gradient has " + std::to_string(h_.scalars[1]) +
                                               " non-zero rows, more than max_nnz " + std::to_string(d_.E));
      K::nonzero_rows(pp_.nonzero, d_grad, spec_.dtype, d_.rows, d_.D, L_.rows_list, L_.nz_count, L_.nz_ws,
                      pp_.nonzero.bytes, stream());
    }
    run(L_.rows_list, IndexType::I64, h_.scalars[1], d_grad, L_.rows_list, d_out);
  }

  // One call: the owner exchange of the host schemes (src/schemes/owner_exchange.hpp) as the same
  // named stages, with the same phase names and the same bytes on the wire (src/encode/wire.hpp);
  // each stage is a kernel sequence plus the host syncs it needs (three per call).
  void run(const void* indices, IndexType it, size_t nnz, const void* values, const int64_t* value_row,
           void* d_out) override {
    ZEN_ENFORCE(nnz <= d_.E, where() + "input has " + std::to_string(nnz) + " rows, more than max_nnz " +
                                 std::to_string(d_.E) + " the workspace was sized for");
    // 1. Partition: h0 owner and region-hash position of every entry.
    partition(indices, it, nnz);
    // 2. Layout: exchange the counts (host sync #1), check spills and the receive capacity, size the
    //    push segments.
    layout_push(nnz);
    // 3. Push: pack each owner's segment (COO keys, value rows), alltoallv.
    push(nnz, values, value_row);
    // 4. Reduce: owner sums in compact per-owner space (host sync #2 for K).
    const uint64_t K = reduce();
    // 5. Publish (K, pushed rows, pull encoding) and lay out the pull buffer (host sync #3).
    publish_meta(K);
    // 6. Write this owner's pull message.
    write_pull(K);
    // 7. Pull: allgatherv of every owner's message.
    pull();
    // 8. Decode every owner's part into the dense output (left enqueued).
    decode(d_out);
    ++calls_;
  }

 private:
  // What one call's stages hand on (host side; grown once, reused).
  struct CallState {
    std::vector<size_t> c8, d8, sbytes, sdispl, rbytes, rdispl, pbytes, pdispl;
    std::vector<OwnerMeta> meta;
    std::vector<uint64_t> pushed, results;
    uint64_t received = 0;  // rows this owner received
    uint64_t m = 0;         // size of this rank's owner set
    bool use_bitmap = false;
  };

  void partition(const void* indices, IndexType it, size_t nnz) {
    PhaseRec ph(*this, "hash");
    K::hash_partition(pp_.hash, indices, it, nnz, part_, L_.hash_ws, pp_.hash.bytes, L_.entry, L_.pos, L_.counts,
                      L_.serial, L_.spilled, L_.err, stream());
  }

  void layout_push(size_t nnz) {
    const int n = comm_.size();
    CallState& x = x_;
    {
      PhaseRec ph(*this, "counts");
      x.c8.assign(n, 8);
      x.d8.resize(n);
      for (int p = 0; p < n; ++p) x.d8[p] = 8 * static_cast<size_t>(p);
      comm_.alltoallv(L_.counts, x.c8.data(), x.d8.data(), L_.rcounts, x.c8.data(), x.d8.data());
      d2h(h_.counts, L_.counts, 8 * n);
      d2h(h_.rcounts, L_.rcounts, 8 * n);
      d2h(h_.serial, L_.serial, 4 * n);
      d2h(&h_.scalars[0], L_.spilled, 8);
      d2h(h_.err, L_.err, sizeof(DeviceError));
      wait();
      check_device_error(calls_ ? "found at the start of this call: from hashing, or from the previous call's decode"
                                : "found after hashing");
    }
    const HashCaps caps = hash_caps(nnz, static_cast<uint32_t>(n), d_.hp);
    report_.serial_overflows = 0;
    for (int p = 0; p < n; ++p) report_.serial_overflows += h_.serial[p] > caps.cap2 ? 1 : 0;
    x.sbytes.resize(n);
    x.sdispl.resize(n);
    x.rbytes.resize(n);
    x.rdispl.resize(n);
    size_t stotal = 0, rtotal = 0;
    x.received = 0;
    for (int p = 0; p < n; ++p) {
      x.sbytes[p] = h_.counts[p] * d_.eb;
      x.sdispl[p] = stotal;
      stotal += x.sbytes[p];
      x.rbytes[p] = h_.rcounts[p] * d_.eb;
      x.rdispl[p] = rtotal;
      rtotal += x.rbytes[p];
      x.received += h_.rcounts[p];
    }
    if (x.received > d_.Rc)
      ZEN_THROW(Result::InvalidArgument, where() + "the push delivers " + std::to_string(x.received) +
                                             " entries to this rank, more than the agreed recv_capacity " +
                                             std::to_string(d_.Rc) + " (raise DeviceBalancedLimits::recv_capacity)");
  }

  void push(size_t nnz, const void* values, const int64_t* value_row) {
    const auto n = static_cast<uint32_t>(comm_.size());
    void* s = stream();
    K::segment_displacements(L_.counts, n, d_.eb, L_.sdispl, L_.item_off, s);
    K::pack_push(L_.entry, L_.pos, nnz, L_.item_off, L_.sdispl, n, values, value_row, d_.D, spec_.dtype,
                 static_cast<int>(d_.isz), L_.sbuf, s);
    PhaseRec ph(*this, "push");
    comm_.alltoallv(L_.sbuf, x_.sbytes.data(), x_.sdispl.data(), L_.rbuf, x_.rbytes.data(), x_.rdispl.data());
  }

  uint64_t reduce() {
    const auto n = static_cast<uint32_t>(comm_.size());
    void* s = stream();
    x_.m = part_.owner_size(static_cast<uint32_t>(comm_.rank()));
    PhaseRec ph(*this, "aggregate");
    K::segment_displacements(L_.rcounts, n, d_.eb, L_.rdispl, nullptr, s);
    K::owner_aggregate(pp_.agg, L_.rbuf, L_.rcounts, L_.rdispl, n, x_.received, x_.m, d_.D, spec_.dtype,
                       static_cast<int>(d_.isz), L_.agg_ws, pp_.agg.bytes, L_.res_pos, L_.res_val, L_.num_runs, L_.err,
                       s);
    d2h(&h_.scalars[2], L_.num_runs, 8);
    d2h(h_.err, L_.err, sizeof(DeviceError));
    wait();
    check_device_error("found by the owner aggregation");
    return h_.scalars[2];
  }

  void publish_meta(uint64_t K) {
    const int n = comm_.size();
    CallState& x = x_;
    const size_t bitmap_b = encode::bitmap_bytes(x.m), coo_b = K * d_.isz;
    x.use_bitmap = opt_.pull == PullEncoding::Bitmap || (opt_.pull == PullEncoding::Auto && bitmap_b < coo_b);
    {
      PhaseRec ph(*this, "meta");
      OwnerMeta mine{K, x.received, x.use_bitmap ? wire::kEncBitmap : wire::kEncCoo};
      std::memcpy(h_.meta, &mine, sizeof mine);
      h2d(L_.meta, h_.meta, sizeof mine);
      x.c8.assign(n, sizeof mine);
      x.d8.resize(n);
      for (int p = 0; p < n; ++p) x.d8[p] = p * sizeof mine;
      comm_.allgatherv(L_.meta, sizeof mine, L_.meta + 3, x.c8.data(), x.d8.data());
      d2h(h_.meta + 3, L_.meta + 3, n * sizeof mine);
      wait();
    }
    x.meta.resize(n);
    std::memcpy(x.meta.data(), h_.meta + 3, n * sizeof(OwnerMeta));
    x.pbytes.resize(n);
    x.pdispl.resize(n);
    x.pushed.resize(n);
    x.results.resize(n);
    size_t ptotal = 0;
    uint64_t total_rows = 0;
    int nbitmap = 0;
    for (int p = 0; p < n; ++p) {
      const OwnerMeta& mp_meta = x.meta[p];
      const uint64_t mp = part_.owner_size(static_cast<uint32_t>(p));
      if (mp_meta.result_rows > mp)
        ZEN_THROW(Result::InvalidUsage, where() + "owner " + std::to_string(p) + " announced " +
                                            std::to_string(mp_meta.result_rows) + " result rows for an index set of " +
                                            std::to_string(mp));
      x.pbytes[p] = (mp_meta.encoding ? encode::bitmap_bytes(mp) : mp_meta.result_rows * d_.isz) +
                    mp_meta.result_rows * d_.rb;
      x.pdispl[p] = ptotal;
      ptotal += x.pbytes[p];
      total_rows += mp_meta.result_rows;
      x.pushed[p] = mp_meta.pushed_rows;
      x.results[p] = mp_meta.result_rows;
      nbitmap += mp_meta.encoding ? 1 : 0;
    }
    if (ptotal > d_.pull_bytes)
      ZEN_THROW(Result::InvalidArgument, where() + "the pull needs " + std::to_string(ptotal) + " bytes (" +
                                             std::to_string(total_rows) + " result rows), more than the " +
                                             std::to_string(d_.pull_bytes) +
                                             " sized by the agreed pull_rows (raise DeviceBalancedLimits::pull_rows)");
    report_.push_imbalance = imbalance_of(x.pushed);
    report_.pull_imbalance = imbalance_of(x.results);
    report_.encoding = nbitmap == 0 ? "coo" : (nbitmap == n ? "bitmap" : "mixed");
    report_.push_encoding = "coo";
    report_.result_nnz = total_rows;
    report_.global_rows = total_rows;
    report_.scheme = "balanced";
  }

  void write_pull(uint64_t K) {
    void* s = stream();
    const size_t bitmap_b = encode::bitmap_bytes(x_.m), coo_b = K * d_.isz;
    if (x_.use_bitmap) {
      K::bitmap_encode(L_.res_pos, K, x_.m, L_.flags, L_.msg, s);
      if (K) M::copy(L_.msg + bitmap_b, L_.res_val, K * d_.rb, s);
    } else {
      K::coo_encode_keys(L_.res_pos, K, static_cast<int>(d_.isz), L_.msg, s);
      if (K) M::copy(L_.msg + coo_b, L_.res_val, K * d_.rb, s);
    }
  }

  void pull() {
    PhaseRec ph(*this, "pull");
    comm_.allgatherv(L_.msg, x_.pbytes[comm_.rank()], L_.all, x_.pbytes.data(), x_.pdispl.data());
  }

  void decode(void* d_out) {
    void* s = stream();
    PhaseRec ph(*this, "decode");
    if (spec_.dense_len) M::fill(d_out, 0, spec_.dense_len * d_.vs, s);
    for (int p = 0; p < comm_.size(); ++p) {
      const uint8_t* msg = L_.all + x_.pdispl[p];
      const uint64_t mp = part_.owner_size(static_cast<uint32_t>(p));
      const OwnerMeta& mt = x_.meta[p];
      if (mt.encoding)
        K::bitmap_scatter(pp_.scatter, msg, mp, msg + encode::bitmap_bytes(mp), mt.result_rows, part_,
                          static_cast<uint32_t>(p), d_.D, spec_.dtype, d_out, L_.bm_ws, pp_.scatter.bytes, L_.err, s);
      else
        K::coo_scatter(msg, mt.result_rows, static_cast<int>(d_.isz), msg + mt.result_rows * d_.isz, part_,
                       static_cast<uint32_t>(p), d_.D, spec_.dtype, d_out, L_.err, s);
    }
  }

  void* stream() const { return comm_.stream(); }
  std::string where() const { return "rank " + std::to_string(comm_.rank()) + " balanced(" + backend() + "): "; }
  static const char* backend() { return std::is_same_v<B, Gpu> ? "device" : "device kernels on the host"; }
  void d2h(void* dst, const void* src, size_t bytes) {
    if (bytes) M::copy(dst, src, bytes, stream());
  }
  void h2d(void* dst, const void* src, size_t bytes) {
    if (bytes) M::copy(dst, src, bytes, stream());
  }
  void wait() {
    if constexpr (std::is_same_v<B, Gpu>) stream_wait(comm_, comm_.stream());
  }

  // Report (and clear) a device error read into h_.err by the last synchronization.
  void check_device_error(const char* when) {
    const DeviceError e = *h_.err;
    if (e.code == kErrNone) return;
    *h_.err = DeviceError{};
    M::fill(L_.err, 0, sizeof(DeviceError), stream());
    const std::string detail = std::string(device_error_name(e.code)) + " (owner/source " + std::to_string(e.owner) +
                               ", value " + std::to_string(e.a) + ", limit/expected " + std::to_string(e.b) + ", " +
                               when + ")";
    if (e.code == kErrHashLost) ZEN_THROW(Result::InternalError, where() + detail);
    if (e.code == kErrIndexRange)
      ZEN_THROW(Result::InvalidArgument, where() + "input entry " + std::to_string(e.owner) + " has index " +
                                             std::to_string(static_cast<int64_t>(e.a)) + " outside [0, " +
                                             std::to_string(e.b) + ")");
    ZEN_THROW(Result::InvalidUsage,
              where() + detail + "; ranks disagree on N or the h0 seed, or a message was corrupted");
  }

  struct PhaseRec {
    PhaseRec(BalancedImpl& i, const char* name) : im(i), before(i.comm_.stats()), t0(now_s()) { r.name = name; }
    ~PhaseRec() {
      TrafficStats dlt = im.comm_.stats() - before;
      r.sent = dlt.total_sent();
      r.recv = dlt.total_recv();
      r.seconds = now_s() - t0;
      im.report_.sent += r.sent;
      im.report_.recv += r.recv;
      im.report_.phases.push_back(r);
    }
    BalancedImpl& im;
    TrafficStats before;
    double t0;
    PhaseReport r;
  };

  void setup(const DeviceBalancedLimits& lim, void* d_ws, size_t ws_bytes) {
    const MemSpace want = std::is_same_v<B, Gpu> ? MemSpace::Device : MemSpace::Host;
    ZEN_ENFORCE(comm_.memory_space() == want, where() + "communicator '" + comm_.backend_name() +
                                                   "' does not hold this backend's memory");
    ZEN_ENFORCE(spec_.row_width >= 1 && spec_.dense_len % spec_.row_width == 0,
                where() + "dense length " + std::to_string(spec_.dense_len) + " is not divisible by row width " +
                    std::to_string(spec_.row_width));
    const int n = comm_.size();
    // The device kernels code indices as COO or the hash bitmap (Auto picks between those two).
    ZEN_CHECK_CODE(opt_.pull != PullEncoding::EliasFano && opt_.push != IndexEncoding::EliasFano &&
                       opt_.push != IndexEncoding::Bitmap,
                   Result::Unsupported,
                   where() + "Elias-Fano index coding (and a bitmap push) run on CPU plans only; device plans pull "
                             "COO or the hash bitmap and push COO");
    const uint64_t rows = spec_.dense_len / spec_.row_width;
    // Host staging (counts, meta, setup records) and a setup buffer of the backend.
    const size_t rec = sizeof(SetupRecord);
    const size_t hb = sizeof(uint64_t) * (3 * n + 3) + sizeof(uint32_t) * n + sizeof(DeviceError) + 16 +
                      sizeof(uint64_t) * 3 * (n + 1) + (n + 1) * rec + 128;
    host_block_.p = M::alloc_staging(hb);
    auto* p = static_cast<uint8_t*>(host_block_.p);
    auto take = [&](size_t bytes) {
      uint8_t* q = p;
      p += (bytes + 15) & ~size_t{15};
      return q;
    };
    h_.counts = reinterpret_cast<uint64_t*>(take(8 * n));
    h_.rcounts = reinterpret_cast<uint64_t*>(take(8 * n));
    h_.serial = reinterpret_cast<uint32_t*>(take(4 * n));
    h_.scalars = reinterpret_cast<uint64_t*>(take(8 * 3));
    h_.err = reinterpret_cast<DeviceError*>(take(sizeof(DeviceError)));
    h_.meta = reinterpret_cast<uint64_t*>(take(8 * 3 * (n + 1)));
    h_.setup = take((n + 1) * rec);
    *h_.err = DeviceError{};
    Owned<false> sb;  // released at the end of setup
    sb.p = M::alloc((n + 1) * rec);
    auto* d_setup = static_cast<uint8_t*>(sb.p);

    // Agree on rank 0's seed, then exchange every rank's spec (checked) and limits (agreed):
    // one broadcast + one allgather.
    std::memcpy(h_.setup, &opt_.seed, 8);
    h2d(d_setup, h_.setup, 8);
    comm_.broadcast(d_setup, 8, 0);
    d2h(h_.setup, d_setup, 8);
    wait();
    std::memcpy(&opt_.seed, h_.setup, 8);
    const SetupRecord mine{spec_.dense_len, spec_.row_width, static_cast<uint32_t>(spec_.dtype), lim.max_nnz,
                           lim.recv_capacity, lim.pull_rows};
    std::memcpy(h_.setup, &mine, rec);
    h2d(d_setup, h_.setup, rec);
    std::vector<size_t> c(n, rec), dsp(n);
    for (int q = 0; q < n; ++q) dsp[q] = q * rec;
    comm_.allgatherv(d_setup, rec, d_setup + rec, c.data(), dsp.data());
    d2h(h_.setup, d_setup + rec, n * rec);
    wait();
    std::vector<SetupRecord> all(n);
    std::memcpy(all.data(), h_.setup, n * rec);
    for (int q = 0; q < n; ++q) {
      const SetupRecord& o = all[q];
      if (o.dense_len != mine.dense_len || o.row_width != mine.row_width || o.dtype != mine.dtype)
        ZEN_THROW(Result::InvalidUsage, where() + "rank " + std::to_string(q) + " has N=" + std::to_string(o.dense_len) +
                                            " D=" + std::to_string(o.row_width) +
                                            " dtype=" + dtype_name(static_cast<DType>(o.dtype)) +
                                            " but this rank has N=" + std::to_string(mine.dense_len) +
                                            " D=" + std::to_string(mine.row_width) + " dtype=" + dtype_name(spec_.dtype));
    }
    agreed_ = agree_limits(all, rows, lim.max_nnz);
    part_ = Partitioner::make(rows, static_cast<uint32_t>(n), opt_.seed);
    d_ = dims(spec_, n, opt_, agreed_, part_);
    pp_ = Prepared<B>::make(d_);
    L_ = layout<B>(nullptr, d_, pp_);
    if (d_ws) {
      ZEN_ENFORCE(ws_bytes >= L_.total, where() + "workspace of " + std::to_string(ws_bytes) +
                                            " bytes is smaller than the " + std::to_string(L_.total) +
                                            " bytes the agreed limits need (max_nnz " + std::to_string(agreed_.max_nnz) +
                                            ", recv_capacity " + std::to_string(agreed_.recv_capacity) +
                                            ", pull_rows " + std::to_string(agreed_.pull_rows) + ")");
    } else {
      owned_ws_.p = M::alloc(L_.total);
      d_ws = owned_ws_.p;
    }
    L_ = layout<B>(d_ws, d_, pp_);
    M::fill(L_.err, 0, sizeof(DeviceError), stream());
    d_.hp.seed = opt_.seed ^ (0x51ed2701ULL * static_cast<uint64_t>(comm_.rank() + 1));  // the CPU scheme's h_1..h_k seed
    pp_.hash.hp.seed = d_.hp.seed;
    wait();  // the setup buffer is released next
  }

  Communicator& comm_;
  TensorSpec spec_;
  SchemeOptions opt_;
  SyncReport& report_;
  DeviceBalancedLimits agreed_;
  Partitioner part_;
  Dims d_{};
  Prepared<B> pp_;
  Layout L_{};
  Staging h_{};
  // Memory owned by the plan (released even when setup throws).
  template <bool kStaging>
  struct Owned {
    void* p = nullptr;
    Owned() = default;
    Owned(const Owned&) = delete;
    Owned& operator=(const Owned&) = delete;
    ~Owned() {
      if constexpr (kStaging) M::release_staging(p);
      else M::release(p);
    }
  };
  Owned<true> host_block_;
  Owned<false> owned_ws_;
  uint64_t calls_ = 0;
  CallState x_;
};

}  // namespace zen::cuda::detail
