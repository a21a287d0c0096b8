// k3 run: generate text from a prompt, streamed to stdout piece by piece, with a line of
// prefill and decode tokens/s on stderr at the end. Ctrl-C (once the model is loaded) stops
// within a fraction of a second, also during a long prefill: the output so far stays, exit 130.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "args.h"
#include "chat_display.h"
#include "chat_prompt.h"
#include "commands.h"
#include "common_options.h"
#include "generation_options.h"
#include "k3/error.h"
#include "k3/generate.h"
#include "k3/k3.h"
#include "k3/tokenizer.h"
#include "model_dir.h"
#include "resources.h"
#include "run_prompt.h"
#include "tokenizer_io.h"

namespace k3::cli {
namespace {

Args run_args() {
  std::vector<Option> opts = {
      model_option(),
      prompt_option("the prompt"),
      file_option("read the prompt from FILE (default: standard input)"),
      {"ids", "", "LIST", "the prompt as comma-separated token ids", ""},
      {"chat", "", "", "wrap the prompt in the chat format (a user message)", ""},
      {"system", "", "TEXT", "with --chat: a system message before the prompt", ""},
      {"raw", "", "", "with --chat: print the output as the model wrote it, markers included", ""},
      threads_option(),
      device_option(),
      precision_option(),
  };
  for (Option& o : chat_options("off")) opts.push_back(std::move(o));
  for (Option& o : generation_options()) opts.push_back(std::move(o));
  return Args(
      "run", "[-m DIR] [-p TEXT | -f FILE | --ids LIST | < stdin] [--chat] [options]",
      "Generate text from a prompt and stream it to standard output as it is made. At the\n"
      "end a line on standard error gives the prefill and decode tokens/s. Without --chat\n"
      "the prompt is plain text (special-token texts become their ids); with --chat it is\n"
      "a user message in the model's chat format, the answer ends at <|end_of_msg|>, and the\n"
      "thinking (--thinking on) is shown dim on a terminal, between <think> lines otherwise.",
      std::move(opts));
}

std::vector<int32_t> prompt_ids(const Args& args, const Tokenizer& tok,
                                const ChatSettings& settings) {
  check(args.has("prompt") + args.has("file") + args.has("ids") <= 1,
        "give the prompt one way: -p TEXT, -f FILE, --ids LIST or standard input");
  const bool from_stdin = !args.has("prompt") && !args.has("file") && !args.has("ids");
  check(!from_stdin || !isatty(STDIN_FILENO),
        "no prompt: give -p TEXT, -f FILE or --ids LIST, or pipe the text to standard input");
  if (args.has("ids")) {
    check(!args.has("chat"), "--chat takes a text prompt, not --ids");
    return parse_id_list(args.str("ids"), "--ids");
  }
  PromptText text = args.has("prompt") ? PromptText{args.str("prompt"), "the prompt (-p)"}
                    : args.has("file")
                        ? PromptText{read_input_file(args.str("file")), args.str("file")}
                        : PromptText{read_stdin(), "standard input"};
  if (!args.has("chat")) return encode_prompt(tok, text);
  check_utf8(text);
  Json messages = Json::array();
  if (args.has("system")) messages.push_back({{"role", "system"}, {"content", args.str("system")}});
  messages.push_back({{"role", "user"}, {"content", text.text}});
  return encode_conversation(tok, messages, settings);
}

}  // namespace

namespace {

bool same_destination() {
  struct stat out, err;
  return fstat(STDOUT_FILENO, &out) == 0 && fstat(STDERR_FILENO, &err) == 0 &&
         out.st_dev == err.st_dev && out.st_ino == err.st_ino;
}

}  // namespace

int cmd_run(int argc, char** argv) {
  Args args = run_args();
  if (!args.parse(argc, argv)) return 0;
  apply_threads(args);
  apply_device(args);
  apply_precision(args);
  const std::string dir = resolve_model_dir(args);
  const Tokenizer tok = Tokenizer::load(dir);
  const GenerateParams params = generation_params(args, dir, tok);
  const ChatSettings settings = chat_settings(args);  // checked with or without --chat
  args.only_with({"system", "raw", "thinking", "effort"}, "chat");
  const std::vector<int32_t> ids = prompt_ids(args, tok, settings);
  warn_if_model_exceeds_memory(dir);
  auto model = Model::load(dir);
  Session session(*model, tok);
  session.set_cancel_flag(&cancel_on_sigint());
  std::unique_ptr<ChatDisplay> display;
  if (args.has("chat") && !args.has("raw")) {
    display = std::make_unique<ChatDisplay>(stdout, isatty(STDOUT_FILENO), settings.thinking);
  }
  GenerateResult r;
  try {
    r = session.generate(ids, params, [&display](std::string_view piece) {
      if (display) {
        display->push(piece);
      } else {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      }
      return true;
    });
  } catch (const Cancelled& e) {  // Ctrl-C during the prefill: nothing was generated
    std::fprintf(stderr, "k3 run: %s\n", e.what());
    return 130;
  }
  if (display) display->finish();
  // The statistics go to stderr on their own line: end the text's line first when both
  // streams reach the same terminal, pipe or file.
  if (!r.text.empty() && r.text.back() != '\n' && (isatty(STDOUT_FILENO) || same_destination()))
    std::fputc('\n', stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "k3 run: %s; stop: %s; seed %llu\n", timing_line(r).c_str(),
               to_string(r.stop), static_cast<unsigned long long>(params.sampling.seed));
  return r.stop == StopReason::cancelled ? 130 : 0;  // 128 + SIGINT, as the shell reports it
}

}  // namespace k3::cli
