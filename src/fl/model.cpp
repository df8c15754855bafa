#include "zen/fl/model.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include "zen/error.hpp"
#include "zen/fl/rng.hpp"

namespace zen::fl {
namespace {

using Eigen::Index;
using ConstMap = Eigen::Map<const RowMatrixXf>;
using MutMap = Eigen::Map<RowMatrixXf>;
using VecMap = Eigen::Map<Eigen::VectorXf>;
using ConstVecMap = Eigen::Map<const Eigen::VectorXf>;

constexpr size_t kEvalChunk = 1024;

void check_labels(const int32_t* y, size_t n, int num_classes) {
  for (size_t i = 0; i < n; ++i) {
    ZEN_ENFORCE(y[i] >= 0 && y[i] < num_classes, "label " + std::to_string(y[i]) + " of sample " +
                                                     std::to_string(i) + " outside [0, " +
                                                     std::to_string(num_classes) + ")");
  }
}

// Mean softmax cross-entropy of logits z (n x C); z is overwritten with dL/dz = (softmax - onehot)/n.
double softmax_xent_grad(RowMatrixXf& z, const int32_t* y) {
  const Index n = z.rows();
  const float inv_n = 1.0f / static_cast<float>(n);
  double loss = 0;
  for (Index i = 0; i < n; ++i) {
    auto r = z.row(i);
    const float m = r.maxCoeff();
    const double zy = double(r(y[i])) - double(m);
    r.array() = (r.array() - m).exp();
    const float s = r.sum();
    loss += std::log(double(s)) - zy;
    r *= inv_n / s;
    r(y[i]) -= inv_n;
  }
  return loss / double(n);
}

// Mean softmax cross-entropy of logits z (n x C) without the gradient.
double softmax_xent(const RowMatrixXf& z, const int32_t* y) {
  double loss = 0;
  for (Index i = 0; i < z.rows(); ++i) {
    const auto r = z.row(i);
    const float m = r.maxCoeff();
    const double lse = double(m) + std::log(double((r.array() - m).exp().sum()));
    loss += lse - double(r(y[i]));
  }
  return loss / double(z.rows());
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Model

Model::Model(int input_dim, int num_classes, size_t num_params)
    : input_dim_(input_dim), num_classes_(num_classes), params_(num_params, 0.0f) {
  ZEN_ENFORCE(input_dim > 0, "model input_dim must be positive, got " + std::to_string(input_dim));
  ZEN_ENFORCE(num_classes > 1, "model needs >= 2 classes, got " + std::to_string(num_classes));
}

void Model::set_params(const float* data, size_t n) {
  ZEN_ENFORCE(n == params_.size(), name() + " model has " + std::to_string(params_.size()) +
                                       " parameters, got a vector of " + std::to_string(n));
  std::copy_n(data, n, params_.data());
}

void Model::check_data(const Dataset& d) const {
  ZEN_ENFORCE(d.dim == input_dim_, name() + " model expects " + std::to_string(input_dim_) +
                                       " features, data set has " + std::to_string(d.dim));
  ZEN_ENFORCE(d.num_classes <= num_classes_,
              name() + " model has " + std::to_string(num_classes_) + " classes, data set has " +
                  std::to_string(d.num_classes));
  ZEN_ENFORCE(d.x.size() == d.size() * size_t(d.dim),
              "data set has " + std::to_string(d.x.size()) + " feature values for " +
                  std::to_string(d.size()) + " samples");
}

double Model::loss(const float* x, const int32_t* y, size_t n) const {
  ZEN_ENFORCE(n > 0, "loss of an empty batch");
  check_labels(y, n, num_classes_);
  RowMatrixXf z;
  logits(x, n, z);
  return softmax_xent(z, y);
}

Model::Eval Model::evaluate(const Dataset& d) const {
  check_data(d);
  ZEN_ENFORCE(d.size() > 0, "evaluate on an empty data set");
  check_labels(d.y.data(), d.size(), num_classes_);
  RowMatrixXf z;
  double loss_sum = 0;
  size_t correct = 0;
  for (size_t b = 0; b < d.size(); b += kEvalChunk) {
    const size_t n = std::min(kEvalChunk, d.size() - b);
    logits(d.row(b), n, z);
    loss_sum += softmax_xent(z, d.y.data() + b) * double(n);
    for (size_t i = 0; i < n; ++i) {
      Index arg;
      z.row(Index(i)).maxCoeff(&arg);
      correct += (arg == d.y[b + i]);
    }
  }
  return {loss_sum / double(d.size()), double(correct) / double(d.size())};
}

double Model::loss(const Dataset& d) const { return evaluate(d).loss; }
double Model::accuracy(const Dataset& d) const { return evaluate(d).accuracy; }

std::vector<int32_t> Model::predict(const Dataset& d) const {
  check_data(d);
  std::vector<int32_t> out(d.size());
  RowMatrixXf z;
  for (size_t b = 0; b < d.size(); b += kEvalChunk) {
    const size_t n = std::min(kEvalChunk, d.size() - b);
    logits(d.row(b), n, z);
    for (size_t i = 0; i < n; ++i) {
      Index arg;
      z.row(Index(i)).maxCoeff(&arg);
      out[b + i] = static_cast<int32_t>(arg);
    }
  }
  return out;
}

// ------------------------------------------------------------------------------------------------
// Logistic regression: params = [W (C x D) | b (C)]

LogisticRegression::LogisticRegression(int input_dim, int num_classes)
    : Model(input_dim, num_classes, size_t(num_classes) * size_t(input_dim) + size_t(num_classes)) {}

std::unique_ptr<Model> LogisticRegression::clone() const {
  return std::make_unique<LogisticRegression>(*this);
}

void LogisticRegression::init(uint64_t seed) {
  Rng rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.01f);
  const size_t nw = size_t(num_classes_) * size_t(input_dim_);
  for (size_t i = 0; i < nw; ++i) params_[i] = nd(rng);
  std::fill(params_.begin() + nw, params_.end(), 0.0f);
}

void LogisticRegression::logits(const float* x, size_t n, RowMatrixXf& out) const {
  const Index D = input_dim_, C = num_classes_;
  ConstMap X(x, Index(n), D);
  ConstMap W(params_.data(), C, D);
  ConstVecMap b(params_.data() + C * D, C);
  out.noalias() = X * W.transpose();
  out.rowwise() += b.transpose();
}

double LogisticRegression::loss_and_grad(const float* x, const int32_t* y, size_t n,
                                         float* grad) const {
  ZEN_ENFORCE(n > 0, "loss_and_grad on an empty batch");
  check_labels(y, n, num_classes_);
  const Index D = input_dim_, C = num_classes_;
  RowMatrixXf g;
  logits(x, n, g);
  const double loss = softmax_xent_grad(g, y);  // g = dL/dz, n x C
  ConstMap X(x, Index(n), D);
  MutMap dW(grad, C, D);
  VecMap db(grad + C * D, C);
  dW.noalias() = g.transpose() * X;
  db = g.colwise().sum().transpose();
  return loss;
}

// ------------------------------------------------------------------------------------------------
// MLP: params = [W1 (H x D) | b1 (H) | W2 (C x H) | b2 (C)]

Mlp::Mlp(int input_dim, int hidden, int num_classes)
    : Model(input_dim, num_classes,
            size_t(hidden) * (size_t(input_dim) + 1) + size_t(num_classes) * (size_t(hidden) + 1)),
      hidden_(hidden) {
  ZEN_ENFORCE(hidden > 0, "mlp hidden width must be positive, got " + std::to_string(hidden));
}

std::unique_ptr<Model> Mlp::clone() const { return std::make_unique<Mlp>(*this); }

void Mlp::init(uint64_t seed) {
  Rng rng(seed);
  const size_t D = size_t(input_dim_), H = size_t(hidden_), C = size_t(num_classes_);
  std::fill(params_.begin(), params_.end(), 0.0f);
  const float a1 = std::sqrt(6.0f / float(D));
  const float a2 = std::sqrt(6.0f / float(H + C));
  std::uniform_real_distribution<float> u1(-a1, a1), u2(-a2, a2);
  float* p = params_.data();
  for (size_t i = 0; i < H * D; ++i) p[i] = u1(rng);
  p += H * D + H;
  for (size_t i = 0; i < C * H; ++i) p[i] = u2(rng);
}

void Mlp::logits(const float* x, size_t n, RowMatrixXf& out) const {
  const Index D = input_dim_, H = hidden_, C = num_classes_;
  const float* p = params_.data();
  ConstMap X(x, Index(n), D);
  ConstMap W1(p, H, D);
  ConstVecMap b1(p + H * D, H);
  ConstMap W2(p + H * D + H, C, H);
  ConstVecMap b2(p + H * D + H + C * H, C);
  RowMatrixXf a = X * W1.transpose();
  a.rowwise() += b1.transpose();
  a = a.cwiseMax(0.0f);
  out.noalias() = a * W2.transpose();
  out.rowwise() += b2.transpose();
}

double Mlp::loss_and_grad(const float* x, const int32_t* y, size_t n, float* grad) const {
  ZEN_ENFORCE(n > 0, "loss_and_grad on an empty batch");
  check_labels(y, n, num_classes_);
  const Index D = input_dim_, H = hidden_, C = num_classes_;
  const float* p = params_.data();
  ConstMap X(x, Index(n), D);
  ConstMap W1(p, H, D);
  ConstVecMap b1(p + H * D, H);
  ConstMap W2(p + H * D + H, C, H);
  ConstVecMap b2(p + H * D + H + C * H, C);

  RowMatrixXf z1 = X * W1.transpose();  // pre-activation, n x H
  z1.rowwise() += b1.transpose();
  const RowMatrixXf a = z1.cwiseMax(0.0f);
  RowMatrixXf g2 = a * W2.transpose();  // n x C
  g2.rowwise() += b2.transpose();
  const double loss = softmax_xent_grad(g2, y);  // g2 = dL/dz2

  MutMap dW1(grad, H, D);
  VecMap db1(grad + H * D, H);
  MutMap dW2(grad + H * D + H, C, H);
  VecMap db2(grad + H * D + H + C * H, C);
  dW2.noalias() = g2.transpose() * a;
  db2 = g2.colwise().sum().transpose();
  RowMatrixXf g1 = g2 * W2;  // dL/da, n x H
  g1 = (z1.array() > 0.0f).select(g1, 0.0f);
  dW1.noalias() = g1.transpose() * X;
  db1 = g1.colwise().sum().transpose();
  return loss;
}

// ------------------------------------------------------------------------------------------------

std::unique_ptr<Model> make_model(const ModelSpec& spec) {
  if (spec.kind == "logreg") return std::make_unique<LogisticRegression>(spec.input_dim, spec.num_classes);
  if (spec.kind == "mlp") return std::make_unique<Mlp>(spec.input_dim, spec.hidden, spec.num_classes);
  ZEN_THROW(Result::InvalidArgument,
            "unknown model kind '" + spec.kind + "' (expected 'logreg' or 'mlp')");
}

}  // namespace zen::fl
