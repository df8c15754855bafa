// The device plans on the CPU: DeviceBalanced and DeviceHierarchical over the host loopback run the
// device kernels on host memory (Kernels<Host>) and must equal the CPU schemes bit for bit, at
// n = 1..8 (one ctest process per rank count), both index widths, all dtypes. The same suites run
// on a GPU as tests/cuda/test_device_balanced.cpp and test_device_hierarchical.cpp. Also here:
// host plans refuse device memory, and make_device_plan's names, which follow the registry rows' flag
// kDevicePlan (src/schemes/scheme_row.hpp).
#include <gtest/gtest.h>

#include "zen/cuda/kernels.hpp"
namespace zen::test {
using TestBackend = cuda::Host;
}  // namespace zen::test

#include "balanced_suite.hpp"
#include "hierarchical_suite.hpp"
#include "scheme_row.hpp"  // src/schemes (private): the rows and their kDevicePlan flag
#include "zen/cuda/plan.hpp"

using namespace zen;

namespace zen::test::balanced {
INSTANTIATE_TEST_SUITE_P(Ranks, DeviceBalancedMatrix, ::testing::Range(1, 9));
}  // namespace zen::test::balanced

namespace {

// A host loopback communicator that says its buffers are device memory (as NCCL and the device
// loopback do): what host code must not touch.
class DeviceMemoryComm final : public Communicator {
 public:
  explicit DeviceMemoryComm(Communicator& c) : c_(c) {}
  int rank() const override { return c_.rank(); }
  int size() const override { return c_.size(); }
  const char* backend_name() const override { return "device-memory"; }
  MemSpace memory_space() const override { return MemSpace::Device; }

 protected:
  void do_send(const void* b, size_t n, int p, int t) override { c_.send(b, n, p, t); }
  void do_recv(void* b, size_t n, int p, int t) override { c_.recv(b, n, p, t); }
  void do_sendrecv(const void* s, size_t sn, int d, void* r, size_t rn, int src, int t) override {
    c_.sendrecv(s, sn, d, r, rn, src, t);
  }
  void do_alltoallv(const void* s, const size_t* sc, const size_t* sd, void* r, const size_t* rc,
                    const size_t* rd) override {
    c_.alltoallv(s, sc, sd, r, rc, rd);
  }
  void do_allgatherv(const void* s, size_t sb, void* r, const size_t* rc, const size_t* rd) override {
    c_.allgatherv(s, sb, r, rc, rd);
  }
  void do_allreduce(void* b, size_t n, DType t, ReduceOp op) override { c_.allreduce(b, n, t, op); }
  void do_broadcast(void* b, size_t n, int root) override { c_.broadcast(b, n, root); }
  void do_barrier() override { c_.barrier(); }

