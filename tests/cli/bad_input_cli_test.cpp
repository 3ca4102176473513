// Inputs a new user gets wrong, on the built binary: parameters outside the range their fp32
// arithmetic holds (refused naming the parameter and the range, never an exit 0 with a zero or
// infinite output), empty values and list items (refused, never dropped), huge values (echoed
// cut short), outputs that cannot be written (refused before the work), and a site too large for
// memory (refused stating what it needs, never std::bad_alloc).
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <tuple>
#include <vector>

#include "cli_util.hpp"
#include "io/site_test_util.hpp"
#include "mhc/io/safetensors.hpp"

namespace mhc::cli::testing {
namespace {

std::string site_file(const std::string& name, const std::map<std::string, std::string>& meta,
                      bool zero_x = false) {
  st::testing::RandomSite s = st::testing::random_site(4, 64, 3, 62);
  if (zero_x) std::fill(s.x.begin(), s.x.end(), float_to_bf16(0.0f));
  st::Writer w = st::site_inputs_writer(s.params, s.weights.view(), s.inputs(), false);
  for (const auto& [k, v] : meta) w.set_metadata(k, v);
  const std::string path = scratch(name);
  w.write(path);
  return path;
}

std::string site(const std::string& in, const std::string& out) {
  return "site --backend cpu --inputs " + quote(in) + " --out " + quote(out);
}

TEST(BadInputCli, SiteParametersOutsideTheirRangeAreRefusedNamingIt) {
  const std::string out = scratch("range_out.safetensors");
  const struct {
    const char* key;
    const char* value;
    bool zero_x;
    const char* message;
  } cases[] = {
      // Was exit 0 with layer_input all zeros: 1e39 is infinite in fp32.
      {"eps_n", "1e39", false,
       "metadata 'eps_n' is \"1e39\", expected a decimal number in "
       "[1.17549e-38, 1e+30]"},
      {"eps_h", "1e39", false, "metadata 'eps_h' is \"1e39\""},
      {"post_mult", "1e31", false,
       "metadata 'post_mult' is \"1e31\", expected a decimal number "
       "in [-1e+30, 1e+30]"},
      // Was: NaN blamed on "an overflow in the site; check the weights' scale".
      {"eps_n", "0", true, "metadata 'eps_n' is \"0\""},
      {"eps_n", "1e-50", true, "smallest normal fp32"},
      {"eps_h", "0", false, "metadata 'eps_h' is \"0\""},
      {"eps_n", "nan", false, "metadata 'eps_n' is \"nan\""},
      {"sinkhorn_iters", "1001", false, "expected an integer in [1, 1000]"},
  };
  for (const auto& c : cases) {
    std::filesystem::remove(out);
    const std::string in = site_file("range_in.safetensors", {{c.key, c.value}}, c.zero_x);
    expect_error(site(in, out), c.message);
    EXPECT_FALSE(std::filesystem::exists(out)) << c.key << "=" << c.value;
  }
}

TEST(BadInputCli, AnAllZeroTokenWithTheDefaultEpsilonsIsFinite) {
  const std::string in = site_file("zero_in.safetensors", {}, true);
  const std::string out = scratch("zero_out.safetensors");
  const RunResult r = run_mhc(site(in, out));
  ASSERT_EQ(r.status, 0) << r.err;
  const st::File f = st::File::open(out);
  for (float v : f.read_f32("comb", {3, 4, 4})) EXPECT_TRUE(std::isfinite(v));
  for (Bf16 v : f.read_bf16("layer_input", {3, 64})) EXPECT_EQ(bf16_to_float(v), 0.0f);
}

TEST(BadInputCli, EmptyValuesAndListItemsAreRefusedNotDropped) {
  expect_errors({
      // Was: --weights "" ignored and the synthetic model run (result: PASS).
      {"run --backend cpu --weights ''", "--weights: the value is empty"},
      {"run --backend cpu --trace ''", "--trace: the value is empty"},
      {"bench overlap --weights ''", "--weights: the value is empty"},
      // Was: 1,,2 taken as 1,2.
      {"bench kernels --tokens 1,,2", "--tokens: '1,,2' has an empty item"},
      {"bench kernels --tokens 1,", "'1,' has an empty item"},
      {"bench overlap --tokens ,1", "',1' has an empty item"},
      {"tune --out t.json --tokens 1,2,,", "has an empty item"},
      {"tune --out t.json --prenorm-tokens ,", "has an empty item"},
      {"bench kernels --tokens 1,x", "--tokens: expected an integer in 1..2147483647, got 'x'"},
      // Was: sm_90a,,sm_80 taken as sm_90a,sm_80, and "" as a binary without images.
      {"dispatch --arch 9.0 --images sm_90a,,sm_80", "--images: 'sm_90a,,sm_80' has an empty item"},
      {"dispatch --arch 9.0 --images ''", "--images: '' has an empty item"},
  });
}

TEST(BadInputCli, HugeValuesAreEchoedCutShort) {
  const std::string big(120'000, 'x');
  for (const std::string& args :
       {"run --preset " + big, "run --backend " + big, "run --" + big, big,
        "dispatch --arch 9.0 --hidden " + big, "bench kernels --tokens 1," + big}) {
    const RunResult r = run_mhc(args);
    EXPECT_EQ(r.status, 2) << r.err.substr(0, 200);
    EXPECT_LT(r.err.size(), 1000u) << r.err.substr(0, 200);
    EXPECT_TRUE(contains(r.err, "xxx...")) << r.err.substr(0, 200);
  }
}

TEST(BadInputCli, AnUnwritableOutputIsRefusedBeforeTheWork) {
  const auto start = std::chrono::steady_clock::now();
  // Was: refused only after the whole run (and for tune, after the sweep).
  expect_errors({
      {"run --backend cpu --layers 8 --hidden 512 --tokens 64 --json /nonexistent-mhc/r.json",
       "/nonexistent-mhc/r.json: cannot write the output: its directory /nonexistent-mhc does "
       "not exist"},
      {"run --backend cpu --trace /nonexistent-mhc/t.json", "its directory /nonexistent-mhc"},
      {"tune --out /nonexistent-mhc/t.json", "its directory /nonexistent-mhc does not exist"},
      {"export-example " + quote(scratch("ex_json")) + " --json /nonexistent-mhc/r.json",
       "does not exist"},
      {"dispatch --arch 9.0 --json /nonexistent-mhc/r.json", "does not exist"},
  });
  const std::string file = scratch("a_file");
  std::ofstream(file) << "x";
  expect_error(site(site_file("ok_in.safetensors", {}), file + "/out.safetensors"),
               "cannot write the output");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_FALSE(std::filesystem::exists(scratch("ex_json")));
}

// A safetensors file of F32/BF16 tensors whose data is a hole (sparse): valid, of any size.
void write_sparse(
    const std::string& path,
    const std::vector<std::tuple<std::string, const char*, std::vector<int64_t>>>& t) {
  nlohmann::ordered_json h;
  uint64_t at = 0;
  for (const auto& [name, dtype, shape] : t) {
    uint64_t bytes = std::string(dtype) == "BF16" ? 2 : 4;
    for (int64_t d : shape) bytes *= uint64_t(d);
    h[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {at, at + bytes}}};
    at += bytes;
  }
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    const uint64_t len = header.size();
    f.write(reinterpret_cast<const char*>(&len), 8);
    f << header;
  }
  ASSERT_EQ(::truncate(path.c_str(), off_t(8 + header.size() + at)), 0);
}

// A valid sparse file of 2^30 tokens (36 GiB): refused from its header, stating what it needs
// (was: std::bad_alloc, exit 3, after mapping it).
TEST(BadInputCli, ASiteTooLargeForMemoryIsRefusedStatingWhatItNeeds) {
  const int64_t m = int64_t{1} << 30, n = 1, c = 8, nmix = 3, k = 8;
  const std::string path = scratch("huge_in.safetensors");
  write_sparse(path, {{"x", "BF16", {m, n, c}},
                      {"pre_mix", "F32", {m, n}},
                      {"hc_fn", "F32", {nmix, k}},
                      {"hc_base", "F32", {nmix}},
                      {"hc_scale", "F32", {3}},
                      {"norm_weight", "F32", {c}},
                      {"sublayer_out", "BF16", {m, c}}});
  const RunResult r = run_mhc(site(path, scratch("huge_out.safetensors")));
  EXPECT_EQ(r.status, 2) << r.err;
  for (const char* part : {"mhc site on", "M=1073741824 n=1 C=8", "needs at least", "inputs",
                           "outputs", "but this machine has"}) {
    EXPECT_TRUE(contains(r.err, part)) << part << " not in " << r.err;
  }
  EXPECT_FALSE(contains(r.err, "bad_alloc")) << r.err;
  std::filesystem::remove(path);
}

// A valid sparse checkpoint of 64 layers at C=2^20, n=8 (321 GiB of weights): refused from its
// shapes before a tensor is read, counting the synthetic model the loader builds for the stand-in
// gains (was: std::bad_alloc, or the OOM killer, half way through reading it).
TEST(BadInputCli, ACheckpointTooLargeForMemoryIsRefusedBeforeItIsRead) {
  const int64_t c = int64_t{1} << 20, n = 8, nmix = n * (n + 2);
  const std::string dir = scratch("huge_ckpt");
  std::filesystem::create_directories(dir);
  std::vector<std::tuple<std::string, const char*, std::vector<int64_t>>> tensors;
  for (int l = 0; l < 64; ++l) {
    for (const char* site : {"attn", "ffn"}) {
      const std::string p = "layers." + std::to_string(l) + ".hc_" + site;
      tensors.push_back({p + "_fn", "F32", {nmix, n * c}});
      tensors.push_back({p + "_base", "F32", {nmix}});
      tensors.push_back({p + "_scale", "F32", {3}});
      tensors.push_back({"layers." + std::to_string(l) + "." + site + "_norm.weight", "F32", {c}});
    }
  }
  const std::string file = dir + "/model.safetensors";
  write_sparse(file, tensors);
  const auto start = std::chrono::steady_clock::now();
  const RunResult r = run_mhc("run --backend cpu --tokens 1 --weights " + quote(dir));
  EXPECT_EQ(r.status, 2) << r.err;
  for (const char* part : {"(C=1048576 n=8 layers=64) needs at least", "weights 321.0 GiB",
                           "the loader's synthetic model 321.0 GiB", "but this machine has"}) {
    EXPECT_TRUE(contains(r.err, part)) << part << " not in " << r.err;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace mhc::cli::testing
