// How export-example puts a checkpoint in place: built in a temporary directory of ours beside the
// target, then exchanged with the target in one rename, so that the target holds the old
// checkpoint or the new one, complete, at every instant (also across SIGKILL); and how the
// temporaries a killed export left behind are removed by the next export to the same place.
#pragma once
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace mhc::ckpt::detail {

// Whether a file (a regular file of one of export's names) carries export's mark.
using MarkCheck = std::function<bool(const std::filesystem::path&)>;

// What export writes into a checkpoint directory: the names it may replace and how to tell its
// own files from a user's.
struct ExportNames {
  std::vector<std::string> names;  // e.g. config.json, model.safetensors
  MarkCheck marked;
  bool is_export_name(const std::string& name) const;
};

// A temporary directory of ours, ".{stem}.mhc-export-{16 hex}" in `parent`, locked (flock) for
// its life so that no other export takes it for a dead one's. Removed with everything in it
// unless it was moved into place (release()) or exchanged with the old checkpoint (then its
// contents are the old directory's, removed by remove_replaced()).
class ExportTemp {
 public:
  ExportTemp(const std::filesystem::path& parent, const std::string& stem);
  ExportTemp(const ExportTemp&) = delete;
  ExportTemp& operator=(const ExportTemp&) = delete;
  ~ExportTemp();
  const std::filesystem::path& path() const { return path_; }
  void release();  // renamed into place: nothing to remove
  // After the exchange this name holds the old checkpoint: removes what export wrote and what was
  // mirrored from `target`, puts back anything else, then the directory if it is empty.
  void remove_replaced(const std::filesystem::path& target, const ExportNames& names);

 private:
  std::filesystem::path path_;
  int lock_ = -1;
};

// Removes the stale temporaries of earlier exports to `target` that were killed: those beside it
// and those an older version built inside it. Within each, only export's own marked files, mhc's
// temporaries and entries mirrored from `target` (the same file is still there) are removed;
// anything else is moved back into `target` (when its name is free) or left in place.
void remove_stale_exports(const std::filesystem::path& target, const ExportNames& names);

// Replaces the checkpoint in the existing directory `target` by the one in `fresh` with one
// exchanging rename: every entry of `target` that is not one of export's names is mirrored into
// `fresh` first (a hard link, or a copy of a symlink), and `fresh` takes `target`'s permission
// bits. Returns false, having changed nothing in `target`, where this cannot be done: a
// subdirectory or a special file in `target` (it cannot be mirrored), `target` is the working
// directory (the shell in it would be left in the old one) or a mount point, or the file system
// has no RENAME_EXCHANGE. The caller then falls back to replacing file by file.
bool exchange_checkpoint(const std::filesystem::path& target, ExportTemp& fresh,
                         const ExportNames& names);

}  // namespace mhc::ckpt::detail
