// The head collapse's tensors in a checkpoint (docs/head.md): read under both namings when all
// three are there, absent when none is, and refused (the tensor named) when incomplete, of the
// wrong shape or dtype, or not finite.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "checkpoint_test_util.hpp"
#include "mhc/cpu/model.hpp"

namespace mhc::ckpt {
namespace {

namespace fs = std::filesystem;

using testing::exported;
using testing::load_error;
using testing::mentions;
using testing::small;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct HeadTensors {
  std::vector<float> fn, base, scale;
  st::Shape fn_shape;
};

// The synthetic model's head for the small checkpoint's shape.
HeadTensors synthetic_head(const ExportOptions& o) {
  const MhcParams p = example_params(o);
  const HeadWeights h = synthetic_model(p, o.seed).head;
  return {h.hc_fn, h.hc_base, h.hc_scale, {p.n, p.k()}};
}

// A single-file checkpoint with `head`'s tensors added under `naming` (those named in `skip`
// left out), the checkpoint's file path returned.
std::string with_head(const std::string& tag, Naming naming, const HeadTensors& head,
                      std::initializer_list<HeadSlot> skip = {}) {
  ExportOptions o = small(naming);
  o.single_file = true;
  o.head = false;  // added below, as the test asks
  const std::string dir = exported(tag, o);
  const fs::path file = fs::path(dir) / "model.safetensors";
  st::Writer w;
  {
    const st::File in = st::File::open(file.string());
    for (const auto& t : in.tensors()) w.add(t.name, t.dtype, t.shape, in.bytes(t));
  }
  const auto skipped = [&](HeadSlot s) {
    return std::find(skip.begin(), skip.end(), s) != skip.end();
  };
  if (!skipped(HeadSlot::kFn))
    w.add_f32(head_tensor_name(naming, HeadSlot::kFn), head.fn_shape, head.fn);
  if (!skipped(HeadSlot::kBase)) {
    w.add_f32(head_tensor_name(naming, HeadSlot::kBase), {int64_t(head.base.size())}, head.base);
  }
  if (!skipped(HeadSlot::kScale)) {
    w.add_f32(head_tensor_name(naming, HeadSlot::kScale), {int64_t(head.scale.size())}, head.scale);
  }
  w.write(file.string());
  return file.string();
}

TEST(CheckpointHead, Names) {
  EXPECT_EQ(head_tensor_name(Naming::kOfficial, HeadSlot::kFn), "hc_head_fn");
  EXPECT_EQ(head_tensor_name(Naming::kOfficial, HeadSlot::kBase), "hc_head_base");
  EXPECT_EQ(head_tensor_name(Naming::kOfficial, HeadSlot::kScale), "hc_head_scale");
  EXPECT_EQ(head_tensor_name(Naming::kHf, HeadSlot::kFn), "model.hc_head.hc_fn");
  EXPECT_EQ(head_tensor_name(Naming::kHf, HeadSlot::kBase), "model.hc_head.hc_base");
  EXPECT_EQ(head_tensor_name(Naming::kHf, HeadSlot::kScale), "model.hc_head.hc_scale");
}

TEST(CheckpointHead, ReadUnderBothNamings) {
  for (Naming naming : {Naming::kOfficial, Naming::kHf}) {
    SCOPED_TRACE(std::string(to_string(naming)));
    const HeadTensors head = synthetic_head(small(naming));
    const Loaded l = load(with_head("head_both", naming, head));
    EXPECT_TRUE(l.report.head_from_checkpoint);
    EXPECT_TRUE(same_bits(l.weights.head.hc_fn, head.fn));
    EXPECT_TRUE(same_bits(l.weights.head.hc_base, head.base));
    EXPECT_TRUE(same_bits(l.weights.head.hc_scale, head.scale));
    EXPECT_TRUE(mentions(describe(l.report, l.weights.params), {"hc_head", "from the checkpoint"}));
  }
}

TEST(CheckpointHead, ExportWritesIt) {
  for (Naming naming : {Naming::kOfficial, Naming::kHf}) {
    SCOPED_TRACE(std::string(to_string(naming)));
    const HeadTensors head = synthetic_head(small(naming));
    const Loaded l = load(exported("head_export", small(naming)));
    EXPECT_TRUE(l.report.head_from_checkpoint);
    EXPECT_TRUE(same_bits(l.weights.head.hc_fn, head.fn));
    EXPECT_TRUE(same_bits(l.weights.head.hc_base, head.base));
    EXPECT_TRUE(same_bits(l.weights.head.hc_scale, head.scale));
  }
}

TEST(CheckpointHead, AbsentIsReportedNotInvented) {
  ExportOptions o = small();
  o.head = false;
  const Loaded l = load(exported("head_absent", o));
  EXPECT_FALSE(l.report.head_from_checkpoint);
  EXPECT_TRUE(l.weights.head.empty());
  EXPECT_TRUE(mentions(describe(l.report, l.weights.params), {"head", "not in the checkpoint"}));
}

TEST(CheckpointHead, IncompleteIsRefused) {
  const HeadTensors head = synthetic_head(small());
  EXPECT_TRUE(
      mentions(load_error(with_head("head_no_scale", Naming::kOfficial, head, {HeadSlot::kScale})),
               {"incomplete", "'hc_head_fn'", "not 'hc_head_scale'"}));
  EXPECT_TRUE(mentions(
      load_error(with_head("head_fn_only", Naming::kHf, head, {HeadSlot::kBase, HeadSlot::kScale})),
      {"model.hc_head.hc_base", "model.hc_head.hc_scale"}));
}

TEST(CheckpointHead, WrongShapeDtypeOrValueIsRefused) {
  const HeadTensors good = synthetic_head(small());
  HeadTensors wide = good;
  wide.fn.resize(wide.fn.size() + size_t(wide.fn_shape[0]), 0.5f);
  wide.fn_shape[1] += 1;
  EXPECT_TRUE(
      mentions(load_error(with_head("head_wide", Naming::kOfficial, wide)), {"hc_head_fn"}));
  HeadTensors two_scales = good;
  two_scales.scale.push_back(1.0f);
  EXPECT_TRUE(mentions(load_error(with_head("head_scales", Naming::kOfficial, two_scales)),
                       {"hc_head_scale"}));
  HeadTensors nan = good;
  nan.base[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(mentions(load_error(with_head("head_nan", Naming::kOfficial, nan)),
                       {"hc_head_base", "non-finite"}));

  // A bf16 hc_fn: the head's projection weights are F32, like the sites'.
  const std::string file = with_head("head_bf16", Naming::kOfficial, good, {HeadSlot::kFn});
  st::Writer w;
  {
    const st::File in = st::File::open(file);
    for (const auto& t : in.tensors()) w.add(t.name, t.dtype, t.shape, in.bytes(t));
  }
  std::vector<Bf16> fn_bf16;
  for (float v : good.fn) fn_bf16.push_back(float_to_bf16(v));
  w.add_bf16("hc_head_fn", good.fn_shape, fn_bf16);
  w.write(file);
  EXPECT_TRUE(mentions(load_error(file), {"hc_head_fn"}));
}

}  // namespace
}  // namespace mhc::ckpt
