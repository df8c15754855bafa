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

Partition split_iid_lognormal(size_t n, int num_clients, double sigma, uint64_t seed) {
  ZEN_ENFORCE(num_clients > 0, "split_iid_lognormal: num_clients must be positive, got " + std::to_string(num_clients));
  ZEN_ENFORCE(sigma >= 0 && std::isfinite(sigma), "split_iid_lognormal: sigma must be finite and >= 0, got " +
                                                      std::to_string(sigma));
  const size_t K = static_cast<size_t>(num_clients);
  ZEN_ENFORCE(n >= K, "split_iid_lognormal: " + std::to_string(n) + " samples for " + std::to_string(K) + " clients");
  Rng rng(seed);
  std::vector<size_t> perm(n);
  std::iota(perm.begin(), perm.end(), size_t(0));
  std::shuffle(perm.begin(), perm.end(), rng);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> w(K);
  double sum = 0;
  for (size_t k = 0; k < K; ++k) sum += (w[k] = std::exp(sigma * normal(rng)));
  // One sample each, the remaining n - K by largest remainder of the shares.
  const size_t rest = n - K;
  std::vector<size_t> size(K, 1);
  std::vector<std::pair<double, size_t>> rem(K);
  size_t given = 0;
  for (size_t k = 0; k < K; ++k) {
    const double exact = static_cast<double>(rest) * w[k] / sum;
    const size_t whole = static_cast<size_t>(std::floor(exact));
    size[k] += whole;
    given += whole;
    rem[k] = {exact - static_cast<double>(whole), k};
  }
  std::sort(rem.begin(), rem.end(), [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  for (size_t i = 0; given < rest; ++i, ++given) ++size[rem[i % K].second];
  Partition p(K);
  size_t pos = 0;
  for (size_t k = 0; k < K; ++k) {
    p[k].assign(perm.begin() + static_cast<std::ptrdiff_t>(pos), perm.begin() + static_cast<std::ptrdiff_t>(pos + size[k]));
    pos += size[k];
  }
  return p;
}

Partition split_by_group(const std::vector<int32_t>& labels, int num_classes, const std::vector<int>& group_of,
                         int classes_per_group, uint64_t seed) {
  ZEN_ENFORCE(!group_of.empty(), "split_by_group: no clients");
  ZEN_ENFORCE(num_classes > 0 && classes_per_group >= 1 && classes_per_group <= num_classes,
              "split_by_group: classes per group must be in [1, " + std::to_string(num_classes) + "], got " +
                  std::to_string(classes_per_group));
  for (size_t k = 0; k < group_of.size(); ++k)
    ZEN_ENFORCE(group_of[k] >= 0, "split_by_group: client " + std::to_string(k) + " has group " + std::to_string(group_of[k]));
  // Clients holding each class: those of the groups that hold it (in client order).
  std::vector<std::vector<size_t>> holders(static_cast<size_t>(num_classes));
  for (size_t k = 0; k < group_of.size(); ++k)
    for (int j = 0; j < classes_per_group; ++j) {
      const int c = (group_of[k] * classes_per_group + j) % num_classes;
      auto& h = holders[static_cast<size_t>(c)];
      if (h.empty() || h.back() != k) h.push_back(k);
    }
  std::vector<size_t> everyone(group_of.size());
  std::iota(everyone.begin(), everyone.end(), size_t(0));
  std::vector<std::vector<size_t>> by_class(static_cast<size_t>(num_classes));
  for (size_t i = 0; i < labels.size(); ++i) {
    ZEN_ENFORCE(labels[i] >= 0 && labels[i] < num_classes, "split_by_group: sample " + std::to_string(i) + " has label " +
                                                               std::to_string(labels[i]));
    by_class[static_cast<size_t>(labels[i])].push_back(i);
  }
  Rng rng(seed);
  Partition p(group_of.size());
  for (int c = 0; c < num_classes; ++c) {
    auto& v = by_class[static_cast<size_t>(c)];
    std::shuffle(v.begin(), v.end(), rng);
    const auto& h = holders[static_cast<size_t>(c)].empty() ? everyone : holders[static_cast<size_t>(c)];
    const size_t start = static_cast<size_t>(rng() % h.size());  // no client always first
    for (size_t i = 0; i < v.size(); ++i) p[h[(start + i) % h.size()]].push_back(v[i]);
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
