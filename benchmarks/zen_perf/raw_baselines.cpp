// The raw-MPI baselines (raw_baselines.hpp): what each does and the bytes it moves, counted as zen
// counts its own.
#include "raw_baselines.hpp"

#include <algorithm>
#include <cstring>

#include "../../src/comm/ring_chunk.hpp"  // private: the ring split the traffic counts follow
#include "zen/comm/communicator.hpp"
#include "zen/error.hpp"

namespace zen_perf {

using namespace zen;

const std::vector<std::string>& raw_names() {
  static const std::vector<std::string> v{"mpi_allreduce", "mpi_allgatherv"};
  return v;
}
bool is_raw(const std::string& s) { return std::find(raw_names().begin(), raw_names().end(), s) != raw_names().end(); }


#ifdef ZEN_HAVE_MPI
MPI_Datatype raw_value_type(DType t) {
  if (t == DType::F32) return MPI_FLOAT;
  if (t == DType::F64) return MPI_DOUBLE;
  ZEN_THROW(Result::Unsupported, std::string("the raw MPI baselines support f32 and f64 (MPI has no ") + dtype_name(t) + " type)");
}

namespace {

// A plain MPI_Allreduce on the dense gradient: zero a dense buffer, scatter-add the local rows,
// MPI_Allreduce in place. Its result is the dense sum whatever --output says.
class RawAllreduce final : public RawBaseline {
 public:
  void run(const SparseView& in, bool, void* dense, SparseTensor&) override {
    const MPI_Datatype mt = raw_value_type(in.dtype);
    const uint64_t N = in.dense_len;
    const size_t D = in.row_width;
    dispatch_dtype(in.dtype, [&](auto tag) {
      using T = decltype(tag);
      T* d = static_cast<T*>(dense);
      if (N) std::memset(static_cast<void*>(d), 0, N * sizeof(T));
      const T* v = static_cast<const T*>(in.values);
      for (size_t i = 0; i < in.nnz; ++i) {
        T* row = d + static_cast<size_t>(in.index_at(i)) * D;
        for (size_t c = 0; c < D; ++c) row[c] += v[i * D + c];
      }
      const size_t per = size_t{1} << 30;
      for (uint64_t off = 0; off < N; off += per)
        MPI_Allreduce(MPI_IN_PLACE, d + off, static_cast<int>(std::min<uint64_t>(per, N - off)), mt, MPI_SUM, MPI_COMM_WORLD);
    });
    int n = 1, r = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    const size_t vs = dtype_size(in.dtype), S = N * vs;
    sent = recv = n > 1 ? 2 * (S - ring_chunk_bytes(N, vs, n, r)) : 0;
  }
};

// The hand-written sparse exchange (what ten lines of mpi4py do): MPI_Allgather of the counts,
// MPI_Allgatherv of the indices and of the values, then a local scatter-add in rank order. Dense
// output: into the zeroed dense buffer. Sparse output: into a dense accumulator kept across calls,
// whose touched rows are collected, sorted, gathered and cleared.
class RawAllgatherv final : public RawBaseline {
 public:
  void run(const SparseView& in, bool dense_out, void* dense, SparseTensor& sparse) override {
    int n = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const MPI_Datatype mt = raw_value_type(in.dtype);
    const MPI_Datatype it = in.index_type == IndexType::I32 ? MPI_INT32_T : MPI_INT64_T;
    const size_t isz = index_size(in.index_type), D = in.row_width, vs = dtype_size(in.dtype);
    const int64_t mine = static_cast<int64_t>(in.nnz);
    counts64_.resize(static_cast<size_t>(n));
    MPI_Allgather(&mine, 1, MPI_INT64_T, counts64_.data(), 1, MPI_INT64_T, MPI_COMM_WORLD);
    counts_.resize(static_cast<size_t>(n));
    displs_.resize(static_cast<size_t>(n));
    vcounts_.resize(static_cast<size_t>(n));
    vdispls_.resize(static_cast<size_t>(n));
    size_t total = 0;
    for (int p = 0; p < n; ++p) {
      counts_[p] = static_cast<int>(counts64_[p]);
      displs_[p] = static_cast<int>(total);
      vcounts_[p] = static_cast<int>(counts64_[p] * static_cast<int64_t>(D));
      vdispls_[p] = static_cast<int>(total * D);
      total += static_cast<size_t>(counts64_[p]);
    }
    if (idx_.size() < total * isz) idx_.resize(total * isz);
    if (val_.size() < total * D * vs) val_.resize(total * D * vs);
    MPI_Allgatherv(in.indices, static_cast<int>(mine), it, idx_.data(), counts_.data(), displs_.data(), it, MPI_COMM_WORLD);
    MPI_Allgatherv(in.values, static_cast<int>(mine * static_cast<int64_t>(D)), mt, val_.data(), vcounts_.data(),
                   vdispls_.data(), mt, MPI_COMM_WORLD);
    auto row_of = [&](size_t i) -> size_t {
      if (in.index_type == IndexType::I32) return static_cast<size_t>(reinterpret_cast<const int32_t*>(idx_.data())[i]);
      return static_cast<size_t>(reinterpret_cast<const int64_t*>(idx_.data())[i]);
    };
    const uint64_t N = in.dense_len, R = N / D;
    dispatch_dtype(in.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T* v = reinterpret_cast<const T*>(val_.data());
      if (dense_out) {
        T* d = static_cast<T*>(dense);
        if (N) std::memset(static_cast<void*>(d), 0, N * sizeof(T));
        for (size_t i = 0; i < total; ++i)
          for (size_t c = 0; c < D; ++c) d[row_of(i) * D + c] += v[i * D + c];
        return;
      }
      if (acc_.size() < N * sizeof(T)) acc_.assign(N * sizeof(T), 0);
      if (touched_.size() < R) touched_.assign(R, 0);
      T* acc = reinterpret_cast<T*>(acc_.data());
      rows_.clear();
      for (size_t i = 0; i < total; ++i) {
        const size_t row = row_of(i);
        if (!touched_[row]) {
          touched_[row] = 1;
          rows_.push_back(static_cast<int64_t>(row));
        }
        for (size_t c = 0; c < D; ++c) acc[row * D + c] += v[i * D + c];
      }
      std::sort(rows_.begin(), rows_.end());
      sparse.dense_len = N;
      sparse.row_width = static_cast<uint32_t>(D);
      sparse.dtype = in.dtype;
      sparse.resize(rows_.size());
      T* out = sparse.vals<T>();
      for (size_t k = 0; k < rows_.size(); ++k) {
        const size_t row = static_cast<size_t>(rows_[k]);
        sparse.indices[k] = rows_[k];
        for (size_t c = 0; c < D; ++c) {
          out[k * D + c] = acc[row * D + c];
          acc[row * D + c] = T(0);
        }
        touched_[row] = 0;
      }
    });
    const size_t eb = isz + D * vs;
    sent = 8 * static_cast<uint64_t>(n - 1) + static_cast<uint64_t>(n - 1) * in.nnz * eb;
    recv = 8 * static_cast<uint64_t>(n - 1) + (total - in.nnz) * eb;
  }

 private:
  std::vector<int64_t> counts64_;
  std::vector<int> counts_, displs_, vcounts_, vdispls_;
  std::vector<uint8_t> idx_, val_, acc_, touched_;
  std::vector<int64_t> rows_;
};
}  // namespace

std::unique_ptr<RawBaseline> make_raw(const std::string& name) {
  if (name == "mpi_allreduce") return std::make_unique<RawAllreduce>();
  return std::make_unique<RawAllgatherv>();
}
#endif

}  // namespace zen_perf
