/// \file
/// Faulting in a fresh output's pages in one batch before a kernel writes it
/// (the runtime table's `prefault_for_write`, cppinductor_prelude.h).
///
/// Why: a 64 MB output freshly mmapped by the allocator costs ~16K page
/// faults, most of the time a clone of it takes; the trap per 4 KiB page is
/// most of that. madvise(MADV_POPULATE_WRITE) does the
/// same work (same 4 KiB pages, same memory) without a trap per page. Kernels
/// call it per parallel chunk, so one thread's batch overlaps the other's
/// compute.
#pragma once

#include <cstdint>

namespace cppi::cpu {

/// Chunks below this many bytes are left to fault as they are written: the
/// syscalls would cost more than they save.
constexpr int64_t kMinPrefaultBytes = int64_t{1} << 20;

/// Populates the whole pages inside [p, p + bytes) for writing when the first
/// of them is not resident yet (a fresh mapping; recycled heap memory is
/// resident and skipped after one mincore call). Best effort: does nothing
/// below kMinPrefaultBytes, on kernels without MADV_POPULATE_WRITE (< 5.14)
/// or on any error; the kernel's stores then fault as usual. Never changes
/// memory contents (only not-present pages are faulted in, as zeros).
void prefault_for_write(void* p, int64_t bytes);

}  // namespace cppi::cpu