 private:
  Communicator& c_;
};

void expect_unsupported(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "accepted; expected Unsupported mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Result::Unsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace

// Host plans run host loops over their buffers: on a communicator holding device memory every
// entry point refuses before touching a buffer, naming the rank and the scheme.
TEST(DeviceMemory, HostPlansAndHostLoopsRefuseIt) {
  loopback::run(2, [](Communicator& host) {
    DeviceMemoryComm dev(host);
    const TensorSpec spec{100, 1, DType::F32};
    for (const std::string& name : scheme_names())
      expect_unsupported([&] { make_scheme(name, dev, spec); }, "scheme '" + name + "'");
    expect_unsupported([&] { make_scheme("auto", dev, spec); }, "scheme 'auto'");
    expect_unsupported([&] { make_hierarchical(dev, spec, SchemeOptions{}, HierarchicalOptions{1, "balanced"}); },
                       "hierarchical");
    expect_unsupported([&] { make_hierarchical(dev, dev, dev, spec, SchemeOptions{}, "balanced"); }, "hierarchical");
    uint8_t bits[8] = {};
    float sum[2] = {};
    expect_unsupported([&] { dev.allreduce_or(bits, 8); }, "allreduce_or on device memory");
    DeviceMemoryComm dev2(host);
    expect_unsupported([&] { dev2.allreduce_sum_or(sum, 2, DType::F32, bits, 8); }, "allreduce_sum_or on device memory");
  });
}

TEST(DevicePlans, MakeDevicePlanByName) {
  loopback::run(2, [](Communicator& comm) {
    const TensorSpec spec{1000, 1, DType::F32};
    auto p = cuda::make_device_plan("balanced", comm, spec, SchemeOptions{});
    EXPECT_STREQ(p->name(), "balanced");
    EXPECT_EQ(p->memory_space(), MemSpace::Host);
    // max_nnz 0 = every row
    EXPECT_EQ(static_cast<cuda::DeviceBalanced&>(*p).limits().max_nnz, 1000u);
    expect_unsupported([&] { cuda::make_device_plan("sparcml", comm, spec, SchemeOptions{}); }, "sparcml");
    SchemeOptions avg;
    avg.output.average = true;
    expect_unsupported([&] { cuda::make_device_plan("balanced", comm, spec, avg); }, "average");
    EXPECT_THROW(cuda::make_device_plan("hierarchical", comm, spec, SchemeOptions{}), Error);  // no intra/inter
    // Dense-gradient input through the plan interface equals the host plan's.
    std::vector<float> grad(1000, 0.0f), a(1000), b(1000);
    for (int i = comm.rank(); i < 1000; i += 7) grad[i] = static_cast<float>(i % 5) - 2.0f;
    p->run_dense_from_dense(grad.data(), a.data());
    p->synchronize();
    auto h = make_scheme("balanced", comm, spec);
    h->run_dense_from_dense(grad.data(), b.data());
    EXPECT_EQ(a, b);
  });
}

// Device support is one row flag: make_device_plan builds a plan for exactly the rows that carry
// kDevicePlan and refuses the others, naming the flagged rows. Two rows registered here (copies of
// balanced's functions under new names) show that it reads the flag rather than a list of its own:
// the flagged one is listed among the device schemes and, since the device path has no plan for it,
// is reported as an internal error, while the unflagged one is refused as a host-only scheme.
TEST(DevicePlans, DeviceSupportIsTheRowFlag) {
  const zen::detail::SchemeRow* balanced = zen::detail::find_scheme("balanced");
  ASSERT_NE(balanced, nullptr);
  zen::detail::SchemeRow flagged = *balanced, plain = *balanced;
  flagged.name = "flag_probe_device";
  flagged.auto_position = plain.auto_position = zen::detail::kNotAuto;
  flagged.traits = zen::detail::kDevicePlan;
  plain.name = "flag_probe_host";
  plain.traits = zen::detail::kSparse;
  zen::detail::register_scheme(flagged);
  zen::detail::register_scheme(plain);
  loopback::run(2, [](Communicator& comm) {
    const TensorSpec spec{1000, 1, DType::F32};
    int device_rows = 0;
    for (const auto& r : zen::detail::scheme_table()) {
      const std::string name = r.name;
      if (name == "flag_probe_device") continue;  // below
      if (r.has(zen::detail::kDevicePlan)) {
        ++device_rows;
        auto p = cuda::make_device_plan(name, comm, spec, SchemeOptions{});
        EXPECT_EQ(p->name(), name);
      } else {
        expect_unsupported([&] { cuda::make_device_plan(name, comm, spec, SchemeOptions{}); },
                           "scheme '" + name + "' has no device implementation (device: balanced, flag_probe_device, "
                           "hierarchical)");
      }
    }
    EXPECT_EQ(device_rows, 1);  // balanced
    try {
      cuda::make_device_plan("flag_probe_device", comm, spec, SchemeOptions{});
      ADD_FAILURE() << "a flagged row without a device plan was built";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Result::InternalError) << e.what();
      EXPECT_NE(std::string(e.what()).find("kDevicePlan"), std::string::npos) << e.what();
    }
    expect_unsupported([&] { cuda::make_device_plan("no_such_scheme", comm, spec, SchemeOptions{}); }, "no_such_scheme");
  });
}
