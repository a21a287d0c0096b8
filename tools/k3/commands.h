// The `k3` subcommands. Each lives in its own cmd_<name>.cpp and is listed once in main.cpp.
// A command returns the process exit code; it may throw k3::Error, which main() reports.
#pragma once

namespace k3::cli {

int cmd_init(int argc, char** argv);
int cmd_logits(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_cost(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_detokenize(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_chat(int argc, char** argv);
int cmd_perplexity(int argc, char** argv);
int cmd_tokenizer(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_train(int argc, char** argv);
int cmd_convert(int argc, char** argv);

}  // namespace k3::cli
