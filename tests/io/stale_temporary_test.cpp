// Temporaries left behind by a process killed mid-write: the next write to the same place removes
// those of mhc's own naming that nobody holds (their flock is free), and nothing else: not another
// name, not a lookalike, not a symlink, not a directory, not a temporary a live writer holds.
// For export-example: stale build directories beside the target (and an older version's inside
// it) lose only export's marked files, mhc's temporaries and what they mirrored; anything else goes
// back into the checkpoint directory.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "checkpoint_test_util.hpp"
#include "mhc/io/safe_file.hpp"

namespace mhc::io {
namespace {

namespace fs = std::filesystem;
using ckpt::testing::exported;
using ckpt::testing::fresh_dir;
using ckpt::testing::put;
using ckpt::testing::slurp;
using st::testing::listing;

constexpr const char* kHex = "0123456789abcdef";

// Holds the flock of `path` while alive, as a live writer does.
struct Held {
  int fd;
  explicit Held(const fs::path& path) : fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    EXPECT_GE(fd, 0) << path;
    EXPECT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0) << path;
  }
  ~Held() { ::close(fd); }
};

TEST(StaleTemporary, NamesAreOursExactly) {
  EXPECT_TRUE(is_temporary_name(".out.st.mhc-0123456789abcdef.tmp", "out.st", "", ".tmp"));
  EXPECT_TRUE(is_temporary_name(".ck.mhc-export-0123456789abcdef", "ck", "export-", ""));
  for (const char* other :
       {".out.st.mhc-0123456789abcdeg.tmp", ".out.st.mhc-0123456789ABCDEF.tmp",
        ".out.st.mhc-0123456789abcde.tmp", "out.st.mhc-0123456789abcdef.tmp",
        ".out.st.mhc-0123456789abcdef.tmp~", ".other.mhc-0123456789abcdef.tmp"}) {
    EXPECT_FALSE(is_temporary_name(other, "out.st", "", ".tmp")) << other;
  }
  EXPECT_EQ(temporary_stem("/a/b/" + std::string(100, 'x')), std::string(64, 'x'));
}

TEST(StaleTemporary, TheNextWriteRemovesOnlyDeadWritersTemporaries) {
  const fs::path dir = fresh_dir("stale_files");
  const fs::path out = dir / "out.st";
  const std::string stale = std::string(".out.st.mhc-") + kHex + ".tmp";
  const std::string held = ".out.st.mhc-fedcba9876543210.tmp";
  const std::string link = ".out.st.mhc-00000000000000aa.tmp";
  const std::string subdir = ".out.st.mhc-00000000000000bb.tmp";
  for (const auto& name : {stale, held, std::string(".out.st.mhc-0123456789abcdeg.tmp"),
                           std::string(".other.st.mhc-") + kHex + ".tmp", std::string("notes")}) {
    put(dir / name, "x");
  }
  put(dir / "target", "the symlink's target");
  fs::create_symlink(dir / "target", dir / link);
  fs::create_directory(dir / subdir);
  const Held live(dir / held);
  write_file(out.string(), "new");
  const std::set<std::string> expected = {held,
                                          link,
                                          subdir,
                                          ".out.st.mhc-0123456789abcdeg.tmp",
                                          std::string(".other.st.mhc-") + kHex + ".tmp",
                                          "notes",
                                          "target",
                                          "out.st"};
  EXPECT_EQ(listing(dir), expected);
  EXPECT_EQ(slurp(dir / "target"), "the symlink's target");
  EXPECT_EQ(slurp(out), "new");
}

// A checkpoint directory with the user's notes, and the stale directories killed exports left.
TEST(StaleTemporary, AnExportRemovesWhatKilledExportsLeftAndKeepsTheRest) {
  const std::string dir = exported("stale_export");
  const fs::path d(dir), parent = d.parent_path();
  put(d / "notes.txt", "keep me");
  // Killed after the exchange: the old checkpoint (marked), a link to notes.txt, and a file that
  // appeared in the directory meanwhile (the user's: it must come back).
  const fs::path after = parent / ("." + d.filename().string() + ".mhc-export-" + kHex);
  fs::create_directory(after);
  fs::copy_file(d / "config.json", after / "config.json");
  fs::create_hard_link(d / "notes.txt", after / "notes.txt");
  put(after / "late.txt", "written during the export");
  put(after / ".config.json.mhc-00000000000000cc.tmp", "half");
  // An older version's build directory inside the target: a half-written new checkpoint.
  const fs::path inside = d / (std::string(".checkpoint.mhc-export-") + kHex);
  fs::create_directory(inside);
  fs::copy_file(d / ckpt::testing::kShard1, inside / ckpt::testing::kShard1);
  // A live export's directory: held, so untouched.
  const fs::path live_dir = parent / ("." + d.filename().string() + ".mhc-export-fedcba9876543210");
  fs::create_directory(live_dir);
  put(live_dir / "config.json", "being written");
  const Held live(live_dir);

  ckpt::ExportOptions o = ckpt::testing::small();
  o.force = true;
  o.seed = 8;
  ckpt::export_example(dir, o);
  EXPECT_FALSE(fs::exists(after));
  EXPECT_FALSE(fs::exists(inside));
  EXPECT_EQ(slurp(d / "notes.txt"), "keep me");
  EXPECT_EQ(slurp(d / "late.txt"), "written during the export");
  EXPECT_EQ(slurp(live_dir / "config.json"), "being written");
  EXPECT_EQ(ckpt::load(dir).report.layout, "index");
  EXPECT_EQ(listing(d),
            (std::set<std::string>{"config.json", "late.txt", "notes.txt", ckpt::testing::kIndex,
                                   ckpt::testing::kShard1, ckpt::testing::kShard2}));
}

// A stale directory holding something that is neither export's nor mirrored, whose name is taken
// in the checkpoint directory: it stays where it is (and so does the directory), never removed.
TEST(StaleTemporary, WhatCannotBePutBackStays) {
  const std::string dir = exported("stale_clash");
  const fs::path d(dir);
  put(d / "mine.txt", "the directory's");
  const fs::path stale = d.parent_path() / ("." + d.filename().string() + ".mhc-export-" + kHex);
  fs::create_directory(stale);
  put(stale / "mine.txt", "the stale directory's");
  put(stale / "config.json", R"({"not": "marked"})");
  ckpt::ExportOptions o = ckpt::testing::small();
  o.force = true;
  ckpt::export_example(dir, o);
  EXPECT_EQ(slurp(stale / "mine.txt"), "the stale directory's");
  EXPECT_EQ(slurp(d / "mine.txt"), "the directory's");
  EXPECT_EQ(slurp(stale / "config.json"), R"({"not": "marked"})");  // its name is taken: kept
}

}  // namespace
}  // namespace mhc::io
