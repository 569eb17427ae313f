// Transparent huge pages for large host buffers: the allocators of host_allocator.cpp and
// pinned_allocator.cpp align buffers of kHugePageMinBytes and more to 2 MiB and ask the kernel
// to back them with 2 MiB pages (madvise MADV_HUGEPAGE; Linux's "madvise" THP mode, the
// common default, gives huge pages only to regions that ask). A stream over such a buffer
// crosses a page 512 times less often: fewer TLB misses and page walks, which on a 2-core
// AMD EPYC (Zen 3) lets the Adam update's seven streams move about 9% more bytes per
// second (docs/benchmarks.md). TANDEM_HUGE_PAGES=0 turns it off (read once). Private to
// src/core.
#pragma once

#include <cstddef>

namespace tandem::detail {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;
inline constexpr size_t kHugePageMinBytes = size_t{8} << 20;

/// Whether a buffer of `bytes` gets huge pages: at least kHugePageMinBytes and not turned
/// off by TANDEM_HUGE_PAGES=0.
bool wants_huge_pages(size_t bytes);

/// madvise(MADV_HUGEPAGE) on [p, p + bytes); best effort (an error, e.g. a kernel without
/// THP, leaves ordinary pages). Call before the pages are first touched.
void advise_huge_pages(void* p, size_t bytes);

}  // namespace tandem::detail
