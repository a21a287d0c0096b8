// config.json -> HParams -> the tensor table, on arbitrary bytes: rejected with k3::Error, or
// every field is in range and the table the loader would check a checkpoint against is built.
// Configs implying more than 100,000 tensors stop at the size check (the table of a large but
// legal config takes seconds to list, which would only slow the fuzzer down).
#include <cstddef>
#include <cstdint>

#include "config/hparams_json.h"
#include "fuzz/fuzz_common.h"
#include "k3/error.h"
#include "k3/hparams.h"
#include "loader/tensor_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    k3::set_config_warning_sink([](const std::string&) {});
    return true;
  }();
  (void)quiet;
  const std::string path =
      k3::fuzz::scratch_file("config.json", {reinterpret_cast<const char*>(data), size});
  try {
    const k3::HParams hp = k3::hparams_from_file(path);
    k3::fuzz::require(hp.n_layer >= 1 && hp.d_model >= 1 && hp.vocab >= 1, "positive sizes");
    k3::fuzz::require(hp.attn_kind.size() == static_cast<size_t>(hp.n_layer), "one kind a layer");
    const k3::ImpliedSize need = k3::implied_size(hp);
    if (need.tensors > 100000) return 0;
    const auto table = k3::expected_tensors(hp);
    k3::fuzz::require(static_cast<int64_t>(table.size()) == need.tensors,
                      "the table lists the tensors the size check counted");
  } catch (const k3::Error&) {
  }
  return 0;
}
