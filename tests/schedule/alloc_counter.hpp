// Counts host allocations: global operator new is replaced in the test_schedule binary
// (alloc_counter.cpp) by one that counts its calls per thread.
#pragma once
#include <cstdint>

namespace mhc::test {

// Calls of global operator new this thread has made so far.
int64_t allocations_so_far();

// Calls of global operator new this thread makes while `body` runs.
template <typename Body>
int64_t allocations_in(Body&& body) {
  const int64_t before = allocations_so_far();
  body();
  return allocations_so_far() - before;
}

}  // namespace mhc::test
