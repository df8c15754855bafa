#pragma once
// In-memory labelled data sets and their split across K federated clients.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "zen/fl/idx.hpp"

namespace zen::fl {

using RowMatrixXf = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// N samples of `dim` float features (row-major, one sample per row) with integer labels in
/// [0, num_classes).
struct Dataset {
  int dim = 0;
  int num_classes = 0;
  std::vector<float> x;   ///< size() * dim values
  std::vector<int32_t> y; ///< size() labels

  size_t size() const noexcept { return y.size(); }
  const float* row(size_t i) const noexcept { return x.data() + i * static_cast<size_t>(dim); }
  /// All features as an N x dim row-major matrix view.
  Eigen::Map<const RowMatrixXf> features() const;
  /// Samples per class (size num_classes).
  std::vector<size_t> class_counts() const;
  /// New data set with the samples `indices` (in that order). Throws on an index >= size().
  Dataset subset(const std::vector<size_t>& indices) const;
  /// Throws zen::Error when sizes disagree or a label is out of range.
  void validate() const;
};

/// Images scaled to [0, 1] (pixel / 255) with their labels. Throws when the two files disagree on
/// the sample count or a label is >= num_classes. `limit` > 0 keeps only the first `limit` samples.
Dataset make_dataset(const IdxImages& images, const std::vector<uint8_t>& labels,
                     int num_classes, size_t limit = 0);

/// Load a Fashion-MNIST style pair of IDX files (gzip or plain). 10 classes, 784 features.
Dataset load_idx_dataset(const std::string& images_path, const std::string& labels_path,
                         size_t limit = 0);

/// Load split "train" or "t10k" from dir, i.e. `<dir>/<split>-images-idx3-ubyte.gz` and
/// `<dir>/<split>-labels-idx1-ubyte.gz`.
Dataset load_fashion_mnist(const std::string& dir, const std::string& split, size_t limit = 0);

/// $ZEN_FMNIST_DIR when set, else /usr/share/datasets/fashion-mnist (Debian dataset-fashion-mnist).
std::string default_fashion_mnist_dir();

/// Sample indices per client: partition[k] lists the samples of client k.
using Partition = std::vector<std::vector<size_t>>;

/// IID split of n samples into K clients of sizes floor(n/K) or ceil(n/K) (the first n mod K
/// clients get one more), after a seeded shuffle.
Partition split_iid(size_t n, int num_clients, uint64_t seed);

enum class DirichletMode {
  /// Client k draws a label distribution q_k ~ Dir(alpha * 1_C) and fills its quota of n/K
  /// samples by drawing labels from q_k restricted to classes not yet exhausted. Equal sizes.
  PerClient,
  /// Class c draws client shares p_c ~ Dir(alpha * 1_K) and its samples are cut accordingly
  /// (Hsu et al. 2019). Client sizes vary; a client may end up empty.
  PerClass,
};

/// Non-IID label-skew split with concentration alpha > 0 (small alpha = strong skew, large alpha
/// tends to IID). Every sample is assigned to exactly one client.
Partition split_dirichlet(const std::vector<int32_t>& labels, int num_classes, int num_clients,
                          double alpha, uint64_t seed,
                          DirichletMode mode = DirichletMode::PerClient);

/// IID content, unequal sizes: client k's share is proportional to exp(sigma * z_k), z_k ~ N(0, 1)
/// (log-normal sizes, as in FedProx's synthetic sets), rounded by largest remainder so the sizes sum
/// to n, every client holding at least one sample (n >= K). sigma = 0 gives split_iid's sizes.
Partition split_iid_lognormal(size_t n, int num_clients, double sigma, uint64_t seed);

/// Group label skew (e.g. group = orbital plane): client k is in group group_of[k] in [0, G); group
/// g holds the classes (g * C + j) mod num_classes, j < C. Each class's samples (shuffled) are dealt
/// round-robin over the clients of the groups that hold it, or over all clients when no group does,
/// so every sample lands exactly once and a group's clients see only its classes (when C * G covers
/// every class). Sizes follow the class counts: unequal in general.
Partition split_by_group(const std::vector<int32_t>& labels, int num_classes, const std::vector<int>& group_of,
                         int classes_per_group, uint64_t seed);

/// Throws zen::Error naming the sample unless every index in [0, n) occurs exactly once.
void validate_partition(const Partition& partition, size_t n);

/// Label histogram of each client: result[k][c] = samples of class c at client k.
std::vector<std::vector<size_t>> partition_label_counts(const Partition& partition,
                                                        const std::vector<int32_t>& labels,
                                                        int num_classes);

}  // namespace zen::fl
