// k3.cpp public API: everything a tool needs, in one include (or include the headers singly).
// Nothing here uses CUDA, HTTP or JSON library types; errors are thrown as k3::Error.
//   error.h              k3::Error and the cat/check/fail helpers
//   hparams.h            HParams: a validated config.json (hparams_from_file)
//   json_depth.h         the nesting-depth limit for untrusted JSON
//   model.h              Model::load, Sequence (one sequence), threads
//   engine.h             Engine, Batch, sequences and snapshots over a budgeted state pool
//   device.h             the default device of an Engine (cpu or cuda) and whether CUDA is here
//   tokenizer.h          Tokenizer (K3's tiktoken BPE + specials), StreamDecoder, UTF-8 check
//   token_file.h         pre-tokenised text (.k3tok) for k3 train
//   chat.h               the chat format: request JSON text -> prompt ids, output -> message
//   sampler.h            SamplingParams, LogitBias, Sampler (penalties, temperature, top-k/p)
//   generation_config.h  a model's recommended sampling settings (generation_config.json)
//   generate.h           Session: the generation loop, prompt ids in, text pieces out
//   perplexity.h         sliding-window perplexity of a token sequence
//   npy.h                float32 NPY read/write, the logits exchange format
//   init.h               random-initialised checkpoints for any config (k3 init)
//   convert.h            a checkpoint rewritten in BF16 / MXFP4 (k3 convert)
//   inspect.h            describe_checkpoint: config and tensors of a checkpoint (k3 inspect)
//   weight_table.h       every tensor a config implies: name, shape, role, parameters
//   router_balance.h     router-bias balancing: Quantile Balancing, Loss-Free, MaxVio
// Not included here: server.h (k3::Server, the OpenAI-compatible HTTP server; its own library,
// k3server, which links cpp-httplib).
#pragma once

#include "k3/chat.h"
#include "k3/convert.h"
#include "k3/device.h"
#include "k3/engine.h"
#include "k3/error.h"
#include "k3/generate.h"
#include "k3/generation_config.h"
#include "k3/hparams.h"
#include "k3/init.h"
#include "k3/inspect.h"
#include "k3/json_depth.h"
#include "k3/model.h"
#include "k3/npy.h"
#include "k3/perplexity.h"
#include "k3/router_balance.h"
#include "k3/sampler.h"
#include "k3/token_file.h"
#include "k3/tokenizer.h"
#include "k3/weight_table.h"
