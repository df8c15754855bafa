#pragma once
#include <stdexcept>
#include <string>

namespace zen {

/// Result codes; the C API (zen.h) returns the same values.
enum class Result : int {
  Success = 0,
  InvalidArgument = 1,  ///< bad input from the caller (index out of range, size mismatch, ...)
  InvalidUsage = 2,     ///< API misuse (communicator already failed, ranks disagree, ...)
  SystemError = 3,      ///< OS or library failure (allocation, I/O, MPI)
  InternalError = 4,    ///< a bug in zen
  Timeout = 5,          ///< a peer did not take part within the timeout
  RemoteError = 6,      ///< another rank failed or aborted
  CudaError = 7,        ///< CUDA or NCCL failure
  Unsupported = 8,      ///< feature not built / not available
};

const char* result_name(Result r) noexcept;

/// The one exception type of zen. what() names rank, peer, operation and sequence number
/// where they apply, plus the source location.
class Error : public std::runtime_error {
 public:
  Error(Result code, const std::string& msg) : std::runtime_error(msg), code_(code) {}
  Result code() const noexcept { return code_; }

 private:
  Result code_;
};

[[noreturn]] void throw_error(Result code, const std::string& msg, const char* file, int line);

}  // namespace zen

#define ZEN_THROW(code, msg) ::zen::throw_error((code), (msg), __FILE__, __LINE__)
/// ZEN_ENFORCE(cond, msg): throw InvalidArgument with msg (a std::string expression) when cond is false.
#define ZEN_ENFORCE(cond, msg)                                                  \
  do {                                                                          \
    if (!(cond)) ::zen::throw_error(::zen::Result::InvalidArgument, (msg), __FILE__, __LINE__); \
  } while (0)
#define ZEN_CHECK_CODE(cond, code, msg)                                         \
  do {                                                                          \
    if (!(cond)) ::zen::throw_error((code), (msg), __FILE__, __LINE__);         \
  } while (0)
