#include "core/huge_pages.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

namespace tandem::detail {

bool wants_huge_pages(size_t bytes) {
  static const bool enabled = [] {
    const char* v = std::getenv("TANDEM_HUGE_PAGES");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return enabled && bytes >= kHugePageMinBytes;
}

void advise_huge_pages(void* p, size_t bytes) {
#ifdef MADV_HUGEPAGE
  (void)madvise(p, bytes, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace tandem::detail
