#include "backend/cpu/dnnl_context.h"

#include <omp.h>

#include <cstddef>
#include <memory>
#include <unordered_map>

#include "tandem/cpu_isa.h"

namespace tandem::ops::cpu {

dnnl::engine& engine() {
  static dnnl::engine e = [] {
    apply_cpu_isa_cap();  // before the first primitive (tandem/cpu_isa.h)
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

const dnnl::primitive_attr& primitive_attr() {
  static const dnnl::primitive_attr attr = [] {
    dnnl::primitive_attr a;
    a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return a;
  }();
  return attr;
}

namespace {

// One thread's scratchpad bytes, 64-byte aligned, grown on demand.
struct ThreadScratch {
  std::unique_ptr<std::byte[]> bytes;
  size_t size = 0;
  void* data = nullptr;

  void* reserve(size_t need) {
    if (need > size) {
      constexpr size_t kAlign = 64;
      bytes = std::make_unique<std::byte[]>(need + kAlign);
      void* p = bytes.get();
      size_t space = need + kAlign;
      data = std::align(kAlign, need, p, space);
      size = need;
    }
    return data;
  }
};

}  // namespace

dnnl::memory scratchpad(const dnnl::memory::desc& md) {
  thread_local ThreadScratch scratch;
  return dnnl::memory(md, engine(), scratch.reserve(md.get_size()));
}

std::shared_ptr<CacheEntry> cached(const std::string& key, const std::function<std::shared_ptr<CacheEntry>()>& make) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<CacheEntry>> entries;
  // oneDNN partitions work by the thread count at creation time, so it is part of the key.
  const std::string full = key + "|t" + std::to_string(omp_get_max_threads());
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = entries.find(full);
    if (it != entries.end()) return it->second;
  }
  std::shared_ptr<CacheEntry> e = make();
  std::lock_guard<std::mutex> lock(mu);
  auto [it, inserted] = entries.emplace(full, std::move(e));
  return it->second;
}

dnnl::memory::desc plain_md(const dnnl::memory::dims& dims) { return plain_md(dims, dnnl::memory::data_type::f32); }

dnnl::memory::data_type dnnl_type(DType dtype) {
  switch (dtype) {
    case DType::bf16: return dnnl::memory::data_type::bf16;
    case DType::f16: return dnnl::memory::data_type::f16;
    default: return dnnl::memory::data_type::f32;
  }
}

dnnl::memory::desc plain_md(const dnnl::memory::dims& dims, dnnl::memory::data_type dt) {
  dnnl::memory::format_tag tag = dnnl::memory::format_tag::a;
  switch (dims.size()) {
    case 1: tag = dnnl::memory::format_tag::a; break;
    case 2: tag = dnnl::memory::format_tag::ab; break;
    case 3: tag = dnnl::memory::format_tag::abc; break;
    case 4: tag = dnnl::memory::format_tag::abcd; break;
    default: tag = dnnl::memory::format_tag::abcde; break;
  }
  return dnnl::memory::desc(dims, dt, tag);
}

}  // namespace tandem::ops::cpu

namespace tandem::ops::cpu {

void Operand::init(const dnnl::memory::desc& user, const dnnl::memory::desc& prim, bool input) {
  user_md = user;
  prim_md = prim;
  needs_reorder = user != prim;
  if (needs_reorder) {
    buf = dnnl::memory(prim, engine());
    auto pd = input ? dnnl::reorder::primitive_desc(engine(), user, engine(), prim, primitive_attr())
                    : dnnl::reorder::primitive_desc(engine(), prim, engine(), user, primitive_attr());
    reorder = dnnl::reorder(pd);
    reorder_scratchpad = pd.scratchpad_desc();
  }
}

dnnl::memory Operand::input(const void* p) {
  dnnl::memory u(user_md, engine(), const_cast<void*>(p));
  if (!needs_reorder) return u;
  reorder.execute(stream(), {{DNNL_ARG_FROM, u},
                             {DNNL_ARG_TO, buf},
                             {DNNL_ARG_SCRATCHPAD, scratchpad(reorder_scratchpad)}});
  return buf;
}

dnnl::memory Operand::output(void* p) {
  if (needs_reorder) return buf;
  return dnnl::memory(user_md, engine(), p);
}

void Operand::finish_output(void* p) {
  if (!needs_reorder) return;
  dnnl::memory u(user_md, engine(), p);
  reorder.execute(stream(), {{DNNL_ARG_FROM, buf},
                             {DNNL_ARG_TO, u},
                             {DNNL_ARG_SCRATCHPAD, scratchpad(reorder_scratchpad)}});
}

}  // namespace tandem::ops::cpu
