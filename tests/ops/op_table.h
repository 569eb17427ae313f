// The op table: one row per backend op of tandem/op_list.h, each run through its front end on
// every backend present (cpu, virt; cuda with a GPU) in every float dtype the backend lists for
// it, and compared with a float64 reference computed here from the same (rounded) inputs, as
// ggml's tests/test-backend-ops.cpp compares every backend with the CPU.
//
// A row names the op, its tensors (name, shape, dtype kind, role, generator), an optional step
// that derives inputs from others (statistics that must match x), the call of the front end,
// the reference and one tolerance per data dtype. The harness (op_table_harness.cpp) places
// every tensor inside a buffer whose kPad elements on each side hold the byte 0xA5, fills
// outputs that are only written with a poison value, runs the op, and fails the row when
//   - an output element differs from the reference by more than atol + rtol * |reference|
//     (integer outputs: not equal; equal infinities and two NaNs agree),
//   - an input changed, or
//   - a sentinel byte changed (a write outside the tensor).
// Rows live in rows_<area>.cpp; every op of the list has exactly one (checked by the test).
// Thread-safety: single-threaded test code.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tandem/op_support.h"
#include "tandem/rng.h"
#include "tandem/tensor.h"

namespace tandem::testing::op_table {

/// Values of a row's tensors by name, flat in row-major order, in double.
using Values = std::map<std::string, std::vector<double>>;

/// Element i of a tensor's initial contents, drawn from `rng` (one stream per tensor).
using Gen = std::function<double(int64_t i, Philox& rng)>;

Gen uniform(double lo, double hi);
/// Integers in [lo, hi).
Gen ints(int64_t lo, int64_t hi);
Gen constant(double v);
/// values[i % size].
Gen values(std::vector<double> v);
/// What outputs that are only written hold before the op: a value no correct kernel leaves.
inline constexpr double kPoison = -77.0;

/// The dtype of a tensor: the row's data dtype D, or fixed.
enum class Kind { data, f32, bf16, i32, i64, u8 };
/// in: read only (must not change); out: written (starts as poison unless a generator is
/// given); inout: read and written; scalar: a host value the call returns (no tensor).
enum class Io { in, out, inout, scalar };

struct TensorSpec {
  std::string name;
  Shape shape;
  Kind kind = Kind::data;
  Io io = Io::in;
  Gen gen;
};

TensorSpec in(std::string name, Shape shape, Gen gen, Kind kind = Kind::data);
TensorSpec out(std::string name, Shape shape, Kind kind = Kind::data);
TensorSpec inout(std::string name, Shape shape, Gen gen, Kind kind = Kind::data);
TensorSpec scalar(std::string name);

/// The op call of one row: the tensors on the device under test, by name.
class Call {
 public:
  Device device;
  DType dtype = DType::f32;
  const Tensor& operator[](const std::string& name) const;
  /// Records a scalar result (the loss, a count) under a TensorSpec made with scalar().
  void set(const std::string& name, double value) const { scalars_[name] = value; }

 private:
  friend class Harness;
  std::map<std::string, Tensor> tensors_;
  mutable std::map<std::string, double> scalars_;
};

/// |got - ref| <= atol + rtol * |ref|.
struct Tol {
  double atol = 0, rtol = 0;
};

struct Row {
  ops::Op op;
  std::vector<TensorSpec> tensors;
  /// Optional: rewrites inputs after generation (before rounding to their dtypes).
  std::function<void(Values&)> prepare;
  /// Calls the op's front end.
  std::function<void(const Call&)> run;
  /// Given every tensor's initial values (rounded to its dtype), writes each output's expected
  /// values (and each scalar's) in place. `dt` is the data dtype.
  std::function<void(Values&, DType dt)> ref;
  Tol f32, bf16, f16;
  /// What the reference is: "float64" unless the row says otherwise.
  std::string reference = "float64";
};

/// One tolerance set for rows whose outputs are one rounding of a short f32 computation.
inline constexpr Tol kTolF32{1e-6, 1e-5}, kTolBf16{1e-2, 8e-3}, kTolF16{2e-3, 1e-3};
/// Rows with sums of up to a few dozen terms (products, norms, softmax): f32 accumulation.
inline constexpr Tol kSumF32{1e-5, 1e-4}, kSumBf16{2e-2, 1e-2}, kSumF16{4e-3, 2e-3};

std::vector<Row> image_rows();
std::vector<Row> elementwise_rows();
std::vector<Row> optim_rows();
std::vector<Row> transformer_rows();
/// Every row, in the order of the groups above.
const std::vector<Row>& all_rows();

/// Runs `row` in data dtype `dt` on `device`; returns the failures (empty: it passed).
std::vector<std::string> run_row(const Row& row, DType dt, Device device);

// ---- float64 helpers for the references ----
/// c[m, n] = sum_k a[m, k] * b(k, n), b given as a function (transposes, strides).
std::vector<double> matmul(const std::vector<double>& a, int64_t m, int64_t k, int64_t n,
                           const std::function<double(int64_t k, int64_t n)>& b);
/// y [n, m] = x [n, k] w^T + b for v's "x", "w" [m, k] and optional "b" [m] (linear_forward).
std::vector<double> linear_reference(const Values& v, int64_t n, int64_t k, int64_t m);
/// Each output: `accumulate` adds to what it held, else overwrites.
void store(std::vector<double>& dst, const std::vector<double>& src, bool accumulate);

}  // namespace tandem::testing::op_table
