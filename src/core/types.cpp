#include "zen/types.hpp"

#include "zen/error.hpp"

namespace zen {

size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::F32: return 4;
    case DType::F64: return 8;
    case DType::F16: return 2;
    case DType::BF16: return 2;
  }
  return 0;
}

size_t index_size(IndexType t) noexcept { return t == IndexType::I32 ? 4 : 8; }

const char* dtype_name(DType t) noexcept {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
  }
  return "?";
}

const char* index_type_name(IndexType t) noexcept { return t == IndexType::I32 ? "i32" : "i64"; }

DType parse_dtype(const std::string& s) {
  if (s == "f32" || s == "float" || s == "float32" || s == "fp32") return DType::F32;
  if (s == "f64" || s == "double" || s == "float64" || s == "fp64") return DType::F64;
  if (s == "f16" || s == "half" || s == "float16" || s == "fp16") return DType::F16;
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  ZEN_THROW(Result::InvalidArgument, "unknown dtype '" + s + "' (expected f32, f64, f16 or bf16)");
}

}  // namespace zen
