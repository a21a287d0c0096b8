// Number formatting and plain-text tables for `k3 cost` (declared in cost_report.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cost_report.h"

namespace k3::cli::cost_report {
namespace {

std::string grouped(long long v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

}  // namespace

// Exact integers with thousands separators; anything else with 4 significant digits.
std::string num(double v) {
  if (std::abs(v) < 9e15 && v == std::floor(v)) return grouped(static_cast<long long>(v));
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string fixed(double v, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Decimal units (kB = 1e3 B), as vendors quote memory sizes and bandwidths.
std::string human(double v, const char* unit) {
  const char* prefix[] = {"", "k", "M", "G", "T", "P", "E"};
  int i = 0;
  while (std::abs(v) >= 1000 && i < 6) {
    v /= 1000;
    ++i;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, i == 0 ? "%.4g %s%s" : "%.3f %s%s", v, prefix[i], unit);
  return buf;
}

std::string bytes(double v) { return num(v) + " B (" + human(v, "B") + ")"; }

// Parameter counts: 105.4B, 2.78T, 51.4M.
std::string count(double v) {
  const char* suffix[] = {"", "k", "M", "B", "T"};
  int i = 0;
  while (std::abs(v) >= 1000 && i < 4) {
    v /= 1000;
    ++i;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, i == 0 ? "%.0f%s" : "%.4g%s", v, suffix[i]);
  return buf;
}

std::string seconds(double v) {
  const char* unit[] = {"s", "ms", "us", "ns", "ps"};
  int i = 0;
  while (v != 0 && std::abs(v) < 1 && i < 4) {
    v *= 1000;
    ++i;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.4g %s", v, unit[i]);
  return buf;
}

void print_table(const Table& t) {
  std::vector<size_t> w(t.head.size(), 0);
  for (size_t c = 0; c < t.head.size(); ++c) w[c] = t.head[c].size();
  for (const auto& r : t.rows) {
    for (size_t c = 0; c < r.size() && c < w.size(); ++c) w[c] = std::max(w[c], r[c].size());
  }
  std::printf("\n%s\n", t.title.c_str());
  auto line = [&](const std::vector<std::string>& r) {
    std::string s = " ";
    for (size_t c = 0; c < w.size(); ++c) {
      std::string cell = c < r.size() ? r[c] : "";
      std::string pad(w[c] - cell.size(), ' ');
      s += " " + (c == 0 ? cell + pad : pad + cell) + " ";
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    std::printf("%s\n", s.c_str());
  };
  line(t.head);
  size_t total = 1;
  for (size_t x : w) total += x + 2;
  std::printf("  %s\n", std::string(total - 2, '-').c_str());
  for (const auto& r : t.rows) line(r);
}

void note(const std::string& text) { std::printf("  %s\n", text.c_str()); }

}  // namespace k3::cli::cost_report
