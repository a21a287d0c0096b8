// k3 chat: an interactive multi-turn chat in the model's chat format. The conversation is kept
// as OpenAI-style messages; the model state is re-used across turns so that each turn prefills
// only its own tokens (see conversation.h). Ctrl-C stops the answer being written; Ctrl-C at
// the prompt, /quit or end of input leaves. Ctrl-C during the prefill of a long prompt stops it
// within a fraction of a second too. The conversation keeps a partial answer; when nothing
// was generated yet, the unanswered message is dropped (as after an error) and the chat goes on.
// The model state keeps the prompt chunks prefilled before the Ctrl-C, or is reset when it hit
// a chunk mid-way (see generate.h), so the next turn may prefill more.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "args.h"
#include "chat_display.h"
#include "chat_prompt.h"
#include "commands.h"
#include "common_options.h"
#include "conversation.h"
#include "generation_options.h"
#include "k3/error.h"
#include "k3/generate.h"
#include "k3/k3.h"
#include "line_input.h"
#include "model_dir.h"
#include "resources.h"
#include "run_prompt.h"

namespace k3::cli {
namespace {

constexpr const char* kHelp =
    "  /reset       start a new conversation (keeps --system)\n"
    "  /save FILE   write the conversation as a JSON array of messages\n"
    "  /load FILE   read a conversation written by /save (or {\"messages\": [...]})\n"
    "  /help        this list\n"
    "  /quit        leave (also /exit, Ctrl-D, or Ctrl-C at the prompt)\n"
    "  End a line with \\ to continue the message on the next line. Ctrl-C stops an answer.\n";

Args chat_args() {
  std::vector<Option> opts = {
      model_option(),
      {"system", "", "TEXT", "a system message at the start of the conversation", ""},
      threads_option(),
      device_option(),
      precision_option(),
  };
  for (Option& o : chat_options("off")) opts.push_back(std::move(o));
  for (Option& o : generation_options()) opts.push_back(std::move(o));
  return Args("chat", "[-m DIR] [--system TEXT] [--thinking on|off] [options]",
              std::string("An interactive chat in the model's chat format. Type a message and "
                          "press Enter; commands:\n") +
                  kHelp,
              std::move(opts));
}

struct ChatContext {
  Session& session;
  Conversation& conv;
  const GenerateParams& params;
  const ChatSettings& settings;
  std::atomic<bool>& cancel;  // set by Ctrl-C (cancel_on_sigint)
};

void report(const GenerateResult& r) {
  std::fprintf(stderr, "[%s; re-used %lld; stop: %s]\n", timing_line(r).c_str(),
               static_cast<long long>(r.n_reused), to_string(r.stop));
}

void answer(ChatContext& c, const std::string& text) {
  check_utf8({text, "the message"});
  c.conv.add_user(text);
  try {
    const std::vector<int32_t> ids = c.conv.prompt();
    ChatDisplay display(stdout, isatty(STDOUT_FILENO), c.settings.thinking);
    clear_interrupted();
    c.cancel.store(false);
    GenerateResult r;
    try {
      r = c.session.generate(ids, c.params, [&display](std::string_view piece) {
        display.push(piece);
        return !interrupted();
      });
    } catch (const Cancelled& e) {  // Ctrl-C during the prefill
      display.finish();
      c.conv.drop_last();
      std::fflush(stdout);
      std::fprintf(stderr, "[%s; the message is dropped]\n", e.what());
      return;
    }
    const chat::ParsedMessage& m = display.finish();
    if (r.stop == StopReason::cancelled && r.tokens.empty()) {  // Ctrl-C right after the prefill
      c.conv.drop_last();
      std::fflush(stdout);
      std::fprintf(stderr, "[cancelled before the answer began; the message is dropped]\n");
      return;
    }
    c.conv.add_answer(ids, r, m);
    std::fputs("\n", stdout);
    std::fflush(stdout);
    report(r);
  } catch (const Error&) {
    c.conv.drop_last();
    throw;
  }
}

// Returns false to leave.
bool command(ChatContext& c, const std::string& line) {
  const size_t space = line.find(' ');
  const std::string name = line.substr(0, space);
  const size_t from = line.find_first_not_of(' ', space);
  const std::string arg = from == std::string::npos ? "" : line.substr(from);
  if (name == "/quit" || name == "/exit") return false;
  if (name == "/help") {
    std::fputs(kHelp, stdout);
  } else if (name == "/reset") {
    c.conv.reset();
    c.session.reset();
    std::fputs("[new conversation]\n", stdout);
  } else if (name == "/save" || name == "/load") {
    check(!arg.empty(), name, " needs a file name");
    if (name == "/save") {
      c.conv.save(arg);
    } else {
      c.conv.load(arg);
    }
    std::printf("[%s %s %s %s]\n", name == "/save" ? "saved" : "loaded",
                plural(static_cast<int64_t>(c.conv.messages().size()), "message").c_str(),
                name == "/save" ? "to" : "from", arg.c_str());
  } else {
    fail("unknown command '", name, "' (/help lists them)");
  }
  std::fflush(stdout);
  return true;
}

}  // namespace

int cmd_chat(int argc, char** argv) {
  Args args = chat_args();
  if (!args.parse(argc, argv)) return 0;
  apply_threads(args);
  apply_device(args);
  apply_precision(args);
  const std::string dir = resolve_model_dir(args);
  const Tokenizer tok = Tokenizer::load(dir);
  const GenerateParams params = generation_params(args, dir, tok);
  const ChatSettings settings = chat_settings(args);
  warn_if_model_exceeds_memory(dir);
  auto model = Model::load(dir);
  Session session(*model, tok);
  Conversation conv(tok, settings, args.has("system") ? args.str("system") : "");
  install_interrupt_handler();
  std::atomic<bool>& cancel = cancel_on_sigint();  // after install_interrupt_handler: chains it
  session.set_cancel_flag(&cancel);
  ChatContext ctx{
      .session = session, .conv = conv, .params = params, .settings = settings, .cancel = cancel};
  LineReader input;
  if (isatty(STDIN_FILENO)) {
    std::fprintf(stderr, "k3 chat with %s (seed %llu). /help for commands, /quit to leave.\n",
                 dir.c_str(), static_cast<unsigned long long>(params.sampling.seed));
  }
  for (std::string line;;) {
    clear_interrupted();
    const ReadStatus s = input.read(line, "> ", "… ");
    if (s == ReadStatus::interrupted && input.editing()) continue;  // the line was cleared
    if (s != ReadStatus::line) {
      if (s == ReadStatus::interrupted) std::fputs("\n", stdout);
      break;
    }
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    try {
      if (line[0] == '/') {
        if (!command(ctx, line)) break;
      } else {
        answer(ctx, line);
      }
    } catch (const Error& e) {
      std::fflush(stdout);
      std::fprintf(stderr, "error: %s\n", strip_prefix(e.what(), "chat").c_str());
    }
  }
  return 0;
}

}  // namespace k3::cli
