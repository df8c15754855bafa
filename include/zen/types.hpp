#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include <Eigen/Core>  // Eigen::half, Eigen::bfloat16: the host-side 16-bit float types

namespace zen {

enum class DType : uint8_t { F32 = 0, F64 = 1, F16 = 2, BF16 = 3 };
enum class IndexType : uint8_t { I32 = 0, I64 = 1 };
enum class MemSpace : uint8_t { Host = 0, Device = 1 };
enum class ReduceOp : uint8_t { Sum = 0, Max = 1, Min = 2 };

/// How a set of K positions out of an owner's m travels (docs/algorithms.md, "Index encodings"):
/// COO (K fixed-width keys), the owner's bitmap (m bits) or Elias-Fano (about K * (2 + log2(m/K))
/// bits). Auto picks the smallest by exact size, per message and per call (sizes are known to both
/// sides before anything is sent, so the choice travels nowhere).
enum class IndexEncoding : uint8_t { Auto = 0, Coo = 1, Bitmap = 2, EliasFano = 3 };
using PullEncoding = IndexEncoding;

using half = Eigen::half;
using bfloat16 = Eigen::bfloat16;

size_t dtype_size(DType t) noexcept;
size_t index_size(IndexType t) noexcept;
const char* dtype_name(DType t) noexcept;        ///< "f32", "f64", "f16", "bf16"
DType parse_dtype(const std::string& s);          ///< inverse of dtype_name; also "float", "half", ...
const char* index_type_name(IndexType t) noexcept;

template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::F32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::F64; };
template <> struct dtype_of<half> { static constexpr DType value = DType::F16; };
template <> struct dtype_of<bfloat16> { static constexpr DType value = DType::BF16; };

/// Accumulation type: 16-bit values are summed in fp32 and rounded once.
template <typename T> struct accum_of { using type = T; };
template <> struct accum_of<half> { using type = float; };
template <> struct accum_of<bfloat16> { using type = float; };

/// Calls f(T{}) with T the C++ type of dtype t.
template <typename F>
decltype(auto) dispatch_dtype(DType t, F&& f) {
  switch (t) {
    case DType::F64: return f(double{});
    case DType::F16: return f(half{});
    case DType::BF16: return f(bfloat16{});
    case DType::F32: default: return f(float{});
  }
}

}  // namespace zen
