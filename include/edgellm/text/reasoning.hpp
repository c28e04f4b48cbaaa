// Reasoning split: a thinking model's "<think>…</think>" (or its family's equivalent) separated
// from the answer, whole or while streaming, as llama-server's --reasoning-format does.
#pragma once
#include <string>
#include <string_view>
#include <utility>

#include "edgellm/core/error.hpp"

namespace edgellm {

// llama-server's --reasoning-format names. none: thoughts stay in the content; deepseek (and
// auto): they go to reasoning_content; deepseek-legacy: reasoning_content too, and the content
// keeps the thoughts with their tags.
enum class ReasoningFormat { None, Deepseek, DeepseekLegacy };

inline ReasoningFormat parse_reasoning_format(const std::string& s) {
  if (s == "none") return ReasoningFormat::None;
  if (s == "deepseek" || s == "auto") return ReasoningFormat::Deepseek;
  if (s == "deepseek-legacy") return ReasoningFormat::DeepseekLegacy;
  throw_error("reasoning format '", s, "' is not one of none, deepseek, deepseek-legacy, auto");
}

// The tags around thoughts.
struct ReasoningTags {
  std::string open = "<think>", close = "</think>";

  // The tags a chat template shows: Command R's <|START_THINKING|>, Gemma 4's thought channel,
  // gpt-oss's analysis channel, else <think>.
  static ReasoningTags for_template(const std::string& source) {
    auto has = [&](const char* s) { return source.find(s) != std::string::npos; };
    if (has("<|START_THINKING|>") && has("<|END_THINKING|>")) return {"<|START_THINKING|>", "<|END_THINKING|>"};
    if (has("<|channel>") && has("<channel|>")) return {"<|channel>thought", "<channel|>"};
    if (has("<|channel|>analysis<|message|>")) return {"<|channel|>analysis<|message|>", "<|end|>"};
    return {};
  }
};

// Splits generated text into reasoning and content. Thoughts are recognised only at the start of
// the answer (after whitespace), or from the first byte when the prompt ended inside an open tag
// (a template that opens "<think>\n" for the model). Whitespace after the tags is dropped, and
// so is whitespace at the end of the thoughts; an answer cut inside its thoughts has only
// reasoning. Streamed pieces concatenate to what split() gives for the whole text.
class ReasoningSplitter {
 public:
  struct Delta {
    std::string reasoning, content;
  };

  explicit ReasoningSplitter(ReasoningTags tags = ReasoningTags(), bool started_inside = false)
      : tags_(std::move(tags)), state_(started_inside ? State::Inside : State::Start) {}

  // True when a prompt ends with the open tag (give it to the constructor).
  static bool prompt_opens(std::string_view prompt, const ReasoningTags& tags) {
    size_t e = prompt.size();
    while (e > 0 && is_space(prompt[e - 1])) --e;
    return e >= tags.open.size() && prompt.substr(e - tags.open.size(), tags.open.size()) == tags.open;
  }

  Delta feed(std::string_view text) {
    Delta d;
    pending_.append(text.data(), text.size());
    run(d, false);
    return d;
  }
  // The end of the answer: what was held back (a possible tag prefix, whitespace).
  Delta finish() {
    Delta d;
    run(d, true);
    return d;
  }

  static Delta split(std::string_view text, const ReasoningTags& tags = ReasoningTags(), bool started_inside = false) {
    ReasoningSplitter s(tags, started_inside);
    Delta a = s.feed(text);
    Delta b = s.finish();
    a.reasoning += b.reasoning;
    a.content += b.content;
    return a;
  }

 private:
  enum class State { Start, Inside, AfterClose, Content };
  ReasoningTags tags_;
  State state_;
  std::string pending_;  // not yet given out
  std::string held_ws_;  // whitespace inside the thoughts, given out when more thoughts follow

  static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
  // Length of the longest suffix of s that is a proper prefix of tag.
  static size_t partial_suffix(const std::string& s, const std::string& tag) {
    for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
      if (s.compare(s.size() - n, n, tag, 0, n) == 0) return n;
    return 0;
  }

  void run(Delta& d, bool end) {
    while (true) {
      switch (state_) {
        case State::Start: {
          size_t i = 0;
          while (i < pending_.size() && is_space(pending_[i])) ++i;
          const std::string_view rest = std::string_view(pending_).substr(i);
          if (rest.size() >= tags_.open.size()) {
            if (rest.substr(0, tags_.open.size()) == tags_.open) {
              pending_.erase(0, i + tags_.open.size());
              state_ = State::Inside;
              skip_ws_ = true;
              continue;
            }
            state_ = State::Content;
            continue;
          }
          if (std::string_view(tags_.open).substr(0, rest.size()) == rest && !end) return;  // wait for more
          state_ = State::Content;
          continue;
        }
        case State::Inside: {
          if (skip_ws_) {
            size_t i = 0;
            while (i < pending_.size() && is_space(pending_[i])) ++i;
            pending_.erase(0, i);
            if (pending_.empty() && !end) return;
            skip_ws_ = false;
          }
          const size_t k = pending_.find(tags_.close);
          if (k != std::string::npos) {
            emit_thought(d, pending_.substr(0, k), true);
            pending_.erase(0, k + tags_.close.size());
            state_ = State::AfterClose;
            continue;
          }
          if (end) {
            emit_thought(d, pending_, true);
            pending_.clear();
            return;
          }
          const size_t keep = partial_suffix(pending_, tags_.close);
          emit_thought(d, pending_.substr(0, pending_.size() - keep), false);
          pending_.erase(0, pending_.size() - keep);
          return;
        }
        case State::AfterClose: {
          size_t i = 0;
          while (i < pending_.size() && is_space(pending_[i])) ++i;
          pending_.erase(0, i);
          if (pending_.empty()) return;
          state_ = State::Content;
          continue;
        }
        case State::Content:
          d.content += pending_;
          pending_.clear();
          return;
      }
    }
  }

  // Thoughts, with whitespace at their end held until more thoughts show it was inside them.
  void emit_thought(Delta& d, const std::string& s, bool last) {
    size_t e = s.size();
    while (e > 0 && is_space(s[e - 1])) --e;
    if (e > 0) {
      d.reasoning += held_ws_;
      held_ws_.clear();
      d.reasoning.append(s, 0, e);
    }
    if (last) held_ws_.clear();
    else held_ws_.append(s, e, std::string::npos);
  }

  bool skip_ws_ = false;
};

}  // namespace edgellm
