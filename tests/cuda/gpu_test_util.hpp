#pragma once
// Helpers of the GPU tests: skip without a GPU, RAII device buffers, and a host-staging adapter
// that lets the host communicator suite (tests/core/comm_suite.hpp) drive a device communicator.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "zen/cuda/comm.hpp"
#include "zen/cuda/runtime.hpp"

#define ZEN_REQUIRE_GPU()                                                      \
  do {                                                                         \
    std::string why_;                                                          \
    if (zen::cuda::device_count(&why_) == 0) GTEST_SKIP() << "no GPU: " << why_; \
  } while (0)

#define ZEN_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr << ": " << cudaGetErrorString(cudaGetLastError())

namespace zen::test {

/// Device buffer (bytes), freed on destruction; throws zen::Error when cudaMalloc fails.
class DevBuf {
 public:
  DevBuf() = default;
  explicit DevBuf(size_t bytes) { resize(bytes); }
  ~DevBuf() {
    if (p_) cudaFree(p_);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf(DevBuf&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr; o.n_ = 0; }
  DevBuf& operator=(DevBuf&& o) noexcept {
    if (this != &o) {
      if (p_) cudaFree(p_);
      p_ = o.p_;
      n_ = o.n_;
      o.p_ = nullptr;
      o.n_ = 0;
    }
    return *this;
  }
  void resize(size_t bytes) {
    if (p_) cudaFree(p_);
    p_ = nullptr;
    n_ = bytes;
    const cudaError_t e = cudaMalloc(&p_, std::max<size_t>(bytes, 1));
    if (e != cudaSuccess) ZEN_THROW(Result::CudaError, std::string("cudaMalloc(") + std::to_string(bytes) + "): " + cudaGetErrorString(e));
  }
  template <typename T = void>
  T* get() const { return static_cast<T*>(p_); }
  uint8_t* bytes() const { return static_cast<uint8_t*>(p_); }
  size_t size() const { return n_; }
  // cudaMemcpy from pageable memory and cudaMemset may return before the device copy is done,
  // and the non-blocking streams of the device communicators do not order after the legacy
  // stream: synchronize so that the data is in place for any stream.
  void upload(const void* h, size_t bytes, size_t off = 0) {
    if (bytes) check(cudaMemcpy(bytes_at(off), h, bytes, cudaMemcpyHostToDevice));
    check(cudaDeviceSynchronize());
  }
  void fill(int byte) {
    check(cudaMemset(p_, byte, std::max<size_t>(n_, 1)));
    check(cudaDeviceSynchronize());
  }
  void download(void* h, size_t bytes, size_t off = 0) const {
    if (bytes) check(cudaMemcpy(h, static_cast<uint8_t*>(p_) + off, bytes, cudaMemcpyDeviceToHost));
  }
  template <typename T>
  static DevBuf from(const std::vector<T>& v) {
    DevBuf b(v.size() * sizeof(T));
    b.upload(v.data(), v.size() * sizeof(T));
    return b;
  }
  template <typename T>
  std::vector<T> to_vector(size_t count) const {
    std::vector<T> v(count);
    download(v.data(), count * sizeof(T));
    return v;
  }

 private:
  uint8_t* bytes_at(size_t off) { return static_cast<uint8_t*>(p_) + off; }
  static void check(cudaError_t e) {
    if (e != cudaSuccess) ZEN_THROW(Result::CudaError, std::string("cudaMemcpy: ") + cudaGetErrorString(e));
  }
  void* p_ = nullptr;
  size_t n_ = 0;
};

/// A host communicator that stages every buffer through device memory and runs the operation on a
/// device communicator (on its stream), then waits and copies back.
class StagedComm final : public Communicator {
 public:
  explicit StagedComm(Communicator& dev) : d_(dev) { timeout_ = dev.timeout(); }
  int rank() const override { return d_.rank(); }
  int size() const override { return d_.size(); }
  const char* backend_name() const override { return "staged"; }

 protected:
  void do_send(const void* buf, size_t bytes, int peer, int tag) override {
    DevBuf b(bytes);
    b.upload(buf, bytes);
    d_.send(b.get(), bytes, peer, tag);
    sync();
  }
  void do_recv(void* buf, size_t bytes, int peer, int tag) override {
    DevBuf b(bytes);
    d_.recv(b.get(), bytes, peer, tag);
    sync();
    b.download(buf, bytes);
  }
  void do_sendrecv(const void* sbuf, size_t sbytes, int dst, void* rbuf, size_t rbytes, int src, int tag) override {
    DevBuf s(sbytes), r(rbytes);
    s.upload(sbuf, sbytes);
    d_.sendrecv(s.get(), sbytes, dst, r.get(), rbytes, src, tag);
    sync();
    r.download(rbuf, rbytes);
  }
  void do_alltoallv(const void* sbuf, const size_t* sc, const size_t* sd, void* rbuf, const size_t* rc,
                    const size_t* rd) override {
    size_t st = 0, rt = 0;
    for (int p = 0; p < size(); ++p) {
      st = std::max(st, sd[p] + sc[p]);
      rt = std::max(rt, rd[p] + rc[p]);
    }
    DevBuf s(st), r(rt);
    s.upload(sbuf, st);
    r.upload(rbuf, rt);  // keep bytes the operation does not write
    d_.alltoallv(s.get(), sc, sd, r.get(), rc, rd);
    sync();
    r.download(rbuf, rt);
  }
  void do_allgatherv(const void* sbuf, size_t sbytes, void* rbuf, const size_t* rc, const size_t* rd) override {
    size_t rt = 0;
    for (int p = 0; p < size(); ++p) rt = std::max(rt, rd[p] + rc[p]);
    DevBuf s(sbytes), r(rt);
    s.upload(sbuf, sbytes);
    r.upload(rbuf, rt);
    d_.allgatherv(s.get(), sbytes, r.get(), rc, rd);
    sync();
    r.download(rbuf, rt);
  }
  void do_allreduce(void* buf, size_t count, DType dtype, ReduceOp op) override {
    const size_t bytes = count * dtype_size(dtype);
    DevBuf b(bytes);
    b.upload(buf, bytes);
    d_.allreduce(b.get(), count, dtype, op);
    sync();
    b.download(buf, bytes);
  }
  void do_broadcast(void* buf, size_t bytes, int root) override {
    DevBuf b(bytes);
    b.upload(buf, bytes);
    d_.broadcast(b.get(), bytes, root);
    sync();
    b.download(buf, bytes);
  }
  void do_barrier() override { d_.barrier(); }

 private:
  void sync() { zen::cuda::stream_wait(d_, d_.stream()); }
  Communicator& d_;
};

}  // namespace zen::test
