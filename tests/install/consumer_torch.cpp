// A user's LibTorch program on the installed torch component: one rank (loopback), a sparse
// Embedding gradient summed through zen::libtorch, compared with the gradient itself.
#include <cstdio>

#include "zen/comm/loopback.hpp"
#include "zen/torch.hpp"

int main() {
  auto comms = zen::loopback::create(1);
  torch::nn::Embedding e(torch::nn::EmbeddingOptions(10, 3).sparse(true));
  e->forward(torch::tensor({int64_t{1}, int64_t{4}, int64_t{1}}, torch::kLong)).sum().backward();
  auto plan = zen::libtorch::make_plan(*comms[0], e->weight, "balanced");
  const at::Tensor sum = zen::libtorch::allreduce_sparse(*plan, e->weight.grad(), false, "weight");
  const bool ok = torch::equal(sum.to_dense(), e->weight.grad().to_dense()) && sum.is_coalesced();
  std::printf("consumer_torch: sparse Embedding gradient through zen::torch: %s\n", ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
