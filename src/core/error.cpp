#include "zen/error.hpp"

#include <cstring>

namespace zen {

const char* result_name(Result r) noexcept {
  switch (r) {
    case Result::Success: return "success";
    case Result::InvalidArgument: return "invalid argument";
    case Result::InvalidUsage: return "invalid usage";
    case Result::SystemError: return "system error";
    case Result::InternalError: return "internal error";
    case Result::Timeout: return "timeout";
    case Result::RemoteError: return "remote error";
    case Result::CudaError: return "CUDA/NCCL error";
    case Result::Unsupported: return "unsupported";
  }
  return "unknown";
}

void throw_error(Result code, const std::string& msg, const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  base = base ? base + 1 : file;
  throw Error(code, "zen " + std::string(result_name(code)) + ": " + msg + " [" + base + ":" +
                        std::to_string(line) + "]");
}

}  // namespace zen
