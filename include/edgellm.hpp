// edgellm umbrella header: includes every public header. Each also compiles on its own.
#pragma once

#include "edgellm/version.hpp"
#include "edgellm/config.hpp"
#include "edgellm/core/error.hpp"
#include "edgellm/core/dtype.hpp"
#include "edgellm/quant/fp16.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/scales.hpp"
#include "edgellm/kernels/api.hpp"
#include "edgellm/kernels/select.hpp"
#include "edgellm/core/memory.hpp"
#include "edgellm/core/tensor.hpp"
#include "edgellm/gguf/metadata.hpp"
#include "edgellm/gguf/reader.hpp"
#include "edgellm/gguf/writer.hpp"
