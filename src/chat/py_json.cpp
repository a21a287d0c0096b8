#include "chat/py_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "k3/json_depth.h"

namespace k3::chat {

namespace {

// Python's float repr: the shortest digits that round-trip (closest to the value on ties,
// which std::to_chars guarantees and nlohmann's Grisu2 does not), in fixed notation when the
// decimal point position p satisfies -4 < p <= 16, else d.ddde+XX.
std::string py_float(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // [-]d[.ddd]e[+-]xx
  std::string sign = sci[0] == '-' ? "-" : "";
  const size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(sign.size(), e - sign.size())) {
    if (c != '.') digits += c;
  }
  const int exp10 = std::stoi(sci.substr(e + 1));
  const int point = exp10 + 1;  // digits d1 d2 ... mean 0.d1d2... * 10^point
  const int n = static_cast<int>(digits.size());
  if (point > -4 && point <= 16) {
    if (point <= 0) return sign + "0." + std::string(-point, '0') + digits;
    if (point < n) return sign + digits.substr(0, point) + "." + digits.substr(point);
    return sign + digits + std::string(point - n, '0') + ".0";
  }
  std::string mantissa = digits.substr(0, 1) + (n > 1 ? "." + digits.substr(1) : "");
  const int shown = point - 1;
  std::string exp_digits = std::to_string(shown < 0 ? -shown : shown);
  if (exp_digits.size() < 2) exp_digits = "0" + exp_digits;
  return sign + mantissa + "e" + (shown < 0 ? "-" : "+") + exp_digits;
}

// Values built from parsed text are at most kMaxJsonDepth deep (k3/json_depth.h); the check
// keeps the recursion bounded for values built any other way too.
void check_depth(int depth) {
  check(depth <= kMaxJsonDepth, "JSON value nested deeper than ", kMaxJsonDepth, " levels");
}

void dump_to(const Json& v, JsonSeparators seps, std::string& out, int depth) {
  if (v.is_structured()) check_depth(depth);
  const char* item_sep = seps == JsonSeparators::compact ? "," : ", ";
  const char* key_sep = seps == JsonSeparators::compact ? ":" : ": ";
  switch (v.type()) {
    case Json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, item] : v.items()) {
        if (!first) out += item_sep;
        first = false;
        out += Json(key).dump(-1, ' ', false, Json::error_handler_t::replace);
        out += key_sep;
        dump_to(item, seps, out, depth + 1);
      }
      out += '}';
      return;
    }
    case Json::value_t::array: {
      out += '[';
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += item_sep;
        dump_to(v[i], seps, out, depth + 1);
      }
      out += ']';
      return;
    }
    case Json::value_t::number_float:
      out += py_float(v.get<double>());
      return;
    default:
      out += v.dump(-1, ' ', false, Json::error_handler_t::replace);
  }
}

}  // namespace

std::string py_dumps(const Json& value, JsonSeparators separators) {
  std::string out;
  dump_to(value, separators, out, 0);
  return out;
}

namespace {

Json deep_sorted_at(const Json& value, int depth) {
  if (value.is_structured()) check_depth(depth);
  if (value.is_array()) {
    Json out = Json::array();
    for (const Json& item : value) out.push_back(deep_sorted_at(item, depth + 1));
    return out;
  }
  if (!value.is_object()) return value;
  std::vector<std::string> keys;
  for (const auto& [key, item] : value.items()) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  Json out = Json::object();
  for (const std::string& key : keys) out[key] = deep_sorted_at(value.at(key), depth + 1);
  return out;
}

}  // namespace

Json deep_sorted(const Json& value) { return deep_sorted_at(value, 0); }

}  // namespace k3::chat
