// libFuzzer target: the safetensors reader on arbitrary bytes, then the writer on what it accepted.
//
// Contract checked: parsing never reads outside the buffer (ASan), never hits undefined behaviour
// (UBSan), and rejects bad input only with mhc::Error (any other exception escapes and aborts,
// which libFuzzer reports as a crash). What the reader accepts, the writer must write back and
// the reader accept again with the same tensors and metadata.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "mhc/core/error.hpp"
#include "mhc/io/safetensors.hpp"

namespace {

using mhc::st::File;

volatile unsigned g_sink;  // keeps the byte sum (and so the reads) from being optimised away

void require(bool ok) {
  if (!ok) std::abort();
}

// Touches every byte of every tensor (so ASan sees any span outside the buffer) and exercises the
// typed reads on the small float vectors.
void read_everything(const File& f) {
  unsigned sum = 0;
  for (const auto& t : f.tensors()) {
    for (std::byte b : f.bytes(t)) sum += std::to_integer<unsigned>(b);
    if (t.shape.size() == 1 &&
        (t.dtype == mhc::st::Dtype::F32 || t.dtype == mhc::st::Dtype::BF16)) {
      require(f.read_f32_or_bf16(t.name, {mhc::st::Dim::any()}).size() == size_t(t.shape[0]));
    }
  }
  g_sink = sum;
}

void rewrite_and_compare(const File& f) {
  mhc::st::Writer w;
  for (const auto& t : f.tensors()) w.add(t.name, t.dtype, t.shape, f.bytes(t));
  for (const auto& [k, v] : f.metadata()) w.set_metadata(k, v);
  const File g = File::from_bytes(w.serialize(), "rewritten");
  require(g.tensors().size() == f.tensors().size() && g.metadata() == f.metadata());
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const auto &a = f.tensors()[i], &b = g.tensors()[i];
    const auto ab = f.bytes(a), bb = g.bytes(b);
    require(a.name == b.name && a.dtype == b.dtype && a.shape == b.shape);
    require(ab.size() == bb.size() && std::equal(ab.begin(), ab.end(), bb.begin()));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exactly sized heap copy: ASan flags a read even one byte past the end.
  std::vector<std::byte> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = std::byte(data[i]);
  try {
    const File f = File::from_bytes(std::move(bytes), "fuzz.safetensors");
    read_everything(f);
    rewrite_and_compare(f);
  } catch (const mhc::Error&) {
    // Rejected with a message: the expected outcome for most inputs.
  }
  return 0;
}
