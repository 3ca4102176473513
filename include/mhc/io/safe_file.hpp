// Every file mhc writes goes through OutputFile, and every file it reads whole through
// read_regular_file. Writing: a temporary created exclusively (O_CREAT | O_EXCL | O_NOFOLLOW, a
// random name) next to the target, written, fsync'd, then renamed onto the target, so a reader
// sees the old file or the new one, a symlink planted at a guessable name is never followed, and a
// failure removes only the temporary mhc created. Refused up front: an empty path, a directory or
// any other non-regular file as the target, and a target that is the same file as one of the
// inputs (st_dev/st_ino, so a symlink or hard link to an input is caught too). Reading: the file is
// opened with O_NONBLOCK and checked with fstat before any read, so a FIFO or a device is refused
// instead of blocking. See docs/limits.md.
// C++17 on purpose: CUDA sources (compiled as C++17) write traces through it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mhc::io {

// Throws mhc::Error unless `path` may be written as a regular file that is none of `inputs`
// (inputs that do not exist are ignored). Cheap: call it before a long computation too.
void check_output(const std::string& path, const std::vector<std::string>& inputs = {});

class OutputFile {
 public:
  // check_output(path, inputs), then creates the temporary. Throws mhc::Error.
  explicit OutputFile(std::string path, const std::vector<std::string>& inputs = {});
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();  // removes the temporary unless commit() succeeded

  void write(const void* data, size_t size);
  void write(std::string_view text);
  // fsync, close, rename onto the target, fsync the directory. Throws mhc::Error.
  void commit();
  const std::string& temp_path() const { return temp_; }

 private:
  void discard() noexcept;
  void keep_mode_of_target() noexcept;
  std::string path_;
  std::string temp_;
  int fd_ = -1;
};

// OutputFile in one call.
void write_file(const std::string& path, std::string_view text,
                const std::vector<std::string>& inputs = {});

// The whole of a regular file of at most `max_bytes` bytes; `what` names it in errors ("config
// file"). Refuses a FIFO, a device, a directory, a symlink loop (reported as such) without
// blocking.
std::string read_regular_file(const std::string& path, uint64_t max_bytes, std::string_view what);

// A read-only descriptor of a regular file, opened with O_NONBLOCK | O_CLOEXEC and checked with
// fstat; `size` receives its size. The caller closes it. Throws mhc::Error.
int open_regular_file(const std::string& path, uint64_t& size);

// A random file-name component (16 hex digits) for temporaries.
std::string random_suffix();

}  // namespace mhc::io
