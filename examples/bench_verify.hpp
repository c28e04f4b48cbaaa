// edgellm-bench --verify-rows K1,K2,...: the cost of a speculative decoding verify pass. A verify
// pass is one forward pass of k + 1 rows of one sequence at consecutive positions (the last accepted
// token and k drafted tokens, every row with logits, every row decoded "by role" as generated tokens
// are), after which the cache is cut back; it is timed against a plain decode step (one row at the
// same position). The draft is fixed (tokens from a seeded stream): acceptance is not measured here,
// only what a pass of k + 1 rows costs against one of 1 row — nearly nothing more when the weights
// stream from storage, about k + 1 times the compute when they are resident and compute bounds.
#pragma once
#include "bench_print.hpp"

namespace bench {

// One k of the verify table: seconds per pass (every repetition), storage bytes per pass, and the
// hash of the first row's logits (equal to the 1-row step's: the first row's numbers do not depend on
// the rows drafted after it).
struct VerifyRow {
  int k = 0;  // drafted rows; 0 = the plain decode step
  std::vector<double> pass_s;
  double stream_bytes = 0, read_bytes = 0, wait_s = 0;
  uint32_t first_hash = 0;
};

class VerifyRunner {
 public:
  VerifyRunner(const LoadedModel& lm, const Options& o, edgellm::DType kv_type, edgellm::ThreadPool* pool)
      : lm_(lm), o_(o), ctx_(pool) {
    const edgellm::LlamaModel& m = *lm.model;
    const int k_max = *std::max_element(o.verify_rows.begin(), o.verify_rows.end());
    kv_ = std::make_unique<edgellm::PagedKvCache>(m.kv_params(depth() + k_max + 1, 16, 0, kv_type));
    seq_ = kv_->create_sequence();
    // The context before the timed passes (untimed, -d tokens), then the fixed draft.
    uint64_t rng = 7;
    const uint64_t n_vocab = uint64_t(m.config().n_vocab);
    edgellm::Batch b;
    for (int done = 0; done < depth();) {
      const int n = std::min(o.n_batch, depth() - done);
      b.clear();
      for (int i = 0; i < n; ++i, ++done) b.add(int32_t(edgellm::detail::splitmix64(rng) % n_vocab), done, seq_, false);
      m.forward(ctx_, *kv_, b);
    }
    rng = 42;
    for (int i = 0; i <= k_max; ++i) draft_.push_back(int32_t(edgellm::detail::splitmix64(rng) % n_vocab));
  }

  int depth() const { return *std::max_element(o_.n_depth.begin(), o_.n_depth.end()); }

  // One pass of k + 1 rows at positions depth() .. depth() + k, then the cache cut back to depth().
  double pass(int k, uint32_t* first_hash) {
    edgellm::Batch b;
    for (int i = 0; i <= k; ++i) b.add(draft_[size_t(i)], depth() + i, seq_, true);
    b.n_generated = b.size();  // verify rows are decoded, as the token they check would be
    const edgellm::Timer t;
    lm_.model->forward(ctx_, *kv_, b);
    const double s = t.seconds();
    if (first_hash) *first_hash = edgellm::logits_hash(ctx_.logits(0), size_t(lm_.model->config().n_vocab));
    kv_->truncate(seq_, depth());
    return s;
  }

