// io::OutputFile and read_regular_file: the write never follows a planted symlink, never touches a
// file it did not create, refuses a directory, an empty path and an input as the target; the read
// refuses a FIFO without blocking and names a symlink loop.
#include "mhc/io/safe_file.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "mhc/io/safetensors.hpp"
#include "st_test_util.hpp"

namespace mhc::io {
namespace {

namespace fs = std::filesystem;
using st::testing::listing;
using st::testing::mentions;

// A fresh directory per test, so listings before/after are exact.
fs::path scratch_dir(const std::string& tag) {
  const fs::path d = fs::path(st::testing::temp_path("safe_" + tag));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void put(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

std::string get(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no mhc::Error";
  return {};
}

TEST(SafeFile, WritesAndLeavesNoTemporary) {
  const fs::path d = scratch_dir("plain");
  write_file((d / "out.txt").string(), "new");
  EXPECT_EQ(get(d / "out.txt"), "new");
  write_file((d / "out.txt").string(), "newer");  // replaces
  EXPECT_EQ(get(d / "out.txt"), "newer");
  EXPECT_EQ(listing(d), std::set<std::string>{"out.txt"});
}

// The old writer used OUT.tmp with fopen("wb"): a symlink there was followed, an unrelated file
// of that name replaced, and a failure deleted it.
TEST(SafeFile, NeverTouchesFilesOfTheOldTemporaryName) {
  const fs::path d = scratch_dir("tmpname");
  put(d / "victim", "precious");
  fs::create_symlink(d / "victim", d / "out.tmp");
  put(d / "unrelated.tmp", "mine");
  write_file((d / "out").string(), "data");
  EXPECT_EQ(get(d / "victim"), "precious");
  EXPECT_TRUE(fs::is_symlink(d / "out.tmp"));
  // A failed write (the target is a directory) leaves DIR.tmp alone too.
  fs::create_directory(d / "dir");
  put(d / "dir.tmp", "also mine");
  EXPECT_TRUE(
      mentions(error_of([&] { write_file((d / "dir").string(), "x"); }), {"dir", "a directory"}));
  EXPECT_EQ(get(d / "dir.tmp"), "also mine");
  EXPECT_EQ(listing(d),
            (std::set<std::string>{"victim", "out.tmp", "unrelated.tmp", "out", "dir", "dir.tmp"}));
}

TEST(SafeFile, RefusesEmptyPathAndAnInputAsTheOutput) {
  EXPECT_TRUE(mentions(error_of([] { write_file("", "x"); }), {"output path is empty"}));
  const fs::path d = scratch_dir("same");
  put(d / "in", "input");
  const std::vector<std::string> inputs = {(d / "in").string()};
  EXPECT_TRUE(mentions(error_of([&] { write_file((d / "in").string(), "x", inputs); }),
                       {"same file as the input"}));
  fs::create_hard_link(d / "in", d / "hard");
  fs::create_symlink(d / "in", d / "soft");
  for (const char* alias : {"hard", "soft"}) {
    EXPECT_TRUE(mentions(error_of([&] { write_file((d / alias).string(), "x", inputs); }),
                         {"same file as the input"}));
  }
  EXPECT_EQ(get(d / "in"), "input");
  // `--inputs X.tmp --out X`: the input named like the old temporary survives.
  put(d / "x.tmp", "input 2");
  const std::vector<std::string> tmp_input = {(d / "x.tmp").string()};
  write_file((d / "x").string(), "out", tmp_input);
  EXPECT_EQ(get(d / "x.tmp"), "input 2");
}

TEST(SafeFile, AnUncommittedFileLeavesNothing) {
  const fs::path d = scratch_dir("uncommitted");
  put(d / "out", "old");
  {
    OutputFile f((d / "out").string());
    f.write(std::string_view("partial"));
    EXPECT_TRUE(fs::exists(f.temp_path()));
  }  // e.g. an exception before commit()
  EXPECT_EQ(get(d / "out"), "old");
  EXPECT_EQ(listing(d), std::set<std::string>{"out"});
}

TEST(SafeFile, SafetensorsWriterUsesIt) {
  const fs::path d = scratch_dir("writer");
  put(d / "victim", "precious");
  fs::create_symlink(d / "victim", d / "w.safetensors.tmp");
  st::Writer w;
  w.add_f32("t", {1}, std::vector<float>{1.0f});
  w.write((d / "w.safetensors").string());
  EXPECT_EQ(get(d / "victim"), "precious");
  EXPECT_EQ(st::File::open((d / "w.safetensors").string()).names(), std::vector<std::string>{"t"});
  const std::vector<std::string> inputs = {(d / "w.safetensors").string()};
  EXPECT_TRUE(mentions(error_of([&] { w.write((d / "w.safetensors").string(), inputs); }),
                       {"same file as the input"}));
}

TEST(SafeFile, ReadsOnlyRegularFilesWithoutBlocking) {
  const fs::path d = scratch_dir("read");
  ASSERT_EQ(::mkfifo((d / "fifo").c_str(), 0600), 0);
  // Without O_NONBLOCK this open would wait for a writer forever.
  EXPECT_TRUE(mentions(error_of([&] { read_regular_file((d / "fifo").string(), 100, "index"); }),
                       {"not a regular file", "FIFO"}));
  EXPECT_TRUE(mentions(error_of([&] { st::File::open((d / "fifo").string()); }), {"FIFO"}));
  EXPECT_TRUE(
      mentions(error_of([&] { read_regular_file(d.string(), 100, "index"); }), {"a directory"}));
  fs::create_symlink(d / "loop", d / "loop");
  EXPECT_TRUE(mentions(error_of([&] { read_regular_file((d / "loop").string(), 100, "index"); }),
                       {"symlink loop"}));
  put(d / "big", std::string(101, 'x'));
  EXPECT_TRUE(mentions(error_of([&] { read_regular_file((d / "big").string(), 100, "index"); }),
                       {"101 bytes", "limit 100"}));
  EXPECT_EQ(read_regular_file((d / "big").string(), 101, "index").size(), 101u);
}

}  // namespace
}  // namespace mhc::io
