// Low-precision matrix products on oneDNN's matmul primitive, cached per shape and layout.
#include "backend/cpu/cpu_matmul.h"

#include <fmt/format.h>

#include <string>
#include <unordered_map>

#include "backend/cpu/dnnl_context.h"

namespace tandem::ops::cpu {
namespace {

using dnnl::memory;

struct MatmulEntry : CacheEntry {
  dnnl::matmul prim;
  memory::desc a, b, bias, c, scratch;
};

memory::desc matrix_md(int64_t rows, int64_t cols, DType t, bool transposed) {
  return memory::desc({rows, cols}, dnnl_type(t), transposed ? memory::format_tag::ba : memory::format_tag::ab);
}

std::shared_ptr<MatmulEntry> make_entry(DType ab, int64_t m, int64_t n, int64_t k, bool at, bool bt, bool bias,
                                        DType c_type, bool accumulate) {
  auto r = std::make_shared<MatmulEntry>();
  r->a = matrix_md(m, k, ab, at);
  r->b = matrix_md(k, n, ab, bt);
  r->bias = memory::desc({1, n}, memory::data_type::f32, memory::format_tag::ab);
  r->c = matrix_md(m, n, c_type, false);
  // A fresh attribute object: copies of primitive_attr() share one handle.
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (accumulate) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  const dnnl::matmul::desc desc =
      bias ? dnnl::matmul::desc(r->a, r->b, r->bias, r->c) : dnnl::matmul::desc(r->a, r->b, r->c);
  const dnnl::matmul::primitive_desc pd(desc, attr, engine());
  r->prim = dnnl::matmul(pd);
  r->scratch = pd.scratchpad_desc();
  return r;
}

}  // namespace

void matmul(DType ab, int64_t m, int64_t n, int64_t k, MatArg a, MatArg b, const float* bias, void* c,
            DType c_type, bool accumulate) {
  const std::string key = fmt::format("matmul {} {}x{}x{} t{}{} b{} c{} acc{}", dtype_name(ab), m, n, k,
                                      a.transposed ? 1 : 0, b.transposed ? 1 : 0, bias ? 1 : 0,
                                      dtype_name(c_type), accumulate ? 1 : 0);
  auto e = cached_as<MatmulEntry>(
      key, [&] { return make_entry(ab, m, n, k, a.transposed, b.transposed, bias != nullptr, c_type, accumulate); });
  std::lock_guard<std::mutex> lock(e->mu);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(e->a, engine(), const_cast<void*>(a.data))},
                                       {DNNL_ARG_WEIGHTS, memory(e->b, engine(), const_cast<void*>(b.data))},
                                       {DNNL_ARG_DST, memory(e->c, engine(), c)},
                                       {DNNL_ARG_SCRATCHPAD, scratchpad(e->scratch)}};
  if (bias) args.emplace(DNNL_ARG_BIAS, memory(e->bias, engine(), const_cast<float*>(bias)));
  e->prim.execute(stream(), args);
  stream().wait();
}

}  // namespace tandem::ops::cpu