 private:
  const LoadedModel& lm_;
  const Options& o_;
  edgellm::LlamaContext ctx_;
  std::unique_ptr<edgellm::PagedKvCache> kv_;
  int seq_ = 0;
  std::vector<int32_t> draft_;
};

// Every repetition times the 1-row step and then each k in turn (interleaved, so a load change on
// the machine falls on all of them alike); one untimed step first pages the weights in.
std::vector<VerifyRow> run_verify(const LoadedModel& lm, const Options& o, edgellm::DType kv_type,
                                  edgellm::ThreadPool* pool) {
  VerifyRunner runner(lm, o, kv_type, pool);
  std::vector<VerifyRow> rows(1);
  for (int k : o.verify_rows) rows.push_back(VerifyRow{k, {}, 0, 0, 0, 0});
  if (o.warmup) runner.pass(0, nullptr);
  const edgellm::WeightStream* st = lm.model->weight_stream();
  for (int rep = 0; rep < o.reps; ++rep) {
    for (VerifyRow& r : rows) {
      const edgellm::StreamStats s0 = st ? st->stats() : edgellm::StreamStats{};
      const uint64_t io0 = edgellm::process_read_bytes();
      r.pass_s.push_back(runner.pass(r.k, &r.first_hash));
      r.read_bytes += double(edgellm::process_read_bytes() - io0) / o.reps;
      if (st) {
        const edgellm::StreamStats s1 = st->stats();
        r.stream_bytes += double(s1.bytes_read - s0.bytes_read) / o.reps;
        r.wait_s += (s1.wait_s - s0.wait_s) / o.reps;
      }
    }
  }
  return rows;
}

// md: one row per k (k = 0 is the plain decode step), with s/pass, its ratio to the step, s per
// checked token ((k + 1) rows each), storage MiB read per pass and whether the first row's logits
// equal the step's. jsonl: the same fields, one object per row.
void print_verify(const LoadedModel& lm, const Options& o, int n_threads, const std::vector<VerifyRow>& rows,
                  bool header) {
  const double step = edgellm::stats_mean(rows[0].pass_s);
  if (header && o.output == "md") {
    std::printf("| model | size | threads | depth | rows (k drafted + 1) | s/pass | ratio to 1-row step | s/row | "
                "read MiB/pass | streamed MiB/pass | first row = step |\n");
    std::printf("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |\n");
  }
  const int depth = *std::max_element(o.n_depth.begin(), o.n_depth.end());
  for (const VerifyRow& r : rows) {
    const double mean = edgellm::stats_mean(r.pass_s), sd = edgellm::stats_stddev(r.pass_s);
    const bool same = r.first_hash == rows[0].first_hash;
    const std::string name = r.k == 0 ? "1 (decode step)" : std::to_string(r.k + 1) + " (k=" + std::to_string(r.k) + ")";
    if (o.output == "md") {
      std::printf("| %s | %s | %d | %d | %s | %.4g ± %.2g | %.3f | %.4g | %.1f | %.1f | %s |\n", model_type(lm).c_str(),
                  mib(lm.size_bytes).c_str(), n_threads, depth, name.c_str(), mean, sd, step > 0 ? mean / step : 0.0,
                  mean / (r.k + 1), r.read_bytes / 1048576.0, r.stream_bytes / 1048576.0,
                  ((same ? "yes " : "NO ") + edgellm::format_hash(r.first_hash)).c_str());
    } else {
      std::printf("{\"model_filename\": %s, \"model_type\": %s, \"n_threads\": %d, \"n_depth\": %d, \"n_draft\": %d, "
                  "\"n_rows\": %d, \"avg_s_per_pass\": %.9g, \"stddev_s_per_pass\": %.9g, \"ratio_to_step\": %.6f, "
                  "\"read_bytes_per_pass\": %.0f, \"stream_bytes_per_pass\": %.0f, \"stream_wait_s_per_pass\": %.6f, "
                  "\"first_row_hash\": %s, \"first_row_equals_step\": %s}\n",
                  edgellm::json_quote(lm.filename).c_str(), edgellm::json_quote(model_type(lm)).c_str(), n_threads,
                  depth, r.k, r.k + 1, mean, sd, step > 0 ? mean / step : 0.0, r.read_bytes, r.stream_bytes, r.wait_s,
                  edgellm::json_quote(edgellm::format_hash(r.first_hash)).c_str(), same ? "true" : "false");
    }
  }
  std::fflush(stdout);
}

}  // namespace bench
