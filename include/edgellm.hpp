// edgellm umbrella header: the inference library. Each header also compiles on its own.
// Layers, bottom up: core, runtime, gguf, quant, kernels, kv / text, grammar / model, engine; a header
// includes only its own layer and those below (tests/layers checks it, and that this header's
// include closure holds no offline quantizer). Not included here: the offline quantizers
// (<edgellm/quant/quantize_weighted.hpp>, <edgellm/quant/ref.hpp>, <edgellm/quant/imatrix.hpp>:
// what edgellm-quantize and edgellm-imatrix use) and the tools' own headers (tools/include/: bench
// statistics, synthetic models, eval task files; not installed).
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
#include "edgellm/quant/dequantize.hpp"

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
