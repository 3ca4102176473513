// test_dist's main: the lent GPU machines need NVLink SHARP / multicast off, and NCCL reads its
// environment at its first call, so it is set here, before any test runs (the library leaves the
// environment to its caller: docs/tensor_parallel.md). A value set by whoever runs the tests wins.
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
