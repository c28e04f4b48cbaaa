// Consumer smoke test, built as users build (find_package, pkg-config, README's plain
// `c++ -std=c++17 -O2 -I include app.cpp -pthread`: no -m flags): includes the umbrella, writes and
// reads a GGUF in memory, prints the kernel table it gets and checks it. On x86 the level must be
// the best one /proc/cpuinfo's flags allow (worked out here, independently of
// kernels/x86/cpu.hpp), or the one EDGELLM_X86_LEVEL names, and every kernel variant must name it.
// Built with -DEDGELLM_CONSUMER_LOGITS_HASH and given a model path, it also runs a prompt and
// greedy steps through that model and prints a hash of all logits' bits, which
// tests/selfcontained/x86_dispatch_checks.sh compares between include_only_gxx's plain build and a
// -march=native build (the same level must give the same bits; the package builds leave it out).
// Exit 0 when all is as expected, 1 otherwise or on an edgellm::Error.
#include <edgellm.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

#if defined(__x86_64__)
// The level a dispatch build should pick on this CPU, from the kernel's cpuinfo flags.
std::string expected_x86_level() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) flags.insert(w);
    break;
  }
  const auto has = [&](std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (!flags.count(n)) return false;
    return true;
  };
  if (!has({"avx2", "fma", "f16c"})) return "ref";
  if (has({"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni"})) return "avx512-vnni";
  if (has({"avx_vnni"})) return "avx2-vnni";
  return "avx2";
}
#endif

#if defined(EDGELLM_CONSUMER_LOGITS_HASH)
// FNV-1a over the bits of every logit of a fixed prompt and 4 greedy steps.
uint64_t logits_hash(const std::string& path, const edgellm::KernelTable& table) {
  using namespace edgellm;
  const LlamaModel model(GgufFile::open(path), LoadOptions::all_resident(true, &table));
  const std::vector<int32_t> prompt = {1, 17, 42, 99, 311, 7, 256, 480};
  const int steps = 4;
  ThreadPool pool(2);
  PagedKvCache kv(model.kv_params(int(prompt.size()) + steps));
  const int seq = kv.create_sequence();
  LlamaContext ctx(&pool);
  Batch b;
  for (size_t i = 0; i < prompt.size(); ++i) b.add(prompt[i], int32_t(i), seq, true);
  const int n_vocab = model.config().n_vocab;
  uint64_t h = 1469598103934665603ull;
  const auto mix = [&](const float* row) {
    for (int i = 0; i < n_vocab; ++i) {
      uint32_t u;
      std::memcpy(&u, row + i, 4);
      for (int k = 0; k < 4; ++k) h = (h ^ ((u >> (8 * k)) & 0xFF)) * 1099511628211ull;
    }
  };
  model.forward(ctx, kv, b);
  for (size_t i = 0; i < prompt.size(); ++i) mix(ctx.logits(int(i)));
  int32_t next = int32_t(argmax_row(ctx.logits(int(prompt.size()) - 1), n_vocab));
  for (int s = 0; s < steps; ++s) {
    b.clear();
    b.add(next, int32_t(prompt.size()) + s, seq, true);
    model.forward(ctx, kv, b);
    mix(ctx.logits(0));
    next = int32_t(argmax_row(ctx.logits(0), n_vocab));
  }
  return h;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  try {
    edgellm::GgufWriter w;
    w.set_string("general.architecture", "llama");
    const edgellm::GgufFile f = edgellm::GgufFile::from_bytes(w.to_bytes(), "mem.gguf");
    std::printf("edgellm %s: %s\n", EDGELLM_VERSION_STRING, f.get_string("general.architecture").c_str());
    if (f.get_string("general.architecture") != "llama") return 1;
    const edgellm::KernelTable& t = edgellm::kernels();
    std::printf("%s", edgellm::describe_kernels(t).c_str());
    const std::string got = edgellm::isa_name(t.isa);
    bool ok = true;
#if defined(__x86_64__)
    const char* env = std::getenv("EDGELLM_X86_LEVEL");
    std::string want = env && *env ? env : expected_x86_level();
#if !EDGELLM_X86_DISPATCH
    if (!(env && *env)) want = got;  // built for a target: its level, whatever cpuinfo says
#endif
    std::printf("build: %s, level expected: %s, got: %s\n", EDGELLM_X86_DISPATCH ? "dispatch" : "target's level",
                want.c_str(), got.c_str());
    ok = got == want && std::string(t.f.variant) == want;
    for (uint32_t id = 0; id < edgellm::kDTypeCount; ++id)
      if (t.types[id].vec_dot && std::string(t.types[id].variant) != want) {
        std::printf("%s: variant %s, expected %s\n", edgellm::kDTypeTable[id].name, t.types[id].variant, want.c_str());
        ok = false;
      }
#endif
#if defined(EDGELLM_CONSUMER_LOGITS_HASH)
    if (argc > 1) std::printf("logits hash: %016llx\n", static_cast<unsigned long long>(logits_hash(argv[1], t)));
#else
    (void)argc, (void)argv;
#endif
    std::printf("%s\n", ok ? "kernel table: as expected" : "kernel table: NOT as expected");
    return ok ? 0 : 1;
  } catch (const edgellm::Error& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
