// Error type for everything on the host side: bad shapes, bad configuration, bad files.
// Kernels do not throw; they return a cudaError_t that their launcher turns into an mhc::Error.
#pragma once
#include <stdexcept>
#include <string>

namespace mhc {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace mhc
