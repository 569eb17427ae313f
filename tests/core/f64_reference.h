// A float64 reference for the layers of a ResNet, for tests that measure how far the fp32
// kernels are from exact arithmetic: convolution (forward, backward data, backward weights),
// training-mode batch norm (forward with biased variance and eps, backward), ReLU, the
// residual add, the global average pool, the linear layer and the batch-mean cross-entropy,
// composed into resnet18-cifar (tandem's `resnet18-cifar`: 3x3 stride-1 stem, no max-pool,
// BasicBlocks, torchvision's parameter names). Plain loops and matrix products over im2col in
// double (OpenMP); sums of up to 10^4 products keep about 1e-15 relative, far below fp32's
// 6e-8.
// Tensors are NCHW [N, C, H, W] in a std::vector<double>. Not thread-safe to call from
// several threads at once (the loops use OpenMP themselves).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tandem::testing::f64 {

struct T4 {
  int64_t n = 0, c = 0, h = 0, w = 0;
  std::vector<double> v;
  T4() = default;
  T4(int64_t n_, int64_t c_, int64_t h_, int64_t w_) : n(n_), c(c_), h(h_), w(w_), v(size_t(n_ * c_ * h_ * w_)) {}
};

// Convolution with a [K, C, R, S] weight (no bias), stride and zero padding alike in both
// directions. `y` (forward) and `dx` (backward data) have the usual output/input shapes.
T4 conv_forward(const T4& x, const T4& w, int64_t stride, int64_t pad);
T4 conv_backward_data(const T4& dy, const T4& w, int64_t stride, int64_t pad, int64_t h, int64_t wd);
T4 conv_backward_weights(const T4& x, const T4& dy, int64_t stride, int64_t pad, int64_t r, int64_t s);

// Training-mode batch norm over (N, H, W) per channel: y = gamma * (x - mean) / sqrt(var + eps)
// + beta with the biased variance. The backward gives dx and accumulates dgamma and dbeta.
struct BnCache {
  std::vector<double> mean, inv_std;
};
T4 bn_forward(const T4& x, const std::vector<double>& gamma, const std::vector<double>& beta, double eps,
              BnCache& cache);
T4 bn_backward(const T4& dy, const T4& x, const std::vector<double>& gamma, const BnCache& cache,
               std::vector<double>& dgamma, std::vector<double>& dbeta);

// The fp32 rounding model the tolerances derive from (u = 2^-24, fp32's unit roundoff). A
// sum of K terms computed in fp32 rounds at each addition: s_k = (s_(k-1) + t_k)(1 + d_k)
// with |d_k| <= u, an error of about sum_k d_k s_k. With independent d_k uniform in [-u, u]
// (variance u^2 / 3) and zero-mean terms of variance t^2 (so E s_k^2 = k t^2) that error has
// variance u^2 / 3 * sum_k k t^2 = u^2 K^2 t^2 / 6, i.e. u^2 K / 6 relative to the sum's mean
// square K t^2; a blocked or tree order adds the same terms through smaller partial sums, so
// less (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., 2002, sec. 4.2;
// Higham and Mary, SIAM J. Sci. Comput. 41(5), 2019, for the probabilistic model).
// sum_rel_var(K) is that relative variance plus u^2 for the final rounding to fp32.
inline double sum_rel_var(double k) { return 0x1p-48 * (k / 6.0 + 1.0); }

// resnet18-cifar, one training step in double: `params` holds every parameter by its
// torchvision name (conv1.weight, bn1.weight, bn1.bias, layer1.0.conv1.weight, ...,
// layer2.0.downsample.0.weight, ..., fc.weight [K, 512], fc.bias [K]) as flat vectors in the
// parameter's own order; x is [N, C, H, W]; labels in [0, K). The constructor runs the
// forward; backward() gives the gradient of the batch-mean cross-entropy for each name and
// the logits (name "logits").
//
// ReLU decisions. A ReLU input p within rounding distance of 0 may land on either side of
// the kink in fp32, and where it does the gradient flowing down changes by the gradient dy_p
// at that element: a step, not a rounding error, so no fp32 tolerance on the gradient covers
// it. backward(masks) therefore takes the decisions an fp32 run made (its ReLU outputs > 0,
// in the order of relu_names()) and differentiates exactly through them; where a decision
// differs from the float64 one, the result says by how many standard deviations of the fp32
// forward error at that element (propagated per channel: a convolution passes
// sum_c |w_kc|^2 V_c on and adds sum_rel_var(CRS) times its outputs' mean square; batch norm
// scales by (gamma / sigma)^2; an add sums). A correct fp32 forward flips only decisions a few
// standard deviations from 0. backward() without masks uses the float64 decisions and
// reports, for the record, how many flips the rounding model expects (sum over ReLU inputs of
// P(|error| > |p|)).
//
// Tolerance. tolerance[name] = kLambda * sqrt(A): A adds up the relative variances
// sum_rel_var(K) of every sum on the way to that gradient (the forward's convolutions,
// batch-norm statistics, pool and fc, then the backward's sums down to the parameter), as
// independent errors do; kLambda = 4 standard deviations.
struct Resnet18CifarResult {
  std::map<std::string, std::vector<double>> grads;  // by parameter name, and "logits"
  std::map<std::string, double> tolerance;            // relative L2, by the same names
  int64_t flipped = 0;           // decisions of `masks` that differ from the float64 ones
  double flipped_max_sd = 0;     // the largest |p| / sd among them
  double expected_flips = 0;     // without masks: the flips the rounding model expects
};
inline constexpr double kLambda = 4.0;

class Resnet18Cifar {
 public:
  Resnet18Cifar(const std::map<std::string, std::vector<double>>& params, const T4& x,
                const std::vector<int64_t>& labels);
  ~Resnet18Cifar();
  Resnet18Cifar(const Resnet18Cifar&) = delete;
  Resnet18Cifar& operator=(const Resnet18Cifar&) = delete;

  /// The 17 ReLUs in order: "bn1" (the stem), then per block "layerL.B.bn1" (inside the
  /// body) and "layerL.B" (after the add).
  static std::vector<std::string> relu_names();
  /// masks: one per ReLU, 1 where that ReLU's output is > 0, in NCHW order; null: float64's.
  /// Throws std::invalid_argument for a wrong count or size.
  Resnet18CifarResult backward(const std::vector<std::vector<uint8_t>>* masks = nullptr) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::testing::f64
