#pragma once
// Host-side helpers of the CUDA path, callable from plain C++ (no CUDA headers needed); declared in
// every build (without CUDA: no device, and partition_host throws Unsupported).
#include <cstdint>
#include <string>

namespace zen::cuda {

/// Number of usable CUDA devices; 0 (never an error) when there is no driver or no GPU, or when zen
/// was built without CUDA.
/// `why` receives the reason when the count is 0.
int device_count(std::string* why = nullptr);

/// h0 on the device: for each of `n` host indices, the owner and the position within the owner's
/// set (zen::Partitioner semantics, bit-identical to the CPU). Copies in and out through the host.
void partition_host(const int64_t* idx, size_t n, uint64_t n_items, uint32_t n_owners, uint64_t seed,
                    uint32_t* owner, uint64_t* pos);

}  // namespace zen::cuda
