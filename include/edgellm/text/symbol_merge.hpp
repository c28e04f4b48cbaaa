// The merge loop both subword tokenizers share (text/bpe.hpp by merge rank, text/spm.hpp by token
// score, as llama.cpp's llm_tokenizer_bpe / _spm): start from the UTF-8 characters of a text and
// repeatedly merge the best adjacent pair until none can merge. O(n log n) in the text length.
#pragma once
#include <algorithm>
#include <cstddef>
#include <queue>
#include <string_view>
#include <vector>

#include "edgellm/text/unicode.hpp"

namespace edgellm {
namespace detail {

// One symbol: text[off, off + n), linked to its neighbours (-1: none); merged-away symbols have n 0.
struct MergeSym {
  int prev, next;
  size_t off, n;
};

// pair_key(left, right, &key) says whether two adjacent symbols' texts can merge and with which
// key; better(a, b): key a merges before key b. Among equal keys the leftmost pair merges first.
// Returns the symbols; the merged text is the list from symbol 0 (if any) along next.
template <class Key, class PairKey, class Better>
inline std::vector<MergeSym> merge_symbols(std::string_view text, PairKey pair_key, Better better) {
  std::vector<MergeSym> syms;
  syms.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t n = std::min(utf8_len(text[off]), text.size() - off);
    const int idx = static_cast<int>(syms.size());
    syms.push_back({idx - 1, off + n == text.size() ? -1 : idx + 1, off, n});
    off += n;
  }
  struct Bigram {
    int left, right;
    Key key;
    size_t size;
  };
  auto worse = [&](const Bigram& a, const Bigram& b) {
    return better(b.key, a.key) || (a.key == b.key && a.left > b.left);
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(worse)> queue(worse);
  auto add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const MergeSym& a = syms[static_cast<size_t>(l)];
    const MergeSym& b = syms[static_cast<size_t>(r)];
    Key key;
    if (pair_key(text.substr(a.off, a.n), text.substr(b.off, b.n), &key)) queue.push({l, r, key, a.n + b.n});
  };
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) add(i - 1, i);
  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    MergeSym& l = syms[static_cast<size_t>(bg.left)];
    MergeSym& r = syms[static_cast<size_t>(bg.right)];
    if (l.n == 0 || r.n == 0 || l.n + r.n != bg.size) continue;  // outdated pair
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) syms[static_cast<size_t>(r.next)].prev = bg.left;
    add(l.prev, bg.left);
    add(bg.left, l.next);
  }
  return syms;
}

}  // namespace detail
}  // namespace edgellm
