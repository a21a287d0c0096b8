// k3: the command-line front end. Subcommands are thin layers over libk3.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "common_options.h"
#include "k3/error.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
  bool developer;  // listed under "developer tools"
};

const Command kCommands[] = {
    {"run", k3::cli::cmd_run, "generate text from a prompt, streamed, with tokens/s", false},
    {"chat", k3::cli::cmd_chat, "interactive multi-turn chat in the model's chat format", false},
    {"serve", k3::cli::cmd_serve, "OpenAI-compatible HTTP server with continuous batching", false},
    {"perplexity", k3::cli::cmd_perplexity, "perplexity of a text file (sliding window)", false},
    {"tokenize", k3::cli::cmd_tokenize, "text to token ids with the model's tokenizer", true},
    {"detokenize", k3::cli::cmd_detokenize, "token ids to text with the model's tokenizer", true},
    {"tokenizer", k3::cli::cmd_tokenizer, "tokenizer train: learn a BPE tokenizer from text", true},
    {"inspect", k3::cli::cmd_inspect, "summarise a checkpoint: config, schedule, sizes, memory",
     true},
    {"bench", k3::cli::cmd_bench, "prefill and decode tokens/s, median over repeats", true},
    {"logits", k3::cli::cmd_logits, "write the logits of a token sequence as float32 .npy", true},
    {"train", k3::cli::cmd_train, "train a checkpoint on text files (Muon/AdamW, QB balancing)",
     true},
    {"init", k3::cli::cmd_init, "write a random-initialised checkpoint in the official layout",
     true},
    {"convert", k3::cli::cmd_convert, "rewrite a checkpoint in BF16 / MXFP4 (ship a trained one)",
     true},
    {"cost", k3::cli::cmd_cost, "the cost model: parameters, memory, MACs, MoE regimes, SiTU, QB",
     true},
};

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: k3 <command> [options]\n\nk3.cpp %s — an engine for Kimi K3-architecture "
               "models.\n\ncommands:\n",
               K3_VERSION);
  for (const Command& c : kCommands) {
    if (!c.developer) std::fprintf(out, "  %-12s %s\n", c.name, c.summary);
  }
  std::fprintf(out, "\ndeveloper tools:\n");
  for (const Command& c : kCommands) {
    if (c.developer) std::fprintf(out, "  %-12s %s\n", c.name, c.summary);
  }
  std::fprintf(out,
               "\n  help [COMMAND]  this list, or the options of one command\n"
               "  version         the version (also --version)\n"
               "\nThe model: -m DIR (or a file in it), else $K3_MODEL, else models/default.\n"
               "Run 'k3 <command> --help' for the options of one command.\n");
}

const Command* find_command(const char* name) {
  for (const Command& c : kCommands) {
    if (!std::strcmp(name, c.name)) return &c;
  }
  return nullptr;
}

int run_command(const Command& c, int argc, char** argv) {
  try {
    return c.run(argc, argv);
  } catch (const k3::Error& e) {
    std::fprintf(stderr, "k3 %s: error: %s\n", c.name,
                 k3::cli::strip_prefix(e.what(), c.name).c_str());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "k3 %s: error: out of memory\n", c.name);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "k3 %s: internal error: %s\n", c.name, e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  const std::string first = argv[1];
  if (first == "-h" || first == "--help" || first == "help") {
    if (first == "help" && argc > 2) {
      const Command* c = find_command(argv[2]);
      if (c != nullptr) {
        char help_flag[] = "--help";
        char* sub[] = {argv[2], help_flag, nullptr};
        return run_command(*c, 2, sub);
      }
      std::fprintf(stderr, "k3 help: unknown command '%s'\n", argv[2]);
      return 2;
    }
    print_usage(stdout);
    return 0;
  }
  if (first == "--version" || first == "version" || first == "-V") {
    std::printf("k3.cpp %s\n", K3_VERSION);
    return 0;
  }
  if (const Command* c = find_command(argv[1])) return run_command(*c, argc - 1, argv + 1);
  std::vector<std::string> names = {"help", "version"};
  for (const Command& c : kCommands) names.push_back(c.name);
  const std::string near = k3::cli::nearest(first, names);
  std::fprintf(stderr, "k3: unknown command '%s'%s (see k3 help)\n", argv[1],
               near.empty() ? "" : ("; did you mean '" + near + "'?").c_str());
  return 2;
}
