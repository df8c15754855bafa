#pragma once
// Helpers of the GPU tests: the device tests' helpers (tests/device/device_test_util.hpp: skip or,
// with ZEN_GPU_REQUIRED, fail without a GPU; buffers of a backend) and a host-staging adapter that
// lets the host communicator suite (tests/core/comm_suite.hpp) drive a device communicator.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../device/device_test_util.hpp"
#include "zen/cuda/comm.hpp"
#include "zen/cuda/runtime.hpp"

#define ZEN_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr << ": " << cudaGetErrorString(cudaGetLastError())

namespace zen::test {

using DevBuf = Buf<cuda::Gpu>;

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
