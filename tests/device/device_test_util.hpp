#pragma once
// Helpers of the device-path tests, for either backend: the tests of tests/device are templates over
// zen::test::TestBackend, which each test binary defines before including them (cuda::Host in
// tests/device: the kernels and device plans on the CPU, in every build and in CI; cuda::Gpu in
// tests/cuda: the same tests on a GPU, skipped without one).
//
// ZEN_GPU_REQUIRED=1 (scripts/gpu_check.sh --run sets it on a GPU machine) turns every skip for want
// of a GPU or of NCCL into a failure: there a skip must not pass for a success.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "zen/comm/loopback.hpp"
#include "zen/cuda/comm.hpp"
#include "zen/cuda/kernels.hpp"
#include "zen/cuda/runtime.hpp"
#include "zen/schemes/hierarchical.hpp"

namespace zen::test {

/// True when ZEN_GPU_REQUIRED is set to anything but "" or "0".
inline bool gpu_required() {
  const char* e = std::getenv("ZEN_GPU_REQUIRED");
  return e && *e && std::string(e) != "0";
}

}  // namespace zen::test

/// Skip the test with `why`, or fail it when ZEN_GPU_REQUIRED is set.
#define ZEN_SKIP_OR_FAIL(why)                                                     \
  do {                                                                            \
    const std::string zen_why_ = (why);                                           \
    if (::zen::test::gpu_required()) {                                            \
      FAIL() << "ZEN_GPU_REQUIRED is set, but the test would skip: " << zen_why_; \
    } else {                                                                      \
      GTEST_SKIP() << zen_why_;                                                   \
    }                                                                             \
  } while (0)

/// Skip (or, with ZEN_GPU_REQUIRED, fail) unless a CUDA device is usable.
#define ZEN_REQUIRE_GPU()                                                         \
  do {                                                                            \
    std::string zen_dev_why_;                                                     \
    if (::zen::cuda::device_count(&zen_dev_why_) == 0) ZEN_SKIP_OR_FAIL("no GPU: " + zen_dev_why_); \
  } while (0)

/// Skip (or fail) unless the test backend can run here (always for Host, a GPU for Gpu).
#define ZEN_REQUIRE_BACKEND()                                                     \
  do {                                                                            \
    if (std::is_same_v<::zen::test::TestBackend, ::zen::cuda::Gpu>) ZEN_REQUIRE_GPU(); \
  } while (0)

namespace zen::test {

/// A buffer in the memory of backend B (device memory for Gpu), freed on destruction. upload /
/// fill / download wait for the copy (on the GPU: the whole device, since the communicators'
/// non-blocking streams do not order after the legacy stream).
template <class B>
class Buf {
 public:
  Buf() = default;
  explicit Buf(size_t bytes) { resize(bytes); }
  ~Buf() { cuda::Memory<B>::release(p_); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  Buf(Buf&& o) noexcept : p_(o.p_), n_(o.n_) {
    o.p_ = nullptr;
    o.n_ = 0;
  }
  Buf& operator=(Buf&& o) noexcept {
    if (this != &o) {
      cuda::Memory<B>::release(p_);
      p_ = o.p_;
      n_ = o.n_;
      o.p_ = nullptr;
      o.n_ = 0;
    }
    return *this;
  }
  void resize(size_t bytes) {
    cuda::Memory<B>::release(p_);
    p_ = nullptr;
    n_ = bytes;
    p_ = cuda::Memory<B>::alloc(std::max<size_t>(bytes, 1));
  }
  template <typename T = void>
  T* get() const {
    return static_cast<T*>(p_);
  }
  uint8_t* bytes() const { return static_cast<uint8_t*>(p_); }
  size_t size() const { return n_; }
  void upload(const void* h, size_t bytes, size_t off = 0) {
    if (bytes) cuda::Memory<B>::copy(this->bytes() + off, h, bytes, nullptr);
    cuda::Memory<B>::synchronize(nullptr);
  }
  void fill(int byte) {
    cuda::Memory<B>::fill(p_, byte, std::max<size_t>(n_, 1), nullptr);
    cuda::Memory<B>::synchronize(nullptr);
  }
  void download(void* h, size_t bytes, size_t off = 0) const {
    if (bytes) cuda::Memory<B>::copy(h, this->bytes() + off, bytes, nullptr);
    cuda::Memory<B>::synchronize(nullptr);
  }
  template <typename T>
  static Buf from(const std::vector<T>& v) {
    Buf b(v.size() * sizeof(T));
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
  void* p_ = nullptr;
  size_t n_ = 0;
};

/// How the tests run ranks on backend B: Host on the host loopback (threads), Gpu on the device
/// loopback (threads, one stream each, one GPU).
template <class B>
struct Ranks;
template <>
struct Ranks<cuda::Host> {
  static constexpr MemSpace space = MemSpace::Host;
  static void run(int n, const std::function<void(Communicator&)>& fn) { loopback::run(n, fn); }
  static std::vector<std::exception_ptr> run_collect(int n, const std::function<void(Communicator&)>& fn) {
    return loopback::run_collect(n, fn);
  }
  /// Simulated nodes of `node_size` consecutive ranks: world, intra (the node) and inter (the ranks
  /// with this local index), the latter two as sub-communicators of the world.
  static void run_nodes(int n, int node_size, const cuda::loopback::NodeFn& fn) {
    loopback::run(n, [&](Communicator& world) {
      NodeComms c = split_nodes(world, node_size);
      fn(world, *c.intra, *c.inter);
    });
  }
  static void wait(Communicator&) {}
};
template <>
struct Ranks<cuda::Gpu> {
  static constexpr MemSpace space = MemSpace::Device;
  static void run(int n, const std::function<void(Communicator&)>& fn) { cuda::loopback::run(n, fn); }
  static std::vector<std::exception_ptr> run_collect(int n, const std::function<void(Communicator&)>& fn) {
    return cuda::loopback::run_collect(n, fn);
  }
  static void run_nodes(int n, int node_size, const cuda::loopback::NodeFn& fn) {
    cuda::loopback::run_nodes(n, node_size, fn);
  }
  static void wait(Communicator& c) { cuda::stream_wait(c, c.stream()); }
};

}  // namespace zen::test
