#pragma once
// Classifiers whose parameters live in ONE flat contiguous float vector, so that a model can be
// sent through a communicator as bytes (params().data(), num_params() * sizeof(float)).
//
// Loss: mean softmax cross-entropy over a batch, L = (1/B) sum_i [logsumexp(z_i) - z_i[y_i]].
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zen/fl/dataset.hpp"

namespace zen::fl {

class Model {
 public:
  virtual ~Model() = default;

  virtual std::string name() const = 0;  ///< "logreg" or "mlp"
  virtual std::unique_ptr<Model> clone() const = 0;
  /// Random initialization from `seed` (use stream_seed(master, Stream::Init)).
  virtual void init(uint64_t seed) = 0;

  int input_dim() const noexcept { return input_dim_; }
  int num_classes() const noexcept { return num_classes_; }

  // ---- flat parameter vector ----
  size_t num_params() const noexcept { return params_.size(); }
  std::vector<float>& params() noexcept { return params_; }
  const std::vector<float>& params() const noexcept { return params_; }
  /// Copy in a flat vector; throws zen::Error naming both sizes on a mismatch.
  void set_params(const float* data, size_t n);
  void set_params(const std::vector<float>& p) { set_params(p.data(), p.size()); }
  size_t num_bytes() const noexcept { return params_.size() * sizeof(float); }

  // ---- batch math; x is n rows of input_dim() floats, row-major ----
  /// Logits, n x num_classes().
  virtual void logits(const float* x, size_t n, RowMatrixXf& out) const = 0;
  /// Mean cross-entropy over the n samples; writes d(loss)/d(params) to grad[0, num_params()).
  virtual double loss_and_grad(const float* x, const int32_t* y, size_t n, float* grad) const = 0;
  /// Mean cross-entropy over the n samples.
  double loss(const float* x, const int32_t* y, size_t n) const;

  // ---- whole data sets (evaluated in chunks) ----
  double loss(const Dataset& d) const;
  std::vector<int32_t> predict(const Dataset& d) const;  ///< argmax of the logits per sample
  double accuracy(const Dataset& d) const;               ///< fraction of correct predictions
  /// Loss and accuracy in one pass.
  struct Eval {
    double loss = 0;
    double accuracy = 0;
  };
  Eval evaluate(const Dataset& d) const;

 protected:
  Model(int input_dim, int num_classes, size_t num_params);
  void check_data(const Dataset& d) const;

  int input_dim_;
  int num_classes_;
  std::vector<float> params_;
};

/// Multinomial logistic regression z = W x + b. Layout: W (C x D, row-major), then b (C).
/// 784 -> 10 has exactly 7850 parameters. init: W ~ N(0, 0.01^2), b = 0.
class LogisticRegression final : public Model {
 public:
  LogisticRegression(int input_dim = 784, int num_classes = 10);
  std::string name() const override { return "logreg"; }
  std::unique_ptr<Model> clone() const override;
  void init(uint64_t seed) override;
  void logits(const float* x, size_t n, RowMatrixXf& out) const override;
  double loss_and_grad(const float* x, const int32_t* y, size_t n, float* grad) const override;
};

/// One-hidden-layer perceptron z = W2 relu(W1 x + b1) + b2.
/// Layout: W1 (H x D, row-major), b1 (H), W2 (C x H, row-major), b2 (C); H*(D+1) + C*(H+1) params.
/// init: W1 ~ U(+-sqrt(6/D)) (He), W2 ~ U(+-sqrt(6/(H+C))) (Glorot), biases 0.
class Mlp final : public Model {
 public:
  Mlp(int input_dim = 784, int hidden = 32, int num_classes = 10);
  std::string name() const override { return "mlp"; }
  std::unique_ptr<Model> clone() const override;
  void init(uint64_t seed) override;
  void logits(const float* x, size_t n, RowMatrixXf& out) const override;
  double loss_and_grad(const float* x, const int32_t* y, size_t n, float* grad) const override;
  int hidden() const noexcept { return hidden_; }

 private:
  int hidden_;
};

struct ModelSpec {
  std::string kind = "logreg";  ///< "logreg" or "mlp"
  int input_dim = 784;
  int num_classes = 10;
  int hidden = 32;  ///< mlp only
};

/// Build an (uninitialized, all-zero) model; throws zen::Error naming an unknown kind.
std::unique_ptr<Model> make_model(const ModelSpec& spec);

}  // namespace zen::fl
