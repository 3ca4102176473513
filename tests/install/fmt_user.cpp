// An engine that formats with fmt of its own, beside mhc, in one program: mhc's fmt sits in a
// namespace of its own (cmake/Dependencies.cmake), so both link and each formats its own text.
#include <fmt/core.h>

#include <mhc/mhc.hpp>
#include <stdexcept>
#include <string>

int main() {
  mhc::MhcParams params;
  params.eps_h = 0.0;  // below its range: mhc formats the message, the range's bounds with {:g}
  std::string mhc_message;
  try {
    mhc::validate(params);
  } catch (const std::exception& e) {
    mhc_message = e.what();
  }
  const std::string own = fmt::format("{:.3f} {:>4}", 1.0 / 3.0, 7);
  fmt::print("fmt_user: own '{}', mhc '{}'\n", own, mhc_message);
  const bool mhc_ok = mhc_message.find("eps_h=0 is outside [") == 0 &&
                      mhc_message.find(", 1e+30]") != std::string::npos;
  return own == "0.333    7" && mhc_ok ? 0 : 1;
}
