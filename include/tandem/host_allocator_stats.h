// Measuring one phase of the pageable host allocator (tandem/allocator.h: host_allocator()),
// as CachingAllocator::reset_peak_stats does for the pools: the memory plan's tests and
// benchmarks compare a step's peak with the plan.
// Thread-safety: safe from any thread.
#pragma once

namespace tandem {

/// Sets host_allocator()'s high-water marks (peak_allocated_bytes, peak_reserved_bytes) to
/// the current values.
void reset_host_peak_stats();

}  // namespace tandem
