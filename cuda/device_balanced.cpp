// Balanced Parallelism on the GPU (see include/zen/cuda/balanced.hpp and docs/gpu.md).
#include "zen/cuda/balanced.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "check.cuh"
#include "zen/cuda/comm.hpp"
#include "zen/cuda/kernels.hpp"
#include "zen/encode/bitmap.hpp"
#include "zen/encode/coo.hpp"

namespace zen::cuda {
namespace {

struct Carve {
  uint8_t* base;
  size_t off = 0;
  template <typename T>
  T* take(size_t count) {
    off = (off + 255) & ~size_t{255};
    T* p = base ? reinterpret_cast<T*>(base + off) : nullptr;
    off += count * sizeof(T);
    return p;
  }
  size_t bytes() const { return (off + 255) & ~size_t{255}; }
};

struct OwnerMeta {  // as the CPU scheme's
  uint64_t result_rows;
  uint64_t pushed_rows;
  uint64_t encoding;
};

struct SetupRecord {
  uint64_t dense_len;
  uint32_t row_width;
  uint32_t dtype;
};

double imbalance(const std::vector<uint64_t>& load) {
  uint64_t total = 0, mx = 0;
  for (uint64_t v : load) {
    total += v;
    mx = std::max(mx, v);
  }
  return total == 0 ? 1.0 : static_cast<double>(mx) * static_cast<double>(load.size()) / static_cast<double>(total);
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Sizes derived from the spec, n and the limits (shared by the query and the constructor).
struct Dims {
  uint64_t rows, m0;
  uint32_t n, D;
  size_t vs, rb, isz, eb;
  size_t E, Rc, Kmax, pull_rows, pull_bytes, msg_bytes;
  HashParams hp;
};

Dims dims(const TensorSpec& spec, int n_ranks, const SchemeOptions& opt, const DeviceBalancedLimits& lim, const Partitioner& part) {
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
  d.Rc = lim.recv_capacity ? lim.recv_capacity : static_cast<size_t>(d.n) * d.E;
  d.Kmax = std::min<uint64_t>(d.Rc, d.m0);
  d.pull_rows = lim.pull_rows ? lim.pull_rows : std::min<uint64_t>(d.rows, static_cast<uint64_t>(d.n) * d.E);
  uint64_t bm_total = 0;
  for (uint32_t p = 0; p < d.n; ++p) bm_total += encode::bitmap_bytes(part.owner_size(p));
  d.pull_bytes = bm_total + d.pull_rows * (d.isz + d.rb);
  d.msg_bytes = std::max<size_t>(encode::bitmap_bytes(d.m0), d.Kmax * d.isz) + d.Kmax * d.rb;
  d.hp.hash_functions = opt.hash_functions;
  d.hp.parallel_factor = opt.parallel_factor;
  d.hp.serial_fraction = opt.serial_fraction;
  return d;
}

struct Layout {
  // hashing
  void* hash_ws;
  size_t hash_ws_bytes;
  void* nz_ws;
  size_t nz_ws_bytes;
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
  size_t agg_ws_bytes;
  uint64_t* res_pos;
  uint8_t* res_val;
  uint64_t* num_runs;
  // pull
  uint8_t *flags, *msg, *all;
  void* bm_ws;
  size_t bm_ws_bytes;
  uint64_t* meta;  // 3 * (n + 1)
  uint8_t* setup;  // n * sizeof(SetupRecord) + 8
  size_t total;
};

Layout layout(void* base, const Dims& d) {
  Carve c{static_cast<uint8_t*>(base)};
  Layout L{};
  L.hash_ws_bytes = hash_partition_workspace(d.E, d.n, d.hp);
  L.hash_ws = c.take<uint8_t>(L.hash_ws_bytes);
  L.nz_ws_bytes = nonzero_rows_workspace(d.rows);
  L.nz_ws = c.take<uint8_t>(L.nz_ws_bytes);
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
  L.agg_ws_bytes = aggregate_workspace(d.Rc, d.m0);
  L.agg_ws = c.take<uint8_t>(L.agg_ws_bytes);
  L.res_pos = c.take<uint64_t>(d.Kmax);
  L.res_val = c.take<uint8_t>(d.Kmax * d.rb);
  L.num_runs = c.take<uint64_t>(1);
  L.flags = c.take<uint8_t>(d.m0);
  L.msg = c.take<uint8_t>(d.msg_bytes);
  L.all = c.take<uint8_t>(d.pull_bytes);
  L.bm_ws_bytes = bitmap_scatter_workspace(d.m0);
  L.bm_ws = c.take<uint8_t>(L.bm_ws_bytes);
  L.meta = c.take<uint64_t>(3 * (d.n + 1));
  L.setup = c.take<uint8_t>((d.n + 1) * sizeof(SetupRecord));
  L.total = c.bytes();
  return L;
}

// Pinned host staging for the counts the host must read.
struct Host {
  uint64_t* counts;
  uint64_t* rcounts;
  uint32_t* serial;
  uint64_t* scalars;  // [0] spilled, [1] nz count, [2] num_runs
  DeviceError* err;
  uint64_t* meta;     // 3 * (n + 1)
  uint8_t* setup;
};

}  // namespace

struct DeviceBalanced::Impl {
  Communicator& comm;
  TensorSpec spec;
  SchemeOptions opt;
  DeviceBalancedLimits lim;
  Partitioner part;
  Dims d;
  Layout L;
  Host h{};
  void* host_block = nullptr;
  void* owned_ws = nullptr;
  SyncReport report;
  uint64_t calls = 0;

