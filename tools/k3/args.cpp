#include "args.h"

#include <cstdio>
#include <sstream>

#include "k3/error.h"

namespace k3::cli {

Args::Args(std::string command, std::string usage, std::string summary, std::vector<Option> options)
    : command_(std::move(command)),
      usage_(std::move(usage)),
      summary_(std::move(summary)),
      options_(std::move(options)) {
  for (const Option& o : options_) {
    if (!o.default_value.empty()) values_[o.name] = o.default_value;
  }
}

const Option* Args::find(const std::string& token) const {
  for (const Option& o : options_) {
    if (token == "--" + o.name || (!o.alias.empty() && token == "-" + o.alias)) return &o;
  }
  return nullptr;
}

bool Args::parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string tok = argv[i];
    if (tok == "-h" || tok == "--help") {
      std::fputs(help().c_str(), stdout);
      return false;
    }
    std::string inline_value;
    bool has_inline = false;
    if (tok.rfind("--", 0) == 0 && tok.find('=') != std::string::npos) {
      inline_value = tok.substr(tok.find('=') + 1);
      tok = tok.substr(0, tok.find('='));
      has_inline = true;
    }
    if (tok.size() > 1 && tok[0] == '-' && !(tok[1] >= '0' && tok[1] <= '9')) {
      const Option* o = find(tok);
      check(o != nullptr, "unknown option '", tok, "' (see k3 ", command_, " --help)");
      if (o->value_name.empty()) {
        check(!has_inline, "option --", o->name, " takes no value");
        values_[o->name] = "1";
      } else if (has_inline) {
        values_[o->name] = inline_value;
      } else {
        check(i + 1 < argc, "option ", tok, " needs a value (", o->value_name, ")");
        values_[o->name] = argv[++i];
      }
      given_[o->name].push_back(values_[o->name]);
    } else {
      // No k3 command takes positional arguments: a stray word is a mistake worth naming.
      fail("unexpected argument '", tok, "' (see k3 ", command_, " --help)");
    }
  }
  return true;
}

bool Args::has(const std::string& name) const { return values_.count(name) > 0; }

std::string Args::str(const std::string& name) const {
  auto it = values_.find(name);
  check(it != values_.end(), "missing required option --", name, " (see k3 ", command_, " --help)");
  return it->second;
}

int64_t Args::integer(const std::string& name) const {
  std::string s = str(name);
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  check(used == s.size() && !s.empty(), "option --", name, ": expected an integer, found '", s,
        "'");
  return v;
}

std::vector<std::string> Args::all(const std::string& name) const {
  auto it = given_.find(name);
  return it == given_.end() ? std::vector<std::string>{} : it->second;
}

double Args::number(const std::string& name) const {
  std::string s = str(name);
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  check(used == s.size() && !s.empty(), "option --", name, ": expected a number, found '", s, "'");
  return v;
}

std::string Args::help() const {
  std::ostringstream os;
  os << "usage: k3 " << command_ << " " << usage_ << "\n\n" << summary_ << "\n\noptions:\n";
  for (const Option& o : options_) {
    std::string left = "  ";
    left += o.alias.empty() ? "    " : "-" + o.alias + ", ";
    left += "--" + o.name;
    if (!o.value_name.empty()) left += " " + o.value_name;
    os << left;
    os << std::string(left.size() < 30 ? 30 - left.size() : 1, ' ') << o.help;
    if (!o.default_value.empty()) os << " (default: " << o.default_value << ")";
    os << "\n";
  }
  os << "  -h, --help                  show this help\n";
  return os.str();
}

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t b = item.find_first_not_of(" \t");
    size_t e = item.find_last_not_of(" \t");
    check(b != std::string::npos, what, ": empty entry in '", text, "'");
    item = item.substr(b, e - b + 1);
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    check(used == item.size(), what, ": '", item, "' is not an integer");
    out.push_back(v);
  }
  check(!out.empty(), what, ": empty list");
  return out;
}

}  // namespace k3::cli
