#include <unistd.h>
#include "zen/fl/dataset.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <random>

#include "zen/error.hpp"
#include "zen/fl/rng.hpp"

namespace zen::fl {

Eigen::Map<const RowMatrixXf> Dataset::features() const {
  return Eigen::Map<const RowMatrixXf>(x.data(), static_cast<Eigen::Index>(size()), dim);
}

std::vector<size_t> Dataset::class_counts() const {
  std::vector<size_t> c(static_cast<size_t>(std::max(num_classes, 0)), 0);
  for (int32_t v : y) {
    ZEN_ENFORCE(v >= 0 && v < num_classes, "label " + std::to_string(v) + " outside [0, " +
                                               std::to_string(num_classes) + ")");
    ++c[static_cast<size_t>(v)];
  }
  return c;
}

Dataset Dataset::subset(const std::vector<size_t>& indices) const {
  Dataset out;
  out.dim = dim;
  out.num_classes = num_classes;
  out.x.resize(indices.size() * static_cast<size_t>(dim));
  out.y.resize(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    ZEN_ENFORCE(indices[i] < size(), "subset: sample index " + std::to_string(indices[i]) +
                                         " >= data set size " + std::to_string(size()));
    std::copy_n(row(indices[i]), dim, out.x.data() + i * static_cast<size_t>(dim));
    out.y[i] = y[indices[i]];
  }
  return out;
}

void Dataset::validate() const {
  ZEN_ENFORCE(dim > 0, "data set dim must be positive, got " + std::to_string(dim));
  ZEN_ENFORCE(num_classes > 1, "data set needs >= 2 classes, got " + std::to_string(num_classes));
  ZEN_ENFORCE(x.size() == y.size() * static_cast<size_t>(dim),
              "data set has " + std::to_string(x.size()) + " feature values for " +
                  std::to_string(y.size()) + " samples of dim " + std::to_string(dim));
  for (size_t i = 0; i < y.size(); ++i) {
    ZEN_ENFORCE(y[i] >= 0 && y[i] < num_classes, "sample " + std::to_string(i) + " has label " +
                                                     std::to_string(y[i]) + " outside [0, " +
                                                     std::to_string(num_classes) + ")");
  }
}

Dataset make_dataset(const IdxImages& images, const std::vector<uint8_t>& labels, int num_classes,
                     size_t limit) {
  ZEN_ENFORCE(images.count == labels.size(),
              "image file has " + std::to_string(images.count) + " images but label file has " +
                  std::to_string(labels.size()) + " labels");
  const size_t dim = size_t(images.rows) * images.cols;
  ZEN_ENFORCE(images.pixels.size() == size_t(images.count) * dim,
              "image buffer holds " + std::to_string(images.pixels.size()) + " pixels, expected " +
                  std::to_string(size_t(images.count) * dim));
  const size_t n = limit > 0 ? std::min<size_t>(limit, images.count) : images.count;
  Dataset d;
  d.dim = static_cast<int>(dim);
  d.num_classes = num_classes;
  d.y.resize(n);
  for (size_t i = 0; i < n; ++i) {
    ZEN_ENFORCE(labels[i] < num_classes, "label " + std::to_string(int(labels[i])) + " of sample " +
                                             std::to_string(i) + " is >= num_classes " +
                                             std::to_string(num_classes));
    d.y[i] = labels[i];
  }
  d.x.resize(n * dim);
  constexpr float kScale = 1.0f / 255.0f;
  for (size_t i = 0; i < n * dim; ++i) d.x[i] = float(images.pixels[i]) * kScale;
  return d;
}

Dataset load_idx_dataset(const std::string& images_path, const std::string& labels_path,
                         size_t limit) {
  const IdxImages img = read_idx_images(images_path);
  const std::vector<uint8_t> lab = read_idx_labels(labels_path);
  ZEN_ENFORCE(img.count == lab.size(), "'" + images_path + "' has " + std::to_string(img.count) +
                                           " images but '" + labels_path + "' has " +
                                           std::to_string(lab.size()) + " labels");
  constexpr int kClasses = 10;
  for (size_t i = 0; i < lab.size(); ++i) {
    ZEN_ENFORCE(lab[i] < kClasses, "'" + labels_path + "': label " + std::to_string(int(lab[i])) +
                                       " of sample " + std::to_string(i) + " is >= " +
                                       std::to_string(kClasses) + " classes");
  }
  return make_dataset(img, lab, kClasses, limit);
}

Dataset load_fashion_mnist(const std::string& dir, const std::string& split, size_t limit) {
  ZEN_ENFORCE(split == "train" || split == "t10k",
              "Fashion-MNIST split must be 'train' or 't10k', got '" + split + "'");
  const std::string img = dir + "/" + split + "-images-idx3-ubyte.gz";
  if (::access(img.c_str(), R_OK) != 0)
    ZEN_THROW(Result::SystemError,
              "Fashion-MNIST not found: cannot read '" + img + "'. Install Debian's dataset-fashion-mnist "
              "(apt-get install dataset-fashion-mnist, files under /usr/share/datasets/fashion-mnist) or point "
              "$ZEN_FMNIST_DIR / --data-dir at a folder with the four *-idx?-ubyte.gz files");
  return load_idx_dataset(img, dir + "/" + split + "-labels-idx1-ubyte.gz", limit);
}

std::string default_fashion_mnist_dir() {
  const char* env = std::getenv("ZEN_FMNIST_DIR");
  return (env && *env) ? std::string(env) : std::string("/usr/share/datasets/fashion-mnist");
}

// ------------------------------------------------------------------------------------------------
// Splits

Partition split_iid(size_t n, int num_clients, uint64_t seed) {
  ZEN_ENFORCE(num_clients > 0, "split_iid: num_clients must be positive, got " +
                                   std::to_string(num_clients));
  std::vector<size_t> perm(n);
  std::iota(perm.begin(), perm.end(), size_t(0));
  Rng rng(seed);
  std::shuffle(perm.begin(), perm.end(), rng);
  const size_t K = static_cast<size_t>(num_clients);
  Partition p(K);
  size_t pos = 0;
  for (size_t k = 0; k < K; ++k) {
    const size_t take = n / K + (k < n % K ? 1 : 0);
    p[k].assign(perm.begin() + pos, perm.begin() + pos + take);
    pos += take;
  }
  return p;
}

namespace {

// One draw from Dir(alpha * 1_m) via normalized Gamma(alpha, 1) variates. When every variate
// underflows (tiny alpha), the draw degenerates to a one-hot vector at a uniform position.
std::vector<double> dirichlet(size_t m, double alpha, Rng& rng) {
  std::gamma_distribution<double> gamma(alpha, 1.0);
  std::vector<double> v(m);
  double sum = 0;
  for (auto& x : v) sum += (x = gamma(rng));
  if (!(sum > 0)) {
    std::fill(v.begin(), v.end(), 0.0);
    v[std::uniform_int_distribution<size_t>(0, m - 1)(rng)] = 1.0;
    return v;
  }
  for (auto& x : v) x /= sum;
  return v;
}

std::vector<std::vector<size_t>> shuffled_class_pools(const std::vector<int32_t>& labels,
                                                      int num_classes, Rng& rng) {
  std::vector<std::vector<size_t>> pools(static_cast<size_t>(num_classes));
  for (size_t i = 0; i < labels.size(); ++i) {
    ZEN_ENFORCE(labels[i] >= 0 && labels[i] < num_classes,
                "split_dirichlet: sample " + std::to_string(i) + " has label " +
                    std::to_string(labels[i]) + " outside [0, " + std::to_string(num_classes) + ")");
    pools[static_cast<size_t>(labels[i])].push_back(i);
  }
  for (auto& pool : pools) std::shuffle(pool.begin(), pool.end(), rng);
  return pools;
}

}  // namespace

Partition split_dirichlet(const std::vector<int32_t>& labels, int num_classes, int num_clients,
                          double alpha, uint64_t seed, DirichletMode mode) {
  ZEN_ENFORCE(num_clients > 0, "split_dirichlet: num_clients must be positive, got " +
                                   std::to_string(num_clients));
  ZEN_ENFORCE(num_classes > 0, "split_dirichlet: num_classes must be positive, got " +
                                   std::to_string(num_classes));
  ZEN_ENFORCE(alpha > 0 && std::isfinite(alpha),
              "split_dirichlet: alpha must be positive and finite, got " + std::to_string(alpha));
  Rng rng(seed);
  auto pools = shuffled_class_pools(labels, num_classes, rng);
  const size_t K = static_cast<size_t>(num_clients);
  const size_t C = static_cast<size_t>(num_classes);
  const size_t n = labels.size();
  Partition part(K);

  if (mode == DirichletMode::PerClass) {
    for (size_t c = 0; c < C; ++c) {
      const auto share = dirichlet(K, alpha, rng);
      const size_t m = pools[c].size();
      // Cut points round the cumulative shares; the last cut is exactly m.
      double cum = 0;
      size_t begin = 0;
      for (size_t k = 0; k < K; ++k) {
        cum += share[k];
        size_t end = (k + 1 == K) ? m : std::min(m, static_cast<size_t>(std::llround(cum * double(m))));
        end = std::max(end, begin);
        part[k].insert(part[k].end(), pools[c].begin() + begin, pools[c].begin() + end);
        begin = end;
      }
    }
    return part;
  }

  // PerClient: balanced quotas, label distribution per client from Dir(alpha).
  std::vector<size_t> next(C, 0);  // next unused position in each pool
  std::vector<double> w(C);
  for (size_t k = 0; k < K; ++k) {
    const size_t quota = n / K + (k < n % K ? 1 : 0);
    const auto q = dirichlet(C, alpha, rng);
    part[k].reserve(quota);
    for (size_t s = 0; s < quota; ++s) {
      double total = 0;
      for (size_t c = 0; c < C; ++c) total += (w[c] = next[c] < pools[c].size() ? q[c] : 0.0);
      if (!(total > 0)) {
        // The client's preferred classes are exhausted: draw proportionally to what is left.
        for (size_t c = 0; c < C; ++c) total += (w[c] = double(pools[c].size() - next[c]));
      }
      double u = std::uniform_real_distribution<double>(0.0, total)(rng);
      size_t pick = C;
      for (size_t c = 0; c < C; ++c) {
        if (w[c] <= 0) continue;
        pick = c;  // last class with weight, guards against rounding at the top end
        if (u < w[c]) break;
        u -= w[c];
      }
      ZEN_CHECK_CODE(pick < C, Result::InternalError, "split_dirichlet: no class left to draw");
      part[k].push_back(pools[pick][next[pick]++]);
    }
  }
  return part;
}

void validate_partition(const Partition& partition, size_t n) {
  std::vector<int> owner(n, -1);
  for (size_t k = 0; k < partition.size(); ++k) {
    for (size_t idx : partition[k]) {
      ZEN_ENFORCE(idx < n, "partition: client " + std::to_string(k) + " holds sample " +
                               std::to_string(idx) + " >= n = " + std::to_string(n));
      ZEN_ENFORCE(owner[idx] < 0, "partition: sample " + std::to_string(idx) +
                                      " is assigned to client " + std::to_string(owner[idx]) +
                                      " and client " + std::to_string(k));
      owner[idx] = static_cast<int>(k);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    ZEN_ENFORCE(owner[i] >= 0, "partition: sample " + std::to_string(i) + " is assigned to no client");
  }
}

std::vector<std::vector<size_t>> partition_label_counts(const Partition& partition,
                                                        const std::vector<int32_t>& labels,
                                                        int num_classes) {
  std::vector<std::vector<size_t>> out(partition.size(),
                                       std::vector<size_t>(static_cast<size_t>(num_classes), 0));
  for (size_t k = 0; k < partition.size(); ++k) {
    for (size_t idx : partition[k]) {
      ZEN_ENFORCE(idx < labels.size(), "partition: sample index " + std::to_string(idx) +
                                           " >= label count " + std::to_string(labels.size()));
      const int32_t c = labels[idx];
      ZEN_ENFORCE(c >= 0 && c < num_classes, "label " + std::to_string(c) + " outside [0, " +
                                                 std::to_string(num_classes) + ")");
      ++out[k][static_cast<size_t>(c)];
    }
  }
  return out;
}

}  // namespace zen::fl