  Impl(Communicator& c, const TensorSpec& s, const SchemeOptions& o, const DeviceBalancedLimits& l)
      : comm(c), spec(s), opt(o), lim(l) {}
  ~Impl() {
    if (owned_ws) cudaFree(owned_ws);
    if (host_block) cudaFreeHost(host_block);
  }

  cudaStream_t stream() const { return static_cast<cudaStream_t>(comm.stream()); }
  std::string where() const { return "rank " + std::to_string(comm.rank()) + " balanced(device): "; }
  void d2h(void* dst, const void* src, size_t bytes) {
    if (bytes) ZEN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream()));
  }
  void h2d(void* dst, const void* src, size_t bytes) {
    if (bytes) ZEN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()));
  }
  void wait() { stream_wait(comm, comm.stream()); }

  // Report (and clear) a device error read into h.err by the last synchronization.
  void check_device_error(const char* when) {
    const DeviceError e = *h.err;
    if (e.code == kErrNone) return;
    *h.err = DeviceError{};
    ZEN_CUDA_CHECK(cudaMemsetAsync(L.err, 0, sizeof(DeviceError), stream()));
    const std::string detail = std::string(device_error_name(e.code)) + " (owner/source " + std::to_string(e.owner) +
                               ", value " + std::to_string(e.a) + ", limit/expected " + std::to_string(e.b) + ", " + when + ")";
    if (e.code == kErrHashLost) ZEN_THROW(Result::InternalError, where() + detail);
    if (e.code == kErrIndexRange)
      ZEN_THROW(Result::InvalidArgument, where() + "input entry " + std::to_string(e.owner) + " has index " +
                                             std::to_string(static_cast<int64_t>(e.a)) + " outside [0, " + std::to_string(e.b) + ")");
    ZEN_THROW(Result::InvalidUsage, where() + detail + "; ranks disagree on N or the h0 seed, or a message was corrupted");
  }

  struct PhaseRec {
    PhaseRec(Impl& i, const char* name) : im(i), before(i.comm.stats()), t0(now_s()) { r.name = name; }
    ~PhaseRec() {
      TrafficStats dlt = im.comm.stats() - before;
      r.sent = dlt.total_sent();
      r.recv = dlt.total_recv();
      r.seconds = now_s() - t0;
      im.report.sent += r.sent;
      im.report.recv += r.recv;
      im.report.phases.push_back(r);
    }
    Impl& im;
    TrafficStats before;
    double t0;
    PhaseReport r;
  };

  void setup(void* d_ws, size_t ws_bytes) {
    ZEN_ENFORCE(comm.memory_space() == MemSpace::Device,
                where() + "communicator '" + comm.backend_name() + "' is not a device backend");
    ZEN_ENFORCE(spec.row_width >= 1 && spec.dense_len % spec.row_width == 0,
                where() + "dense length " + std::to_string(spec.dense_len) + " is not divisible by row width " +
                    std::to_string(spec.row_width));
    const int n = comm.size();
    // The device kernels code indices as COO or the hash bitmap (Auto picks between those two).
    ZEN_CHECK_CODE(opt.pull != PullEncoding::EliasFano && opt.push != IndexEncoding::EliasFano &&
                         opt.push != IndexEncoding::Bitmap,
                   Result::Unsupported,
                   where() + "Elias-Fano index coding (and a bitmap push) run on CPU plans only; device plans pull COO or "
                               "the hash bitmap and push COO");
    // Layout for sizing (the seed does not change any size).
    part = Partitioner::make(spec.dense_len / spec.row_width, static_cast<uint32_t>(n), opt.seed);
    d = dims(spec, n, opt, lim, part);
    L = layout(nullptr, d);
    if (d_ws) {
      ZEN_ENFORCE(ws_bytes >= L.total, where() + "workspace of " + std::to_string(ws_bytes) + " bytes is smaller than the " +
                                           std::to_string(L.total) + " bytes workspace_bytes() asks for");
    } else {
      ZEN_CUDA_CHECK(cudaMalloc(&owned_ws, L.total));
      d_ws = owned_ws;
    }
    L = layout(d_ws, d);
    const size_t hb = sizeof(uint64_t) * (3 * d.n + 3) + sizeof(uint32_t) * d.n + sizeof(DeviceError) + 16 +
                      sizeof(uint64_t) * 3 * (d.n + 1) + (d.n + 1) * sizeof(SetupRecord) + 128;
    ZEN_CUDA_CHECK(cudaMallocHost(&host_block, hb));
    auto* p = static_cast<uint8_t*>(host_block);
    auto take = [&](size_t bytes) {
      uint8_t* q = p;
      p += (bytes + 15) & ~size_t{15};
      return q;
    };
    h.counts = reinterpret_cast<uint64_t*>(take(8 * d.n));
    h.rcounts = reinterpret_cast<uint64_t*>(take(8 * d.n));
    h.serial = reinterpret_cast<uint32_t*>(take(4 * d.n));
    h.scalars = reinterpret_cast<uint64_t*>(take(8 * 3));
    h.err = reinterpret_cast<DeviceError*>(take(sizeof(DeviceError)));
    h.meta = reinterpret_cast<uint64_t*>(take(8 * 3 * (d.n + 1)));
    h.setup = take((d.n + 1) * sizeof(SetupRecord));
    *h.err = DeviceError{};
    ZEN_CUDA_CHECK(cudaMemsetAsync(L.err, 0, sizeof(DeviceError), stream()));

    // Agree on rank 0's seed, then check the spec everywhere (one broadcast + one allgather).
    std::memcpy(h.setup, &opt.seed, 8);
    h2d(L.setup, h.setup, 8);
    comm.broadcast(L.setup, 8, 0);
    d2h(h.setup, L.setup, 8);
    wait();
    std::memcpy(&opt.seed, h.setup, 8);
    SetupRecord mine{spec.dense_len, spec.row_width, static_cast<uint32_t>(spec.dtype)};
    std::memcpy(h.setup, &mine, sizeof mine);
    h2d(L.setup, h.setup, sizeof mine);
    std::vector<size_t> c(n, sizeof mine), dsp(n);
    for (int q = 0; q < n; ++q) dsp[q] = q * sizeof mine;
    comm.allgatherv(L.setup, sizeof mine, L.setup + sizeof mine, c.data(), dsp.data());
    d2h(h.setup, L.setup + sizeof mine, n * sizeof mine);
    wait();
    for (int q = 0; q < n; ++q) {
      SetupRecord o;
      std::memcpy(&o, h.setup + q * sizeof mine, sizeof o);
      if (o.dense_len != mine.dense_len || o.row_width != mine.row_width || o.dtype != mine.dtype)
        ZEN_THROW(Result::InvalidUsage, where() + "rank " + std::to_string(q) + " has N=" + std::to_string(o.dense_len) +
                                            " D=" + std::to_string(o.row_width) + " dtype=" + dtype_name(static_cast<DType>(o.dtype)) +
                                            " but this rank has N=" + std::to_string(mine.dense_len) + " D=" +
                                            std::to_string(mine.row_width) + " dtype=" + dtype_name(spec.dtype));
    }
    part = Partitioner::make(spec.dense_len / spec.row_width, static_cast<uint32_t>(n), opt.seed);
    d.hp.seed = opt.seed ^ (0x51ed2701ULL * static_cast<uint64_t>(comm.rank() + 1));  // the CPU scheme's h_1..h_k seed
  }

  void run(const void* indices, IndexType it, size_t nnz, const void* values, const int64_t* value_row, void* d_out) {
    const int n = comm.size(), me = comm.rank();
    cudaStream_t s = stream();
    ZEN_ENFORCE(nnz <= d.E, where() + "input has " + std::to_string(nnz) + " rows, more than max_nnz " + std::to_string(d.E) +
                                " the workspace was sized for");
    // 1. Hash partition.
    {
      PhaseRec ph(*this, "hash");
      hash_partition(indices, it, nnz, part, d.hp, L.hash_ws, L.hash_ws_bytes, L.entry, L.pos, L.counts, L.serial,
                     L.spilled, L.err, s);
    }
    // 2. Counts: alltoall of 8-byte counts, then host sync #1.
    {
      PhaseRec ph(*this, "counts");
      std::vector<size_t> c8(n, 8), d8(n);
      for (int p = 0; p < n; ++p) d8[p] = 8 * static_cast<size_t>(p);
      comm.alltoallv(L.counts, c8.data(), d8.data(), L.rcounts, c8.data(), d8.data());
      d2h(h.counts, L.counts, 8 * n);
      d2h(h.rcounts, L.rcounts, 8 * n);
      d2h(h.serial, L.serial, 4 * n);
      d2h(&h.scalars[0], L.spilled, 8);
      d2h(h.err, L.err, sizeof(DeviceError));
      wait();
      check_device_error(calls ? "found at the start of this call: from hashing, or from the previous call's decode"
                               : "found after hashing");
    }
    const HashCaps caps = hash_caps(nnz, static_cast<uint32_t>(n), d.hp);
    report.serial_overflows = 0;
    for (int p = 0; p < n; ++p) report.serial_overflows += h.serial[p] > caps.cap2 ? 1 : 0;
    std::vector<size_t> sbytes(n), sdispl(n), rbytes(n), rdispl(n);
    size_t stotal = 0, rtotal = 0;
    uint64_t received = 0;
    for (int p = 0; p < n; ++p) {
      sbytes[p] = h.counts[p] * d.eb;
      sdispl[p] = stotal;
      stotal += sbytes[p];
      rbytes[p] = h.rcounts[p] * d.eb;
      rdispl[p] = rtotal;
      rtotal += rbytes[p];
      received += h.rcounts[p];
    }
    if (received > d.Rc)
      ZEN_THROW(Result::InvalidArgument, where() + "the push delivers " + std::to_string(received) +
                                             " entries to this rank, more than recv_capacity " + std::to_string(d.Rc) +
                                             " (raise DeviceBalancedLimits::recv_capacity)");
    // 3. Push: pack (device displacements computed from the same counts), alltoallv.
    {
      segment_displacements(L.counts, static_cast<uint32_t>(n), d.eb, L.sdispl, L.item_off, s);
      pack_push(L.entry, L.pos, nnz, L.item_off, L.sdispl, static_cast<uint32_t>(n), values, value_row, d.D, spec.dtype,
                static_cast<int>(d.isz), L.sbuf, s);
      PhaseRec ph(*this, "push");
      comm.alltoallv(L.sbuf, sbytes.data(), sdispl.data(), L.rbuf, rbytes.data(), rdispl.data());
    }
    // 4. Owner sums in compact per-owner space; host sync #2 for K.
    const uint64_t m = part.owner_size(static_cast<uint32_t>(me));
    {
      PhaseRec ph(*this, "aggregate");
      segment_displacements(L.rcounts, static_cast<uint32_t>(n), d.eb, L.rdispl, nullptr, s);
      owner_aggregate(L.rbuf, L.rcounts, L.rdispl, static_cast<uint32_t>(n), received, m, d.D, spec.dtype,
                      static_cast<int>(d.isz), L.agg_ws, L.agg_ws_bytes, L.res_pos, L.res_val, L.num_runs, L.err, s);
      d2h(&h.scalars[2], L.num_runs, 8);
      d2h(h.err, L.err, sizeof(DeviceError));
      wait();
      check_device_error("found by the owner aggregation");
    }
    const uint64_t K = h.scalars[2];
    // 5. Pull encoding choice and meta exchange (host sync #3).
    const size_t bitmap_b = encode::bitmap_bytes(m), coo_b = K * d.isz;
    const bool use_bitmap = opt.pull == PullEncoding::Bitmap || (opt.pull == PullEncoding::Auto && bitmap_b < coo_b);
    {
      PhaseRec ph(*this, "meta");
      OwnerMeta mine{K, received, use_bitmap ? 1u : 0u};
      std::memcpy(h.meta, &mine, sizeof mine);
      h2d(L.meta, h.meta, sizeof mine);
      std::vector<size_t> c(n, sizeof mine), dsp(n);
      for (int p = 0; p < n; ++p) dsp[p] = p * sizeof mine;
      comm.allgatherv(L.meta, sizeof mine, L.meta + 3, c.data(), dsp.data());
      d2h(h.meta + 3, L.meta + 3, n * sizeof mine);
      wait();
    }
    std::vector<OwnerMeta> meta(n);
    std::memcpy(meta.data(), h.meta + 3, n * sizeof(OwnerMeta));
    std::vector<size_t> pbytes(n), pdispl(n);
    size_t ptotal = 0;
    uint64_t total_rows = 0;
    std::vector<uint64_t> pushed(n), results(n);
    int nbitmap = 0;
    for (int p = 0; p < n; ++p) {
      const uint64_t mp = part.owner_size(static_cast<uint32_t>(p));
      if (meta[p].result_rows > mp)
        ZEN_THROW(Result::InvalidUsage, where() + "owner " + std::to_string(p) + " announced " +
                                            std::to_string(meta[p].result_rows) + " result rows for an index set of " +
                                            std::to_string(mp));
      pbytes[p] = (meta[p].encoding ? encode::bitmap_bytes(mp) : meta[p].result_rows * d.isz) + meta[p].result_rows * d.rb;
      pdispl[p] = ptotal;
      ptotal += pbytes[p];
      total_rows += meta[p].result_rows;
      pushed[p] = meta[p].pushed_rows;
      results[p] = meta[p].result_rows;
      nbitmap += meta[p].encoding ? 1 : 0;
    }
    if (ptotal > d.pull_bytes)
      ZEN_THROW(Result::InvalidArgument, where() + "the pull needs " + std::to_string(ptotal) + " bytes (" +
                                             std::to_string(total_rows) + " result rows), more than the " +
                                             std::to_string(d.pull_bytes) + " sized by pull_rows (raise DeviceBalancedLimits::pull_rows)");
    report.push_imbalance = imbalance(pushed);
    report.pull_imbalance = imbalance(results);
    report.encoding = nbitmap == 0 ? "coo" : (nbitmap == n ? "bitmap" : "mixed");
    report.result_nnz = total_rows;
    // 6. Encode this owner's message and allgatherv.
    if (use_bitmap) {
      bitmap_encode(L.res_pos, K, m, L.flags, L.msg, s);
      if (K) ZEN_CUDA_CHECK(cudaMemcpyAsync(L.msg + bitmap_b, L.res_val, K * d.rb, cudaMemcpyDeviceToDevice, s));
    } else {
      coo_encode_keys(L.res_pos, K, static_cast<int>(d.isz), L.msg, s);
      if (K) ZEN_CUDA_CHECK(cudaMemcpyAsync(L.msg + coo_b, L.res_val, K * d.rb, cudaMemcpyDeviceToDevice, s));
    }
    {
      PhaseRec ph(*this, "pull");
      comm.allgatherv(L.msg, pbytes[me], L.all, pbytes.data(), pdispl.data());
    }
    // 7. Decode every owner's part into the dense output (left enqueued).
    {
      PhaseRec ph(*this, "decode");
      if (spec.dense_len) ZEN_CUDA_CHECK(cudaMemsetAsync(d_out, 0, spec.dense_len * d.vs, s));
      for (int p = 0; p < n; ++p) {
        const uint8_t* msg = L.all + pdispl[p];
        const uint64_t mp = part.owner_size(static_cast<uint32_t>(p));
        if (meta[p].encoding)
          bitmap_scatter(msg, mp, msg + encode::bitmap_bytes(mp), meta[p].result_rows, part, static_cast<uint32_t>(p), d.D,
                         spec.dtype, d_out, L.bm_ws, L.bm_ws_bytes, L.err, s);
        else
          coo_scatter(msg, meta[p].result_rows, static_cast<int>(d.isz), msg + meta[p].result_rows * d.isz, part,
                      static_cast<uint32_t>(p), d.D, spec.dtype, d_out, L.err, s);
      }
    }
    ++calls;
  }
};

