#pragma once
// Shared helpers of the fl unit tests.
#include <string>

#include <gtest/gtest.h>

#include "zen/fl/dataset.hpp"

namespace zen::fl::test {

inline std::string tiny_dir() { return ZEN_FL_TINY_DIR; }

/// The 200-image training sample (first 200 of Fashion-MNIST train), loaded once.
inline const Dataset& tiny_train() {
  static const Dataset d = load_fashion_mnist(tiny_dir(), "train");
  return d;
}
/// The 100-image test sample (first 100 of Fashion-MNIST t10k), loaded once.
inline const Dataset& tiny_test() {
  static const Dataset d = load_fashion_mnist(tiny_dir(), "t10k");
  return d;
}

/// A fresh path in the gtest temp dir.
inline std::string temp_path(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return ::testing::TempDir() + "zen_fl_" + info->test_suite_name() + "_" + info->name() + "_" + name;
}

}  // namespace zen::fl::test
