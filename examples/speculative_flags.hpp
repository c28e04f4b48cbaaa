// The speculative decoding flags of the tools that decode (edgellm-cli, edgellm-server,
// edgellm-bench), named as llama.cpp names them where it has them: -md / --model-draft, --draft-max (--draft, --draft-n),
// --draft-min (--draft-n-min), --draft-p-min; ours: --lookup, --draft-layers N, --draft-adaptive, --draft-sample.
#pragma once
#include <cstdio>
#include <memory>
#include <string>

#include <edgellm/core/error.hpp>
#include <edgellm/engine/session.hpp>
#include <edgellm/engine/speculative.hpp>
#include <edgellm/model/llama.hpp>

#include "common.hpp"

namespace tool {

inline constexpr const char* kSpeculativeUsage =
    "  -md, --model-draft FILE  speculative decoding with a draft model of the same vocabulary (kept\n"
    "                         resident; its file size is left free out of the memory budget)\n"
    "  --lookup               speculative decoding with prompt lookup (n-grams of the prompt and text)\n"
    "  --draft-layers N       speculative decoding with the model's first N layers as the draft (early exit)\n"
    "  --draft-max N          tokens drafted per target pass at most (default 3, as llama.cpp)\n"
    "  --draft-min N          fewer drafted tokens than N: none are verified (default 0)\n"
    "  --draft-p-min P        draft model: stop drafting at a token below probability P (default 0)\n"
    "  --draft-adaptive       the draft length follows the acceptance rate (up to --draft-max)\n"
    "  --draft-sample         with --temp > 0, a draft model samples its drafts and they are verified by\n"
    "                         rejection sampling (default: greedy drafts, the same tokens as without drafts)\n";

struct DraftFlags {
  std::string model;  // -md
  int layers = 0;     // --draft-layers
};

// Consumes f when it is a speculative decoding flag (and its value); false otherwise.
inline bool speculative_flag(Args& args, const std::string& f, edgellm::SpeculativeParams& sp, DraftFlags& d) {
  if (f == "-md" || f == "--model-draft") d.model = args.value(f);
  else if (f == "--lookup") sp.lookup = true;
  else if (f == "--draft-layers") d.layers = args.integer32(f, 1, 1 << 16);
  else if (f == "--draft-max" || f == "--draft" || f == "--draft-n") sp.n_max = args.integer32(f, 0, 64);
  else if (f == "--draft-min" || f == "--draft-n-min") sp.n_min = args.integer32(f, 0, 64);
  else if (f == "--draft-p-min") sp.p_min = static_cast<float>(args.number(f, 0, 1));
  else if (f == "--draft-adaptive") sp.adaptive = true;
  else if (f == "--draft-sample") sp.sample_drafts = true;
  else return false;
  return true;
}

// After parsing: one draft source at most, parameters in range.
inline void check_speculative(const edgellm::SpeculativeParams& sp, const DraftFlags& d) {
  const int sources = (sp.lookup ? 1 : 0) + (d.model.empty() ? 0 : 1) + (d.layers > 0 ? 1 : 0);
  if (sources > 1) edgellm::throw_error("-md, --lookup and --draft-layers are draft sources: choose one");
  edgellm::validate(sp);
}

// The draft model of -md (resident, repacked), null without it.
inline std::shared_ptr<const edgellm::LlamaModel> load_draft(const DraftFlags& d) {
  if (d.model.empty()) return nullptr;
  return edgellm::LlamaModel::load(d.model, edgellm::LoadOptions::all_resident());
}

// LoadOptions::reserved_bytes of the target model: the resident draft model's file size, which
// the target's residency plan leaves free out of its budget (given or detected).
inline uint64_t draft_reserved_bytes(const edgellm::LlamaModel* draft) { return draft ? draft->file().file_size() : 0; }

// Any draft source given (-md, --lookup, --draft-layers)?
inline bool has_draft_source(const edgellm::SpeculativeParams& sp, const DraftFlags& d) {
  return sp.lookup || !d.model.empty() || d.layers > 0;
}

// One line for -v: drafts, acceptance and tokens per target pass.
inline void print_speculative(const edgellm::GenerateResult& r) {
  std::fprintf(stderr, "speculative: %d target passes, %d tokens drafted, %d accepted (%.1f%%), %.2f tokens per target pass\n",
               r.n_passes, r.n_drafted, r.n_accepted, 100.0 * r.acceptance_rate(), r.tokens_per_pass());
}

}  // namespace tool
