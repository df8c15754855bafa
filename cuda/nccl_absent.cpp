// Built instead of nccl_comm.cpp when NCCL was not found: the NCCL entry points report Unsupported.
#include "zen/cuda/comm.hpp"

namespace zen::cuda::nccl {

bool available() { return false; }
UniqueId unique_id() { ZEN_THROW(Result::Unsupported, "zen was built without NCCL (set NCCL_HOME and reconfigure)"); }
std::unique_ptr<Communicator> create(const UniqueId&, int, int) {
  ZEN_THROW(Result::Unsupported, "zen was built without NCCL (set NCCL_HOME and reconfigure)");
}
std::unique_ptr<Communicator> split(Communicator&, int, int) {
  ZEN_THROW(Result::Unsupported, "zen was built without NCCL (set NCCL_HOME and reconfigure)");
}
std::unique_ptr<Communicator> wrap(void*) { ZEN_THROW(Result::Unsupported, "zen was built without NCCL (set NCCL_HOME and reconfigure)"); }

}  // namespace zen::cuda::nccl