size_t DeviceBalanced::workspace_bytes(const TensorSpec& spec, int n, const SchemeOptions& opt, const DeviceBalancedLimits& lim) {
  ZEN_ENFORCE(n >= 1, "DeviceBalanced::workspace_bytes: rank count " + std::to_string(n) + " must be >= 1");
  ZEN_ENFORCE(spec.row_width >= 1, "DeviceBalanced::workspace_bytes: row width must be >= 1");
  const Partitioner part = Partitioner::make(spec.dense_len / spec.row_width, static_cast<uint32_t>(n), opt.seed);
  return layout(nullptr, dims(spec, n, opt, lim, part)).total;
}

DeviceBalanced::DeviceBalanced(Communicator& comm, const TensorSpec& spec, const SchemeOptions& opt,
                               const DeviceBalancedLimits& lim, void* d_workspace, size_t workspace_bytes)
    : impl_(std::make_unique<Impl>(comm, spec, opt, lim)) {
  impl_->setup(d_workspace, workspace_bytes);
}

DeviceBalanced::~DeviceBalanced() {
  if (impl_ && impl_->comm.stream() != nullptr) cudaStreamSynchronize(impl_->stream());
}

void DeviceBalanced::run_dense(const SparseView& in, void* d_out) {
  Impl& im = *impl_;
  const std::string w = im.where();
  ZEN_ENFORCE(in.space == MemSpace::Device, w + "input is not marked as device memory (SparseView::space)");
  ZEN_ENFORCE(in.dense_len == im.spec.dense_len && in.row_width == im.spec.row_width && in.dtype == im.spec.dtype,
              w + "input N=" + std::to_string(in.dense_len) + " D=" + std::to_string(in.row_width) + " dtype=" +
                  dtype_name(in.dtype) + " differs from the scheme's N=" + std::to_string(im.spec.dense_len) + " D=" +
                  std::to_string(im.spec.row_width) + " dtype=" + dtype_name(im.spec.dtype));
  ZEN_ENFORCE(in.index_type == IndexType::I64 || im.d.rows <= (uint64_t{1} << 31),
              w + "int32 indices need N/D <= 2^31, got " + std::to_string(im.d.rows));
  im.report = SyncReport{};
  const double t0 = now_s();
  im.run(in.indices, in.index_type, in.nnz, in.values, nullptr, d_out);
  im.report.seconds = now_s() - t0;
}

