// The op table's harness (op_table.h): inputs, sentinel-guarded tensors, the call and the
// comparison with the reference.
#include <cmath>
#include <cstring>
#include <exception>

#include <fmt/format.h>

#include "ops/op_table.h"
#include "tandem/stream.h"

namespace tandem::testing::op_table {

Gen uniform(double lo, double hi) {
  return [lo, hi](int64_t, Philox& rng) { return lo + (hi - lo) * rng.uniform(); };
}
Gen ints(int64_t lo, int64_t hi) {
  return [lo, hi](int64_t, Philox& rng) {
    return static_cast<double>(lo + static_cast<int64_t>(rng.randint64(static_cast<uint64_t>(hi - lo))));
  };
}
Gen constant(double v) {
  return [v](int64_t, Philox&) { return v; };
}
Gen values(std::vector<double> v) {
  return [v = std::move(v)](int64_t i, Philox&) { return v[static_cast<size_t>(i) % v.size()]; };
}

TensorSpec in(std::string name, Shape shape, Gen gen, Kind kind) {
  return {std::move(name), std::move(shape), kind, Io::in, std::move(gen)};
}
TensorSpec out(std::string name, Shape shape, Kind kind) {
  return {std::move(name), std::move(shape), kind, Io::out, constant(kPoison)};
}
TensorSpec inout(std::string name, Shape shape, Gen gen, Kind kind) {
  return {std::move(name), std::move(shape), kind, Io::inout, std::move(gen)};
}
TensorSpec scalar(std::string name) { return {std::move(name), {1}, Kind::f32, Io::scalar, constant(kPoison)}; }

const Tensor& Call::operator[](const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw std::logic_error("op table: the row has no tensor " + name);
  return it->second;
}

std::vector<double> matmul(const std::vector<double>& a, int64_t m, int64_t k, int64_t n,
                           const std::function<double(int64_t, int64_t)>& b) {
  std::vector<double> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t l = 0; l < k; ++l) s += a[static_cast<size_t>(i * k + l)] * b(l, j);
      c[static_cast<size_t>(i * n + j)] = s;
    }
  return c;
}

void store(std::vector<double>& dst, const std::vector<double>& src, bool accumulate) {
  for (size_t i = 0; i < dst.size(); ++i) dst[i] = accumulate ? dst[i] + src[i] : src[i];
}

const std::vector<Row>& all_rows() {
  static const std::vector<Row> rows = [] {
    std::vector<Row> r;
    for (auto group : {image_rows, elementwise_rows, optim_rows, transformer_rows})
      for (Row& row : group()) r.push_back(std::move(row));
    return r;
  }();
  return rows;
}

namespace {

constexpr int64_t kPad = 16;
constexpr unsigned char kSentinel = 0xA5;

DType dtype_of(Kind k, DType data) {
  switch (k) {
    case Kind::data: return data;
    case Kind::f32: return DType::f32;
    case Kind::bf16: return DType::bf16;
    case Kind::i32: return DType::i32;
    case Kind::i64: return DType::i64;
    case Kind::u8: return DType::u8;
  }
  return data;
}

bool is_float(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

// Writes v as element i of host tensor t (rounded to nearest even for 16-bit floats).
void put(const Tensor& t, int64_t i, double v) {
  const float f = static_cast<float>(v);
  switch (t.dtype()) {
    case DType::f32: t.data<float>()[i] = f; break;
    case DType::bf16: reinterpret_cast<uint16_t*>(t.raw_data())[i] = float_to_bf16(f); break;
    case DType::f16: reinterpret_cast<uint16_t*>(t.raw_data())[i] = float_to_f16(f); break;
    case DType::i32: t.data<int32_t>()[i] = static_cast<int32_t>(v); break;
    case DType::i64: t.data<int64_t>()[i] = static_cast<int64_t>(v); break;
    case DType::u8: t.data<uint8_t>()[i] = static_cast<uint8_t>(v); break;
  }
}

bool agree(double got, double want, const Tol& tol) {
  if (got == want || (std::isnan(got) && std::isnan(want))) return true;
  return std::fabs(got - want) <= tol.atol + tol.rtol * std::fabs(want);
}

}  // namespace

class Harness {
 public:
  Harness(const Row& row, DType dt, Device dev) : row_(row), dt_(dt), dev_(dev) {}

