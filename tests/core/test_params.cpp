// MhcParams: the named presets, derived sizes, describe() and validate()'s impossible shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "mhc/core/error.hpp"
#include "mhc/core/params.hpp"

namespace mhc {
namespace {

struct PresetCase {
  const char* name;
  int hidden;
  int layers;
};

void PrintTo(const PresetCase& c, std::ostream* os) {
  *os << c.name << " (C=" << c.hidden << ", " << c.layers << " layers)";
}

class Preset : public ::testing::TestWithParam<PresetCase> {};

TEST_P(Preset, HasTheDesignShapes) {
  const MhcParams p = preset(GetParam().name);
  EXPECT_EQ(p.hidden, GetParam().hidden);
  EXPECT_EQ(p.layers, GetParam().layers);
  EXPECT_EQ(p.n, 4);
  EXPECT_EQ(p.sinkhorn_iters, 20);
  EXPECT_EQ(p.eps_h, 1e-6);
  EXPECT_EQ(p.eps_n, 1e-20);
  EXPECT_EQ(p.post_mult, 2.0);
  EXPECT_EQ(p.nmix(), 24);
  EXPECT_EQ(p.k(), 4 * int64_t{GetParam().hidden});
  EXPECT_EQ(p.sites(), 2 * GetParam().layers);
  EXPECT_NO_THROW(validate(p));
}

INSTANTIATE_TEST_SUITE_P(Named, Preset,
                         ::testing::Values(PresetCase{"dsv41-flash", 5120, 40},
                                           PresetCase{"dsv4-flash", 4096, 43},
                                           PresetCase{"dsv4-pro", 7168, 61}),
                         [](const auto& info) {
                           std::string name = info.param.name;
                           for (char& c : name) c = (c == '-') ? '_' : c;
                           return name;
                         });

TEST(Params, DefaultIsTheDefaultPreset) {
  const MhcParams d;
  const MhcParams p = preset(kDefaultPreset);
  EXPECT_EQ(kDefaultPreset, "dsv41-flash");
  EXPECT_EQ(describe(d), describe(p));
  EXPECT_EQ(d.k(), 20480);
}

TEST(Params, PresetNamesListsAllThree) {
  EXPECT_EQ(preset_names(), (std::vector<std::string>{"dsv41-flash", "dsv4-flash", "dsv4-pro"}));
}

TEST(Params, UnknownPresetNamesTheKnownOnes) {
  try {
    preset("dsv41-pro");
    ADD_FAILURE() << "unknown preset accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'dsv41-pro'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("dsv41-flash, dsv4-flash, dsv4-pro"), std::string::npos) << msg;
  }
  EXPECT_THROW(preset(""), Error);
  EXPECT_THROW(preset("DSV41-FLASH"), Error);
}

TEST(Params, NmixForOtherStreamCounts) {
  MhcParams p;
  p.n = 2;
  EXPECT_EQ(p.nmix(), 8);
  p.n = 3;
  EXPECT_EQ(p.nmix(), 15);
}

TEST(Params, Describe) {
  EXPECT_EQ(
      describe(preset("dsv41-flash")),
      "C=5120 n=4 K=20480 NMIX=24 layers=40 sinkhorn_iters=20 eps_h=1e-06 eps_n=1e-20 post_mult=2");
  MhcParams p = preset("dsv4-pro");
  p.n = 2;
  EXPECT_EQ(
      describe(p),
      "C=7168 n=2 K=14336 NMIX=8 layers=61 sinkhorn_iters=20 eps_h=1e-06 eps_n=1e-20 post_mult=2");
}

using Tweak = void (*)(MhcParams&);

struct BadShape {
  Tweak tweak;
  const char* field;  // the message must name it
};

TEST(Params, ValidateRejectsImpossibleShapes) {
  const std::vector<BadShape> cases = {
      {[](MhcParams& p) { p.hidden = 0; }, "C=0"},
      {[](MhcParams& p) { p.hidden = -5120; }, "C=-5120"},
      {[](MhcParams& p) { p.hidden = 5121; }, "C=5121"},
      {[](MhcParams& p) { p.hidden = (1 << 20) + 8; }, "C=1048584"},
      {[](MhcParams& p) { p.n = 0; }, "n=0"},
      {[](MhcParams& p) { p.n = 9; }, "n=9"},
      {[](MhcParams& p) { p.layers = 0; }, "layers=0"},
      {[](MhcParams& p) { p.layers = (1 << 20) + 1; }, "layers=1048577"},
      {[](MhcParams& p) { p.layers = 1 << 30; }, "layers=1073741824"},
      {[](MhcParams& p) { p.sinkhorn_iters = 0; }, "sinkhorn_iters=0"},
      {[](MhcParams& p) { p.eps_h = -1e-6; }, "eps_h"},
      {[](MhcParams& p) { p.eps_h = std::numeric_limits<double>::quiet_NaN(); }, "eps_h"},
      {[](MhcParams& p) { p.eps_n = std::numeric_limits<double>::infinity(); }, "eps_n"},
      {[](MhcParams& p) { p.eps_n = -1.0; }, "eps_n"},
      {[](MhcParams& p) { p.post_mult = std::numeric_limits<double>::infinity(); }, "post_mult"},
      {[](MhcParams& p) { p.post_mult = std::numeric_limits<double>::quiet_NaN(); }, "post_mult"},
      {[](MhcParams& p) { p.sinkhorn_iters = 1001; }, "sinkhorn_iters=1001 must be at most 1000"},
      // Finite doubles the fp32 arithmetic cannot hold, and zeros that make a zero row NaN.
      {[](MhcParams& p) { p.eps_n = 1e39; }, "eps_n=1e+39 is outside [1.17549e-38, 1e+30]"},
      {[](MhcParams& p) { p.eps_h = 0; }, "eps_h=0 is outside"},
      {[](MhcParams& p) { p.eps_h = 1e31; }, "eps_h=1e+31"},
      {[](MhcParams& p) { p.rms_eps_override = 0.0; }, "rms_eps=0 is outside"},
      {[](MhcParams& p) { p.norm_eps_override = 1e-40; }, "norm_eps=1e-40 is outside"},
      {[](MhcParams& p) { p.sinkhorn_eps_override = 0.0; }, "sinkhorn_eps=0"},
      {[](MhcParams& p) { p.pre_eps_override = 1e39; }, "pre_eps=1e+39 is outside [0, 1e+30]"},
      {[](MhcParams& p) { p.post_mult = 1e31; }, "post_mult=1e+31 is outside [-1e+30, 1e+30]"},
      {[](MhcParams& p) { p.post_mult = -1e31; }, "post_mult=-1e+31"},
  };
  for (const auto& c : cases) {
    MhcParams p;
    c.tweak(p);
    try {
      validate(p);
      ADD_FAILURE() << "accepted a shape with bad " << c.field;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.field), std::string::npos) << e.what();
    }
  }
}

