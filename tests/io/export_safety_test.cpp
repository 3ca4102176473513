// export_example never destroys what it did not write: a non-empty directory needs --force,
// --force replaces only the checkpoint's own file names, and a failed export leaves neither a
// temporary nor a directory the loader accepts as a mix of old and new shards.
#include "checkpoint_test_util.hpp"

namespace mhc::ckpt {
namespace {

using testing::exported;
using testing::fresh_dir;
using testing::kIndex;
using testing::kShard1;
using testing::put;
using testing::slurp;
using testing::small;
namespace fs = std::filesystem;
using st::testing::listing;

std::string export_error(const std::string& dir, const ExportOptions& o) {
  try {
    export_example(dir, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(ExportSafety, NewDirectoryAppearsWhole) {
  const fs::path parent = fresh_dir("whole");
  const std::string dir = (parent / "ckpt").string();
  export_example(dir, small());
  EXPECT_EQ(listing(parent), std::set<std::string>{"ckpt"});  // no temporary left beside it
  EXPECT_EQ(load(dir).weights.params.layers, 3);
  // A trailing slash names the same new directory.
  export_example((parent / "slash").string() + "/", small());
  EXPECT_EQ(listing(parent), (std::set<std::string>{"ckpt", "slash"}));
}

TEST(ExportSafety, NonEmptyDirectoryNeedsForce) {
  const std::string dir = fresh_dir("user_files");
  put(fs::path(dir) / "model.safetensors", "the user's own model");
  put(fs::path(dir) / "notes.txt", "keep me");
  EXPECT_TRUE(testing::mentions(export_error(dir, small()), {"not empty", "--force"}));
  EXPECT_EQ(slurp(fs::path(dir) / "model.safetensors"), "the user's own model");
  EXPECT_EQ(listing(dir), (std::set<std::string>{"model.safetensors", "notes.txt"}));
  // --force replaces the checkpoint names and nothing else.
  ExportOptions o = small();
  o.force = true;
  export_example(dir, o);
  EXPECT_EQ(slurp(fs::path(dir) / "notes.txt"), "keep me");
  EXPECT_FALSE(fs::exists(fs::path(dir) / "model.safetensors"));  // the other layout, replaced
  EXPECT_EQ(load(dir).report.layout, "index");
  EXPECT_EQ(listing(dir).size(), 5u);  // notes + 2 shards + index + config: no temporary
}

TEST(ExportSafety, AFailedForcedExportLeavesNothingTheLoaderAccepts) {
  const std::string dir = exported("half");
  // config.json replaced by a non-empty directory: the export cannot put its own there.
  fs::remove(fs::path(dir) / "config.json");
  fs::create_directories(fs::path(dir) / "config.json" / "x");
  ExportOptions o = small();
  o.force = true;
  o.seed = 99;
  EXPECT_NE(export_error(dir, o), "no error");
  EXPECT_ANY_THROW(load(dir));  // old shards without their index, or none: never a mixed set
  for (const auto& name : listing(dir)) EXPECT_EQ(name.find(".mhc-"), std::string::npos) << name;
}

TEST(ExportSafety, RefusesAFileAndAnEmptyName) {
  const std::string dir = fresh_dir("file");
  put(fs::path(dir) / "f", "x");
  EXPECT_TRUE(testing::mentions(export_error((fs::path(dir) / "f").string(), small()),
                                {"not a directory"}));
  EXPECT_TRUE(testing::mentions(export_error("", small()), {"empty"}));
  EXPECT_EQ(slurp(fs::path(dir) / "f"), "x");
}

}  // namespace
}  // namespace mhc::ckpt
