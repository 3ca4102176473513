// export_example never destroys what it did not write: a non-empty directory needs --force,
// --force replaces only files of the checkpoint's names that an earlier export wrote (their mark),
// and a failed export leaves neither a temporary nor a directory the loader accepts as a mix of
// old and new shards.
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
  const std::string dir = exported("ours");
  put(fs::path(dir) / "notes.txt", "keep me");
  EXPECT_TRUE(testing::mentions(export_error(dir, small()), {"not empty", "--force"}));
  // --force replaces what an earlier export wrote, and nothing else.
  ExportOptions o = small();
  o.force = true;
  o.seed = 7;
  export_example(dir, o);
  EXPECT_EQ(slurp(fs::path(dir) / "notes.txt"), "keep me");
  EXPECT_EQ(load(dir).report.layout, "index");
  EXPECT_EQ(listing(dir).size(), 5u);  // notes + 2 shards + index + config: no temporary
}

// A file of export's names that export did not write is the user's: --force refuses, naming it,
// before anything in the directory changes.
TEST(ExportSafety, ForceNeverReplacesAFileExportDidNotWrite) {
  const std::string dir = fresh_dir("user_files");
  put(fs::path(dir) / "model.safetensors", "the user's own model");
  ExportOptions o = small();
  o.force = true;
  EXPECT_TRUE(testing::mentions(export_error(dir, o),
                                {"model.safetensors", "not written by mhc export-example"}));
  EXPECT_EQ(slurp(fs::path(dir) / "model.safetensors"), "the user's own model");
  EXPECT_EQ(listing(dir), std::set<std::string>{"model.safetensors"});

  // The user's config.json beside an export: refused even when this export writes none.
  const std::string ck = exported("user_config");
  put(fs::path(ck) / "config.json", R"({"mine": 1})");
  const std::string shard = slurp(fs::path(ck) / kShard1);
  o.config_json = false;
  EXPECT_TRUE(testing::mentions(export_error(ck, o), {"config.json", "not written by"}));
  EXPECT_EQ(slurp(fs::path(ck) / "config.json"), R"({"mine": 1})");
  EXPECT_EQ(slurp(fs::path(ck) / kShard1), shard);

  // A shard of export's name with the mark's key but another value is not export's either.
  const std::string forged = fresh_dir("forged");
  st::Writer w;
  w.add_f32("x", {1}, std::vector<float>{1.0f});
  w.set_metadata("mhc_example", "someone else's");
  w.write((fs::path(forged) / kShard1).string());
  EXPECT_TRUE(testing::mentions(export_error(forged, o), {kShard1, "not written by"}));
  EXPECT_TRUE(fs::exists(fs::path(forged) / kShard1));
}

TEST(ExportSafety, ANonRegularEntryIsRefusedBeforeAnythingChanges) {
  const std::string dir = exported("half");
  const std::string index = slurp(fs::path(dir) / kIndex);
  // config.json replaced by a directory (empty, then not): the export cannot put its own there.
  fs::remove(fs::path(dir) / "config.json");
  fs::create_directories(fs::path(dir) / "config.json");
  ExportOptions o = small();
  o.force = true;
  o.seed = 99;
  EXPECT_TRUE(testing::mentions(export_error(dir, o), {"config.json", "not a regular file"}));
  EXPECT_TRUE(fs::is_directory(fs::path(dir) / "config.json"));  // an empty one is not removed
  fs::create_directories(fs::path(dir) / "config.json" / "x");
  EXPECT_NE(export_error(dir, o), "no error");
  EXPECT_EQ(slurp(fs::path(dir) / kIndex), index);  // the old checkpoint untouched
  for (const auto& name : listing(dir)) EXPECT_EQ(name.find(".mhc-"), std::string::npos) << name;
}

// The reader refuses a header of more than io::kMaxTensors tensors: so does export, up front.
TEST(ExportSafety, MoreTensorsThanTheReaderTakesAreRefusedUpFront) {
  const std::string parent = fresh_dir("many");
  ExportOptions o = small();
  o.hidden = 64;
  o.layers = 125'000;  // 8 x 125,000 + 6 tensors (2 decoys, the final norm, the head's 3)
  EXPECT_TRUE(testing::mentions(export_error((fs::path(parent) / "d").string(), o),
                                {"--layers 125000", "1000006 tensors", "1000000"}));
  EXPECT_TRUE(listing(parent).empty());
  o.layers = 124'999;  // 999,998 tensors: within the limit (not written here: 8 GB of weights)
  EXPECT_NO_THROW(example_params(o));
  o.mtp = 1;  // + 13 tensors
  EXPECT_TRUE(testing::mentions(export_error((fs::path(parent) / "d").string(), o),
                                {"--layers 124999 with --mtp 1", "1000011 tensors"}));
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
