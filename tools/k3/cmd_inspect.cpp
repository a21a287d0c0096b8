// k3 inspect: what a checkpoint is and what running it costs, without running it.
#include <cstdio>
#include <map>
#include <string>

#include "args.h"
#include "commands.h"
#include "common_options.h"
#include "k3/hparams.h"
#include "k3/inspect.h"
#include "model_dir.h"

namespace k3::cli {
namespace {

std::string human(double bytes) {
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", bytes, unit[u]);
  return buf;
}

std::string schedule(const HParams& hp) {
  std::string s;
  for (int64_t l = 0; l < hp.n_layer; ++l) {
    if (l && hp.seals_slot(l)) s += '|';
    s += hp.attn_kind[l] == AttnKind::kda ? 'K' : 'M';
  }
  return s;
}

std::string ffn_schedule(const HParams& hp) {
  std::string s;
  for (int64_t l = 0; l < hp.n_layer; ++l) s += hp.is_moe_layer(l) ? 'E' : 'D';
  return s;
}

void print_config(const HParams& hp) {
  const KdaHParams& k = hp.kda;
  const MlaHParams& m = hp.mla;
  const MoeHParams& e = hp.moe;
  std::printf("config\n  vocab %lld, hidden %lld, layers %lld (%lld KDA + %lld MLA)\n",
              (long long)hp.vocab, (long long)hp.d_model, (long long)hp.n_layer,
              (long long)hp.n_layers_of(AttnKind::kda), (long long)hp.n_layers_of(AttnKind::mla));
  std::printf("  KDA: %lld heads x %lld, conv %lld, gate lower bound %g\n", (long long)k.n_head,
              (long long)k.head_dim, (long long)k.conv_kernel, k.gate_lower_bound);
  std::printf("  MLA: %lld heads, q_lora %lld, kv_lora %lld, nope %lld, rope(NoPE) %lld, v %lld\n",
              (long long)m.n_head, (long long)m.q_lora_rank, (long long)m.kv_lora_rank,
              (long long)m.qk_nope, (long long)m.qk_rope, (long long)m.v_head);
  std::printf(
      "  FFN: dense width %lld for layers < %lld; MoE %lld experts, top-%lld, %lld shared,"
      " expert width %lld, latent %lld, %s experts, scale %g\n",
      (long long)hp.d_ff, (long long)e.first_dense, (long long)e.n_expert, (long long)e.n_used,
      (long long)e.n_shared, (long long)e.d_expert, (long long)e.d_latent,
      e.expert_format == ExpertFormat::mxfp4 ? "MXFP4" : "plain", e.routed_scale);
  std::printf("  AttnRes block %lld, SiTU betas %g/%g, rms eps %g\n", (long long)hp.attn_res_block,
              hp.situ_beta, hp.situ_linear_beta, hp.rms_eps);
  std::printf("schedule (K=KDA, M=MLA, | = AttnRes seal)\n  %s\n", schedule(hp).c_str());
  std::printf("ffn (D=dense, E=MoE)\n  %s\n", ffn_schedule(hp).c_str());
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
  Args args("inspect", "[-m DIR] [-c N]",
            "Summarise a checkpoint: config, layer schedule, parameters by component, bytes by\n"
            "dtype, MLA cache per token, KDA state per sequence and expected peak memory.",
            {model_option(), ctx_option("context length for the memory estimate", "4096")});
  if (!args.parse(argc, argv)) return 0;
  const CheckpointSummary ckpt = describe_checkpoint(resolve_model_dir(args));
  const HParams& hp = ckpt.hparams;
  const int64_t ctx = args.integer("ctx-size");
  print_config(hp);

  std::map<std::string, int64_t> params;
  std::map<std::string, size_t> by_dtype;
  int64_t total = 0;
  for (const TensorSummary& t : ckpt.tensors) {
    params[t.role] += t.params;
    total += t.params;
    by_dtype[t.mxfp4 ? "MXFP4 (U8 packed+scales)" : t.dtype] += t.bytes;
  }
  std::printf("parameters by component\n");
  for (const auto& [role, n] : params) {
    std::printf("  %-24s %16lld  %5.1f%%\n", role.c_str(), (long long)n, 100.0 * n / total);
  }
  std::printf("  %-24s %16lld\n", "total", (long long)total);
  std::printf("bytes by dtype\n");
  size_t weight_bytes = 0;
  for (const auto& [dt, b] : by_dtype) {
    std::printf("  %-26s %s\n", dt.c_str(), human(static_cast<double>(b)).c_str());
    weight_bytes += b;
  }
  const int64_t n_mla = hp.n_layers_of(AttnKind::mla), n_kda = hp.n_layers_of(AttnKind::kda);
  const double cache_tok = 4.0 * static_cast<double>(hp.mla.cache_width() * n_mla);
  const double kda_seq =
      4.0 * static_cast<double>(n_kda * (hp.kda.n_head * hp.kda.head_dim * hp.kda.head_dim +
                                         3 * hp.kda.proj_dim() * (hp.kda.conv_kernel - 1)));
  std::printf("state (fp32, as this engine keeps it)\n");
  std::printf("  MLA latent cache  %s per token (%s x %s)\n", human(cache_tok).c_str(),
              plural(hp.mla.cache_width(), "scalar").c_str(), plural(n_mla, "layer").c_str());
  std::printf("  KDA state         %s per sequence (recurrent + conv, %s)\n",
              human(kda_seq).c_str(), plural(n_kda, "layer").c_str());
  const double peak = static_cast<double>(weight_bytes) + kda_seq + cache_tok * ctx;
  std::printf(
      "expected peak memory at %s, batch 1\n  %s (weights mapped %s + state %s;"
      " plus activations of the running chunk)\n",
      plural(ctx, "token").c_str(), human(peak).c_str(),
      human(static_cast<double>(weight_bytes)).c_str(), human(kda_seq + cache_tok * ctx).c_str());
  return 0;
}

}  // namespace k3::cli
