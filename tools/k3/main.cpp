// k3: the command-line front end. Subcommands are thin layers over libk3.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "commands.h"
#include "k3/error.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

const Command kCommands[] = {
    {"init", k3::cli::cmd_init, "write a random-initialised checkpoint in the official layout"},
    {"logits", k3::cli::cmd_logits, "write the logits of a token sequence as float32 .npy"},
    {"inspect", k3::cli::cmd_inspect, "summarise a checkpoint: config, schedule, sizes, memory"},
    {"bench", k3::cli::cmd_bench, "prefill and decode tokens/s, median over repeats"},
    {"cost", k3::cli::cmd_cost, "the cost model: parameters, memory, MACs, MoE regimes, SiTU, QB"},
    {"tokenize", k3::cli::cmd_tokenize, "text to token ids with the model's tokenizer"},
    {"detokenize", k3::cli::cmd_detokenize, "token ids to text with the model's tokenizer"},
    {"run", k3::cli::cmd_run, "generate text from a prompt, streamed, with tokens/s"},
    {"chat", k3::cli::cmd_chat, "interactive multi-turn chat in the model's chat format"},
    {"perplexity", k3::cli::cmd_perplexity, "perplexity of a text file (sliding window)"},
};

void print_usage() {
  std::printf(
      "usage: k3 <command> [options]\n\nk3.cpp %s — an engine for Kimi K3-architecture "
      "models.\n\ncommands:\n",
      K3_VERSION);
  for (const Command& c : kCommands) std::printf("  %-12s %s\n", c.name, c.summary);
  std::printf("\nRun 'k3 <command> --help' for the options of one command.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help")) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::printf("k3.cpp %s\n", K3_VERSION);
    return 0;
  }
  for (const Command& c : kCommands) {
    if (std::strcmp(argv[1], c.name) != 0) continue;
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const k3::Error& e) {
      std::fprintf(stderr, "k3 %s: error: %s\n", c.name, e.what());
      return 1;
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "k3 %s: error: out of memory\n", c.name);
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "k3 %s: internal error: %s\n", c.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "k3: unknown command '%s'\n\n", argv[1]);
  print_usage();
  return 2;
}
