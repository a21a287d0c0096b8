// k3 train: train a K3-architecture checkpoint on text files (k3/train.h), writing checkpoints
// in the official layout with a training-curve SVG beside them.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "args.h"
#include "commands.h"
#include "common_options.h"
#include "cost/svg_chart.h"
#include "k3/error.h"
#include "k3/init.h"
#include "k3/train.h"

namespace k3::cli {
namespace {

cost::Series series(const std::string& name, const std::string& color) {
  cost::Series s;
  s.name = name;
  s.color = color;
  return s;
}

std::string at_y(std::string svg, int y) {
  const size_t at = svg.find("<svg ");
  if (at != std::string::npos) svg.insert(at + 5, "y=\"" + std::to_string(y) + "\" ");
  return svg;
}

// Loss and held-out loss on one chart, MaxVio on another, stacked in one SVG file.
std::string curve_svg(const std::vector<TrainPoint>& hist) {
  cost::LineChart loss, vio;
  loss.title = "Training loss";
  loss.y_label = "loss (nats/token)";
  vio.title = "Router load imbalance";
  vio.y_label = "MaxVio (max over MoE layers)";
  loss.x_label = vio.x_label = "step";
  cost::Series tr = series("train loss", "#1f77b4"), va = series("val loss", "#d62728"),
               mv = series("MaxVio", "#2ca02c");
  for (const TrainPoint& p : hist) {
    tr.x.push_back(double(p.step));
    tr.y.push_back(p.loss);
    mv.x.push_back(double(p.step));
    mv.y.push_back(p.max_vio);
    if (!std::isnan(p.val_loss)) {
      va.x.push_back(double(p.step));
      va.y.push_back(p.val_loss);
    }
  }
  loss.series.push_back(tr);
  if (!va.x.empty()) loss.series.push_back(va);
  vio.series.push_back(mv);
  // Each chart is a complete <svg>; nest the two, one above the other, in one document.
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"800\" height=\"880\">\n" +
         at_y(cost::svg_line_chart(loss), 0) + at_y(cost::svg_line_chart(vio), 440) + "</svg>\n";
}

void write_curve(const std::string& dir, const std::vector<TrainPoint>& hist) {
  std::ofstream f(dir + "/train_curve.svg");
  f << curve_svg(hist);
  check(f.good(), "cannot write ", dir, "/train_curve.svg");
}

Args train_args() {
  return Args(
      "train",
      "[--recipe FILE] (-m DIR | --config FILE --init DIR | --resume DIR) --data FILE... -o DIR",
      "Train a checkpoint on text files tokenised with the model's tokenizer. Each step takes\n"
      "batch x accum random windows of seq-len tokens, averages their gradients, clips, and\n"
      "updates (Muon for hidden matrices and AdamW for the rest, or AdamW throughout), then\n"
      "sets the routers' biases by the balancing method. Writes DIR (official layout, F32,\n"
      "loadable by every command) atomically at the end and every --save-every steps, with\n"
      "the optimiser state for a bit-exact --resume, train_curve.svg and train_recipe.json\n"
      "(every option's value: --recipe DIR/train_recipe.json repeats the run).",
      {{"recipe", "", "FILE",
        "JSON object of these options (long names) and values; the command line overrides it", ""},
       {"model", "m", "DIR", "initial checkpoint (e.g. from k3 init)", ""},
       {"config", "", "FILE", "with --init: write a random initial checkpoint first", ""},
       {"init", "", "DIR", "where --config's random initial checkpoint goes", ""},
       {"resume", "", "DIR", "continue a checkpoint written by k3 train", ""},
       {"tokenizer", "", "DIR", "tokenizer directory (default: the checkpoint's)", ""},
       {"data", "", "FILE", "training text (repeatable)", ""},
       {"val", "", "FILE", "held-out text for evaluation", ""},
       {"output", "o", "DIR", "output checkpoint directory", ""},
       Option("seq-len", "", "N", "tokens per window", "128").range(1),
       Option("batch", "b", "N", "windows per micro-batch", "1").range(1),
       Option("accum", "", "N", "micro-batches accumulated per step", "1").range(1),
       Option("steps", "", "N", "optimizer steps (the schedule's length)", "100").range(1),
       Option("stop-after", "", "N", "stop and save after N steps (resume later)", "0").range(0),
       {"lr", "", "X", "peak learning rate", "0.003"},
       {"min-lr-ratio", "", "X", "final lr / peak lr", "0.1"},
       Option("warmup", "", "N", "linear warmup steps", "0").range(0),
       {"schedule", "", "NAME", "constant | cosine | wsd", "cosine"},
       {"optimizer", "", "NAME", "muon | adamw", "muon"},
       {"balance", "", "NAME", "router balancing: qb | qb-exact | lossfree | none", "qb"},
       {"clip", "", "X", "gradient clipping global norm (0: off)", "1.0"},
       {"weight-decay", "", "X", "decoupled weight decay", "0.1"},
       {"mtp-weight", "", "X", "weight of the MTP head's loss (num_nextn_predict_layers = 1)",
        "0.3"},
       Option("eval-every", "", "N", "evaluate on --val every N steps", "50").range(0),
       Option("eval-windows", "", "N", "held-out windows per evaluation", "8").range(1),
       Option("save-every", "", "N", "also checkpoint every N steps", "0").range(0),
       Option("log-every", "", "N", "progress line every N steps", "1").range(1),
       threads_option(),
       {"device", "", "NAME",
        "where the forward and backward run: cpu, or cuda (a micro-batch's windows at once on "
        "the GPU)",
        "cpu"},
       seed_option("0")});
}

using Json = nlohmann::json;

// Options that repeat (every value kept) and options a recipe may not set.
const std::set<std::string> kRepeatable = {"data"};
const std::set<std::string> kNotInRecipe = {"recipe", "help"};

// The recipe's options as command-line tokens, for those the command line does not give.
std::vector<std::string> recipe_tokens(const std::string& path, const Args& cli) {
  std::ifstream f(path);
  check(f.good(), "cannot read the recipe ", path);
  Json j;
  try {
    j = Json::parse(f);
  } catch (const Json::exception& e) {
    fail("recipe ", path, " is not valid JSON: ", e.what());
  }
  check(j.is_object(), "recipe ", path, " must be a JSON object of option names and values");
  std::set<std::string> known;
  std::vector<std::string> settable;  // for the suggestion on a typo
  for (const Option& o : cli.options()) {
    known.insert(o.name);
    if (!kNotInRecipe.count(o.name)) settable.push_back(o.name);
  }
  std::vector<std::string> out;
  for (const auto& [name, v] : j.items()) {
    if (!known.count(name) || kNotInRecipe.count(name)) {
      const std::string near = nearest(name, settable);
      fail("recipe ", path, ": unknown option '", name, "'",
           near.empty() ? "" : "; did you mean '" + near + "'?",
           " (the long names of k3 train --help, without dashes)");
    }
    if (cli.given(name)) continue;  // the command line wins
    std::vector<Json> values =
        v.is_array() && kRepeatable.count(name) ? v.get<std::vector<Json>>() : std::vector<Json>{v};
    for (const Json& x : values) {
      check(x.is_string() || x.is_number(), "recipe ", path, ": option '", name,
            "' must be a string or a number",
            kRepeatable.count(name) ? " (or a list of them)" : "");
      out.push_back("--" + name);
      out.push_back(x.is_string() ? x.get<std::string>() : x.dump());
    }
  }
  return out;
}

// Every option's value after parsing (given, from the recipe, or the default).
std::string recipe_json(const Args& args) {
  Json j = Json::object();
  for (const Option& o : args.options()) {
    if (kNotInRecipe.count(o.name) || !args.has(o.name)) continue;
    if (kRepeatable.count(o.name)) {
      j[o.name] = args.all(o.name);
    } else {
      j[o.name] = args.str(o.name);
    }
  }
  return j.dump(2) + "\n";
}

// Parses argv, then again with the --recipe file's options in front of it (so the command
// line overrides them). Returns false when --help was printed.
bool parse_with_recipe(int argc, char** argv, Args& args) {
  if (!args.parse(argc, argv)) return false;
  if (!args.given("recipe")) return true;
  std::vector<std::string> tokens = recipe_tokens(args.str("recipe"), args);
  std::vector<char*> merged{argv[0]};
  for (std::string& t : tokens) merged.push_back(t.data());
  for (int i = 1; i < argc; ++i) merged.push_back(argv[i]);
  args = train_args();
  return args.parse(static_cast<int>(merged.size()), merged.data());
}

}  // namespace

int cmd_train(int argc, char** argv) {
  Args args = train_args();
  if (!parse_with_recipe(argc, argv, args)) return 0;
  TrainConfig c;
  c.seed = static_cast<uint64_t>(args.integer("seed"));
  if (args.given("config")) {
    check(args.given("init") && !args.given("model"), "--config needs --init DIR (and no -m)");
    InitOptions io;
    io.seed = c.seed;
    init_checkpoint_from_file(args.str("config"), args.str("init"), io);
    c.model_dir = args.str("init");
  } else if (args.given("model")) {
    c.model_dir = args.str("model");
  }
  if (args.given("resume")) c.resume_dir = args.str("resume");
  if (args.given("tokenizer")) c.tokenizer_dir = args.str("tokenizer");
  check(args.given("data"), "no training text: give --data FILE");
  check(args.given("output"), "no output directory: give -o DIR");
  c.data_files = args.all("data");
  if (args.given("val")) c.val_file = args.str("val");
  c.out_dir = args.str("output");
  c.seq_len = args.integer("seq-len");
  c.micro_batch = args.integer("batch");
  c.accumulation = args.integer("accum");
  c.steps = args.integer("steps");
  c.stop_after = args.integer("stop-after");
  c.lr = args.number("lr");
  c.min_lr_ratio = args.number("min-lr-ratio");
  c.warmup = args.integer("warmup");
  c.schedule = args.str("schedule");
  c.optimizer = args.str("optimizer");
  c.balance = args.str("balance");
  c.clip = args.number("clip");
  c.weight_decay = args.number("weight-decay");
  c.mtp_weight = args.number("mtp-weight");
  c.eval_every = args.integer("eval-every");
  c.eval_windows = args.integer("eval-windows");
  c.save_every = args.integer("save-every");
  c.log_every = args.integer("log-every");
  c.device = args.str("device");
  apply_threads(args);
  c.log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  c.on_save = [recipe = recipe_json(args)](const std::string& dir,
                                           const std::vector<TrainPoint>& hist) {
    write_curve(dir, hist);
    std::ofstream f(dir + "/train_recipe.json");
    f << recipe;
    check(f.good(), "cannot write ", dir, "/train_recipe.json");
  };
  const TrainResult r = train_model(c);
  const double step_s = r.pass_seconds + r.update_seconds;
  std::fprintf(stderr, "k3 train: wrote %s (%zu steps, %.0f tokens/s", c.out_dir.c_str(),
               r.history.size(), r.tokens_per_s);
  if (step_s > 0) {  // where the time went: tells a slow optimiser from a slow pass
    std::fprintf(stderr, "; step time: forward+backward %.0f%%, update %.0f%%",
                 100 * r.pass_seconds / step_s, 100 * r.update_seconds / step_s);
  }
  std::fprintf(stderr, ")\n");
  return 0;
}

}  // namespace k3::cli
