// The replaceable global allocation functions, counting. A plain C++ file: nvcc would treat these
// as host-and-device functions. The array and nothrow forms of the standard library call these;
// everything is released with free(), which matches both malloc and aligned_alloc.
#include "alloc_counter.hpp"

#include <cstddef>
#include <cstdlib>
#include <new>

namespace {

// Per thread: the CUDA runtime's own threads may allocate at any moment, and are not the forward.
thread_local int64_t t_allocations = 0;

void* counted_alloc(std::size_t size, std::size_t align) {
  ++t_allocations;
  size = size == 0 ? 1 : size;
  // aligned_alloc wants a size that is a multiple of the alignment.
  void* p = align <= alignof(std::max_align_t)
                ? std::malloc(size)
                : std::aligned_alloc(align, (size + align - 1) / align * align);
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace

int64_t mhc::test::allocations_so_far() { return t_allocations; }

void* operator new(std::size_t size) { return counted_alloc(size, 0); }
void* operator new(std::size_t size, std::align_val_t align) {
  return counted_alloc(size, std::size_t(align));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
