// edgellm umbrella header: includes every library header. Each also compiles on its own.
// Layers, bottom up: core, runtime, gguf, quant, kernels, kv / text, grammar / model, engine; a header
// includes only its own layer and those below (tests/layers checks it). The tools layer
// (include/edgellm/tools/: JSON, bench statistics, synthetic models, eval task files) sits on top,
// is installed too, and is not included here.
#pragma once

#include "edgellm/version.hpp"
#include "edgellm/config.hpp"

#include "edgellm/core/error.hpp"
#include "edgellm/core/dtype.hpp"
#include "edgellm/core/memory.hpp"
#include "edgellm/core/tensor.hpp"
#include "edgellm/core/json.hpp"

#include "edgellm/runtime/thread_pool.hpp"
#include "edgellm/runtime/timer.hpp"
#include "edgellm/runtime/memory_stats.hpp"
#include "edgellm/runtime/memory_limit.hpp"
#include "edgellm/runtime/file_reader.hpp"
#include "edgellm/runtime/read_ahead.hpp"

#include "edgellm/gguf/metadata.hpp"
#include "edgellm/gguf/reader.hpp"
#include "edgellm/gguf/writer.hpp"

#include "edgellm/quant/fp16.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/scales.hpp"
#include "edgellm/quant/ref.hpp"
#include "edgellm/quant/mix.hpp"
#include "edgellm/quant/imatrix.hpp"
#include "edgellm/quant/quantize_weighted.hpp"

#include "edgellm/kernels/api.hpp"
#include "edgellm/kernels/select.hpp"
#include "edgellm/kernels/matmul.hpp"

#include "edgellm/jinja/template.hpp"

#include "edgellm/kv/paged_kv_cache.hpp"
#include "edgellm/text/vocab.hpp"
#include "edgellm/text/tokenizer.hpp"
#include "edgellm/text/sampler.hpp"
#include "edgellm/text/chat_template.hpp"
#include "edgellm/text/chat.hpp"

#include "edgellm/grammar/gbnf.hpp"
#include "edgellm/grammar/matcher.hpp"
#include "edgellm/grammar/token_mask.hpp"

#include "edgellm/model/llama_config.hpp"
#include "edgellm/model/memory_plan.hpp"
#include "edgellm/model/tensors.hpp"
#include "edgellm/model/residency.hpp"
#include "edgellm/model/weight_stream.hpp"
#include "edgellm/model/llama_weights.hpp"
#include "edgellm/model/llama.hpp"

#include "edgellm/engine/session.hpp"
#include "edgellm/engine/embedding.hpp"
#include "edgellm/engine/perplexity.hpp"
#include "edgellm/engine/eval.hpp"
