#include "args.h"

#include <algorithm>
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
    for (const std::string& n : o.other_names) {
      if (token == "--" + n) return &o;
    }
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
      if (o == nullptr && tok.size() > 2 && tok[1] != '-') {  // -n2: a short option and its value
        const Option* s = find(tok.substr(0, 2));
        if (s != nullptr && !s->value_name.empty()) {
          o = s;
          inline_value = tok.substr(2);
          tok = tok.substr(0, 2);
          has_inline = true;
        }
      }
      if (o == nullptr) {
        std::vector<std::string> spellings;
        for (const Option& c : options_) {
          spellings.push_back("--" + c.name);
          if (!c.alias.empty()) spellings.push_back("-" + c.alias);
          for (const std::string& n : c.other_names) spellings.push_back("--" + n);
        }
        const std::string near = nearest(tok, spellings);
        fail("unknown option '", tok, "'", near.empty() ? "" : "; did you mean '" + near + "'?",
             " (see k3 ", command_, " --help)");
      }
      if (o->value_name.empty()) {
        check(!has_inline, "option ", tok, " takes no value");
        values_[o->name] = "1";
      } else if (has_inline) {
        values_[o->name] = inline_value;
      } else {
        check(i + 1 < argc, "option ", tok, " needs a value (", o->value_name, ")");
        values_[o->name] = argv[++i];
      }
      given_[o->name].push_back(values_[o->name]);
      spelled_[o->name] = tok;
      if (o->ranged) {
        const int64_t v = integer(o->name);
        if (o->max == std::numeric_limits<int64_t>::max()) {
          check(v >= o->min, tok, " must be at least ", o->min, ", got ", v);
        } else {
          check(v >= o->min && v <= o->max, tok, " must be in ", o->min, "..", o->max, ", got ", v);
        }
      }
    } else {
      // No k3 command takes positional arguments: a stray word is a mistake worth naming.
      fail("unexpected argument '", tok, "' (see k3 ", command_, " --help)");
    }
  }
  return true;
}

bool Args::has(const std::string& name) const { return values_.count(name) > 0; }

bool Args::given(const std::string& name) const { return given_.count(name) > 0; }

void Args::only_with(const std::vector<std::string>& options, const std::string& name) const {
  if (given(name)) return;
  for (const std::string& o : options) {
    auto it = spelled_.find(o);
    check(it == spelled_.end(), it == spelled_.end() ? "" : it->second, " has no effect without --",
          name, " (see k3 ", command_, " --help)");
  }
}

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
  auto sp = spelled_.find(name);
  check(used == s.size() && !s.empty(), "option ", sp == spelled_.end() ? "--" + name : sp->second,
        ": expected an integer, found '", s, "'");
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
    for (const std::string& n : o.other_names) left += ", --" + n;
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

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_d && d < c.size()) {
      best = c;
      best_d = d;
    }
  }
  return best;
}

}  // namespace k3::cli