TEST(Params, ValidateAcceptsSmallAndEdgeShapes) {
  MhcParams p;
  p.hidden = 8;
  p.n = 1;
  p.layers = 1;
  p.sinkhorn_iters = 1;
  p.eps_h = kMinDivisorEps;
  p.eps_n = kMinDivisorEps;
  p.pre_eps_override = 0.0;  // no division: 0 is allowed
  p.post_mult = -kMaxParamMagnitude;
  EXPECT_NO_THROW(validate(p));
  p.hidden = 1 << 20;
  p.n = 8;
  p.layers = 1 << 20;
  p.sinkhorn_iters = kMaxSinkhornIters;
  p.eps_h = p.eps_n = kMaxParamMagnitude;
  p.rms_eps_override = p.pre_eps_override = p.sinkhorn_eps_override = p.norm_eps_override =
      kMaxParamMagnitude;
  p.post_mult = kMaxParamMagnitude;
  EXPECT_NO_THROW(validate(p));
}

// A separate epsilon replaces the shared one: a shared value outside the range does not matter
// where every epsilon it stands for is set apart, and the message names what the caller set.
TEST(Params, TheEpsilonAsUsedIsChecked) {
  MhcParams p;
  p.eps_h = 0;
  p.pre_eps_override = 1e-6;
  p.sinkhorn_eps_override = 1e-6;
  EXPECT_NO_THROW(validate(p));
  p.sinkhorn_eps_override.reset();
  try {
    validate(p);
    ADD_FAILURE() << "eps_h = 0 accepted as the Sinkhorn epsilon";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("eps_h=0 is outside [1.17549e-38, 1e+30] (the range of "
                                         "sinkhorn_eps, which it is here)"),
              std::string::npos)
        << e.what();
  }
}

// The reasons the ranges give, as fp32 arithmetic: the smallest divisor epsilon survives the
// conversion to fp32 as a normal number with a finite rsqrt, and the largest magnitude added to
// the largest finite fp32 rounds back to it (no overflow).
TEST(Params, TheRangesHoldInFp32) {
  EXPECT_EQ(float(kMinDivisorEps), std::numeric_limits<float>::min());
  EXPECT_TRUE(std::isfinite(1.0f / std::sqrt(float(kMinDivisorEps))));
  volatile float top = std::numeric_limits<float>::max();
  EXPECT_EQ(top + float(kMaxParamMagnitude), top);
  EXPECT_TRUE(std::isinf(top + 0x1p104f));  // 2^104 would overflow: the bound is that close
  for (const ParamRange& r : param_ranges()) {
    EXPECT_LE(r.lo, r.hi) << r.name;
    EXPECT_TRUE(param_problem(r.name, r.lo).empty()) << r.name;
    EXPECT_TRUE(param_problem(r.name, r.hi).empty()) << r.name;
    EXPECT_FALSE(param_problem(r.name, std::nextafter(r.hi, 1e300)).empty()) << r.name;
    EXPECT_FALSE(param_problem(r.name, std::numeric_limits<double>::quiet_NaN()).empty());
    EXPECT_NE(param_problem(r.name, -1e300).find(r.name), std::string::npos);
  }
  EXPECT_THROW(param_range("no_such_parameter"), Error);
}

}  // namespace
}  // namespace mhc
