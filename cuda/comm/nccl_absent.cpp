// Built instead of nccl_comm.cpp when NCCL is not built (no CUDA, ZEN_WITH_NCCL=OFF, or not found):
// the NCCL entry points report Unsupported.
#include "zen/cuda/comm.hpp"

namespace zen::cuda::nccl {

namespace {
const char* const kWhy = "zen was built without NCCL (a CUDA build finds it in the CUDA toolkit, NCCL_HOME or pip's nvidia-nccl)";
}

bool available() { return false; }
UniqueId unique_id() { ZEN_THROW(Result::Unsupported, kWhy); }
std::unique_ptr<Communicator> create(const UniqueId&, int, int) {
  ZEN_THROW(Result::Unsupported, kWhy);
}
std::unique_ptr<Communicator> split(Communicator&, int, int) {
  ZEN_THROW(Result::Unsupported, kWhy);
}
std::unique_ptr<Communicator> wrap(void*) { ZEN_THROW(Result::Unsupported, kWhy); }

}  // namespace zen::cuda::nccl