  std::vector<std::string> run() {
    Values v = generate();
    Stream s = dev_.is_host() ? Stream() : runtime_for(dev_).current_stream(dev_.index);
    Call call;
    call.device = dev_, call.dtype = dt_;
    for (const TensorSpec& spec : row_.tensors) {
      if (spec.io == Io::scalar) continue;
      Tensor host = guarded(spec, v[spec.name]);
      Tensor full = dev_.is_host() ? host : host.to(dev_, s);
      full_[spec.name] = full;
      call.tensors_[spec.name] = full.narrow(0, kPad, shape_numel(spec.shape)).view(spec.shape);
    }
    if (!dev_.is_host()) s.synchronize();
    Values want = v;
    row_.ref(want, dt_);
    try {
      row_.run(call);
    } catch (const std::exception& e) {
      return {fmt::format("{}: the op threw: {}", where(), e.what())};
    }
    std::vector<std::string> failures;
    for (const TensorSpec& spec : row_.tensors) {
      if (spec.io == Io::scalar) {
        auto it = call.scalars_.find(spec.name);
        const double got = it == call.scalars_.end() ? NAN : it->second;
        compare(spec, {got}, want[spec.name], failures);
        continue;
      }
      Tensor back = dev_.is_host() ? full_[spec.name] : full_[spec.name].to(Device{}, s);
      if (!dev_.is_host()) s.synchronize();
      check_sentinels(spec, back, failures);
      std::vector<double> got(static_cast<size_t>(shape_numel(spec.shape)));
      for (size_t i = 0; i < got.size(); ++i) got[i] = back.item(kPad + static_cast<int64_t>(i));
      compare(spec, got, spec.io == Io::in ? v[spec.name] : want[spec.name], failures);
    }
    return failures;
  }

 private:
  std::string where() const {
    return fmt::format("{} {} on {}", ops::op_name(row_.op), dtype_name(dt_), dev_.str());
  }

  // Every tensor's initial values: one Philox stream per (op, tensor), then the row's prepare.
  Values generate() const {
    Values v;
    for (size_t k = 0; k < row_.tensors.size(); ++k) {
      const TensorSpec& spec = row_.tensors[k];
      Philox rng(0x0b7ab1e, static_cast<uint64_t>(row_.op), static_cast<uint32_t>(k));
      std::vector<double>& x = v[spec.name];
      x.resize(static_cast<size_t>(shape_numel(spec.shape)));
      for (size_t i = 0; i < x.size(); ++i) x[i] = spec.gen(static_cast<int64_t>(i), rng);
      round_to(spec, x);
    }
    if (row_.prepare) row_.prepare(v);  // from rounded inputs; guarded() rounds what it writes
    return v;
  }

  void round_to(const TensorSpec& spec, std::vector<double>& x) const {
    Tensor one = Tensor::empty({1}, dtype_of(spec.kind, dt_));
    for (double& e : x) put(one, 0, e), e = one.item(0);
  }

  // A host buffer of kPad sentinel elements, the values (rounded to the tensor's dtype, and
  // written back into `x` as rounded) and kPad sentinel elements again.
  Tensor guarded(const TensorSpec& spec, std::vector<double>& x) const {
    const int64_t n = shape_numel(spec.shape);
    Tensor host = Tensor::empty({n + 2 * kPad}, dtype_of(spec.kind, dt_));
    std::memset(host.raw_data(), kSentinel, host.nbytes());
    for (int64_t i = 0; i < n; ++i) {
      put(host, kPad + i, x[static_cast<size_t>(i)]);
      x[static_cast<size_t>(i)] = host.item(kPad + i);
    }
    return host;
  }

  void check_sentinels(const TensorSpec& spec, const Tensor& back, std::vector<std::string>& failures) const {
    const size_t es = back.element_size(), n = static_cast<size_t>(shape_numel(spec.shape));
    const auto* p = static_cast<const unsigned char*>(back.raw_data());
    const size_t pad = static_cast<size_t>(kPad) * es;
    for (size_t b = 0; b < pad; ++b) {
      if (p[b] != kSentinel || p[pad + n * es + b] != kSentinel) {
        failures.push_back(fmt::format("{}: a write outside {} (sentinel bytes changed)", where(), spec.name));
        return;
      }
    }
  }

  void compare(const TensorSpec& spec, const std::vector<double>& got, const std::vector<double>& want,
               std::vector<std::string>& failures) const {
    // A 16-bit tensor takes its dtype's tolerance, an f32 one the data dtype's (it is computed
    // from the op's data tensors); inputs and integer outputs must be exact.
    const DType t = dtype_of(spec.kind, dt_), tt = t == DType::f32 ? dt_ : t;
    const Tol tol = spec.io == Io::in || !is_float(t) ? Tol{}
                    : tt == DType::bf16              ? row_.bf16
                    : tt == DType::f16               ? row_.f16
                                                     : row_.f32;
    int64_t bad = 0;
    std::string first;
    for (size_t i = 0; i < got.size(); ++i) {
      if (agree(got[i], want[i], tol)) continue;
      if (bad++ < 3)
        first += fmt::format(" [{}] = {:.7g}, {} {:.7g};", i, got[i], row_.reference, want[i]);
    }
    if (bad == 0) return;
    failures.push_back(fmt::format("{}: {} {} of {} elements {} (atol {:g}, rtol {:g}):{}", where(), spec.name,
                                   bad, got.size(), spec.io == Io::in ? "changed (an input)" : "differ", tol.atol,
                                   tol.rtol, first));
  }

  const Row& row_;
  DType dt_;
  Device dev_;
  std::map<std::string, Tensor> full_;
};

std::vector<std::string> run_row(const Row& row, DType dt, Device device) { return Harness(row, dt, device).run(); }

}  // namespace tandem::testing::op_table