void DeviceBalanced::run_dense_from_dense(const void* d_grad, void* d_out) {
  Impl& im = *impl_;
  im.report = SyncReport{};
  const double t0 = now_s();
  cudaStream_t s = im.stream();
  // Extra host sync (a count): the number of non-zero rows must fit the workspace.
  {
    Impl::PhaseRec ph(im, "scan");
    count_nonzero_rows(d_grad, im.spec.dtype, im.d.rows, im.d.D, im.L.nz_count, im.L.nz_ws, im.L.nz_ws_bytes, s);
    im.d2h(&im.h.scalars[1], im.L.nz_count, 8);
    im.wait();
    if (im.h.scalars[1] > im.d.E)
      ZEN_THROW(Result::InvalidArgument, im.where() + "the dense gradient has " + std::to_string(im.h.scalars[1]) +
                                             " non-zero rows, more than max_nnz " + std::to_string(im.d.E));
    nonzero_rows(d_grad, im.spec.dtype, im.d.rows, im.d.D, im.L.rows_list, im.L.nz_count, im.L.nz_ws, im.L.nz_ws_bytes, s);
  }
  im.run(im.L.rows_list, IndexType::I64, im.h.scalars[1], d_grad, im.L.rows_list, d_out);
  im.report.seconds = now_s() - t0;
}

void DeviceBalanced::synchronize() {
  Impl& im = *impl_;
  im.d2h(im.h.err, im.L.err, sizeof(DeviceError));
  im.wait();
  im.check_device_error("found by the decode of the last call");
}

const SyncReport& DeviceBalanced::report() const { return impl_->report; }
const TensorSpec& DeviceBalanced::spec() const { return impl_->spec; }
Communicator& DeviceBalanced::comm() { return impl_->comm; }

}  // namespace zen::cuda
