#include "train/train_checkpoint.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "loader/safetensors.h"
#include "loader/safetensors_writer.h"

namespace k3::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* kShard = "model-00001-of-00001.safetensors";
const char* kTokenizerFiles[] = {"tiktoken.model", "tokenizer_config.json",
                                 "generation_config.json", "chat_template.jinja"};

json read_json(const fs::path& p) {
  std::ifstream f(p);
  check(f.good(), "training checkpoint: cannot read ", p.string());
  try {
    return json::parse(f);
  } catch (const json::exception& e) {
    fail("training checkpoint: ", p.string(), " is not valid JSON: ", e.what());
  }
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
  check(f.good(), "training checkpoint: cannot write ", p.string());
}

void write_weights(const fs::path& dir, const ParamSet& params) {
  params.write_safetensors((dir / kShard).string());
  json map = json::object();
  uint64_t total = 0;
  for (const auto& [name, p] : params.all()) {
    map[name] = kShard;
    total += p.value.size() * sizeof(float);
  }
  json index = {{"metadata", {{"total_size", total}}}, {"weight_map", map}};
  write_text(dir / "model.safetensors.index.json", index.dump(2) + "\n");
}

void write_moments(const fs::path& path, Optimizer& opt) {
  std::vector<PlannedTensor> plan;
  std::vector<const std::vector<float>*> data;
  const auto& ps = opt.params();
  for (size_t i = 0; i < ps.size(); ++i) {
    for (auto [tag, v] :
         {std::pair{"m/", &opt.first_moments()[i]}, std::pair{"v/", &opt.second_moments()[i]}}) {
      if (v->empty()) continue;
      plan.push_back({tag + ps[i].name, DType::f32, {static_cast<int64_t>(v->size())}});
      data.push_back(v);
    }
  }
  SafetensorsWriter w(path.string(), plan);
  for (const auto* v : data) w.append(v->data(), v->size() * sizeof(float));
  w.finish();
}

json number_or_null(double v) { return std::isnan(v) ? json(nullptr) : json(v); }
double number_of(const json& j) {
  return j.is_null() ? std::numeric_limits<double>::quiet_NaN() : j.get<double>();
}

json state_json(const TrainState& st) {
  json hist = json::array();
  for (const TrainPoint& p : st.history) {
    hist.push_back({{"step", p.step},
                    {"loss", p.loss},
                    {"lr", p.lr},
                    {"max_vio", p.max_vio},
                    {"grad_norm", p.grad_norm},
                    {"tokens_per_s", p.tokens_per_s},
                    {"val_loss", number_or_null(p.val_loss)},
                    {"val_bpb", number_or_null(p.val_bpb)}});
  }
  return {{"step", st.step}, {"rng", st.rng}, {"router_biases", st.biases}, {"history", hist}};
}

}  // namespace

void save_training_checkpoint(const std::string& dir, const std::string& source_dir,
                              const std::string& tokenizer_dir, const ParamSet& params,
                              Optimizer& opt, const TrainState& state, const SaveHook& hook) {
  const fs::path final_dir(dir), tmp(dir + ".tmp"), old(dir + ".old");
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  check(!ec, "training checkpoint: cannot create ", tmp.string(), ": ", ec.message());
  json config = read_json(fs::path(source_dir) / "config.json");
  config.erase("quantization_config");  // the trained experts are stored as F32
  write_text(tmp / "config.json", config.dump(2) + "\n");
  for (const char* name : kTokenizerFiles) {
    const fs::path src = fs::path(tokenizer_dir) / name;
    if (fs::exists(src)) fs::copy_file(src, tmp / name, fs::copy_options::overwrite_existing);
  }
  write_weights(tmp, params);
  write_moments(tmp / "optimizer.safetensors", opt);
  write_text(tmp / "train_state.json", state_json(state).dump(1) + "\n");
  if (hook) hook(tmp.string(), state.history);
  fs::remove_all(old, ec);
  if (fs::exists(final_dir)) fs::rename(final_dir, old);
  fs::rename(tmp, final_dir);
  fs::remove_all(old, ec);
}

TrainState load_training_state(const std::string& dir, Optimizer& opt) {
  const fs::path d(dir);
  check(fs::exists(d / "train_state.json") && fs::exists(d / "optimizer.safetensors"), dir,
        " is not a training checkpoint (no train_state.json / optimizer.safetensors)");
  const json j = read_json(d / "train_state.json");
  TrainState st;
  try {
    st.step = j.at("step").get<int64_t>();
    st.rng = j.at("rng").get<std::string>();
    st.biases = j.at("router_biases").get<std::vector<std::vector<double>>>();
    for (const json& p : j.at("history")) {
      TrainPoint t;
      t.step = p.at("step");
      t.loss = p.at("loss");
      t.lr = p.at("lr");
      t.max_vio = p.at("max_vio");
      t.grad_norm = p.at("grad_norm");
      t.tokens_per_s = p.at("tokens_per_s");
      t.val_loss = number_of(p.at("val_loss"));
      t.val_bpb = number_of(p.at("val_bpb"));
      st.history.push_back(t);
    }
  } catch (const json::exception& e) {
    fail(dir, "/train_state.json: ", e.what());
  }
  const SafetensorsFile moments((d / "optimizer.safetensors").string());
  const auto& ps = opt.params();
  for (size_t i = 0; i < ps.size(); ++i) {
    for (auto [tag, v] :
         {std::pair{"m/", &opt.first_moments()[i]}, std::pair{"v/", &opt.second_moments()[i]}}) {
      if (v->empty()) continue;
      auto it = moments.tensors().find(tag + ps[i].name);
      check(it != moments.tensors().end() && it->second.nbytes == v->size() * sizeof(float), dir,
            "/optimizer.safetensors: no moment ", tag, ps[i].name, " of ", v->size(),
            " floats (a checkpoint of another config or optimizer?)");
      std::memcpy(v->data(), it->second.data, it->second.nbytes);
    }
  }
  opt.set_steps_taken(st.step);
  return st;
}

}  // namespace k3::train
