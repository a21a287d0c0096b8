#include "cost/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include "k3/error.h"

namespace k3::cost {
namespace {

constexpr double kWidth = 800, kHeight = 440;
constexpr double kLeft = 90, kRight = 230, kTop = 50, kBottom = 60;  // margins; legend on the right
constexpr double kBarRow = 44;                                       // bar chart row height

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// 1500 -> "1.5k", 2e8 -> "200M", 1e13 -> "10T", 0.001 -> "0.001".
std::string tick_label(double v) {
  const char* suffix[] = {"", "k", "M", "G", "T", "P", "E"};
  int i = 0;
  while (std::abs(v) >= 1000 && i < 6) {
    v /= 1000;
    ++i;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g%s", std::round(v * 1e6) / 1e6, suffix[i]);
  return buf;
}

// Maps data values to pixels along one axis, linear or log10.
struct Axis {
  double lo = 0, hi = 1, p0 = 0, p1 = 1;
  bool log = false;
  double map(double v) const {
    double t = log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo))
                   : (v - lo) / (hi - lo);
    return p0 + t * (p1 - p0);
  }
  std::vector<double> ticks() const {
    std::vector<double> out;
    if (log) {
      for (double e = std::floor(std::log10(lo)); e <= std::ceil(std::log10(hi)); ++e) {
        double v = std::pow(10.0, e);
        if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) out.push_back(v);
      }
      return out;
    }
    double raw = (hi - lo) / 6, mag = std::pow(10.0, std::floor(std::log10(raw)));
    double step = raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag;
    if (raw / mag < 1.5) step = mag;
    for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
      out.push_back(std::abs(v) < step * 1e-9 ? 0 : v);
    }
    return out;
  }
};

Axis make_axis(std::vector<double> values, bool log, double p0, double p1, const char* what) {
  if (log) {
    values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return !(v > 0); }),
                 values.end());
  }
  check(!values.empty(), "svg chart: no plottable ", what, " values");
  auto [mn, mx] = std::minmax_element(values.begin(), values.end());
  Axis a{*mn, *mx, p0, p1, log};
  if (log) {
    a.lo = std::pow(10.0, std::floor(std::log10(a.lo)));
    a.hi = std::pow(10.0, std::ceil(std::log10(a.hi)));
    if (a.hi <= a.lo) a.hi = a.lo * 10;
  } else {
    double pad = (a.hi - a.lo) * 0.05;
    if (pad == 0) pad = std::max(std::abs(a.hi) * 0.1, 1.0);
    a.lo -= pad;
    a.hi += pad;
  }
  return a;
}

void header(std::ostringstream& os, const std::string& title, double height = kHeight) {
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << height
     << "\" viewBox=\"0 0 " << kWidth << " " << height << "\" font-family=\"sans-serif\" "
     << "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
     << "<text x=\"" << kWidth / 2 << "\" y=\"28\" text-anchor=\"middle\" font-size=\"15\" "
     << "font-weight=\"bold\">" << svg_escape(title) << "</text>\n";
}

void legend_entry(std::ostringstream& os, int i, const std::string& name, const std::string& color,
                  bool dashed) {
  double x = kWidth - kRight + 12, y = kTop + 10 + 18 * i;
  os << "<line x1=\"" << num(x) << "\" y1=\"" << num(y) << "\" x2=\"" << num(x + 22) << "\" y2=\""
     << num(y) << "\" stroke=\"" << color << "\" stroke-width=\"3\""
     << (dashed ? " stroke-dasharray=\"6 4\"" : "") << "/>\n<text x=\"" << num(x + 28) << "\" y=\""
     << num(y + 4) << "\">" << svg_escape(name) << "</text>\n";
}

void axes(std::ostringstream& os, const Axis& ax, const Axis& ay, const LineChart& c) {
  for (double v : ax.ticks()) {
    double x = ax.map(v);
    os << "<line x1=\"" << num(x) << "\" y1=\"" << num(ay.p1) << "\" x2=\"" << num(x) << "\" y2=\""
       << num(ay.p0) << "\" stroke=\"#e0e0e0\"/>\n<text x=\"" << num(x) << "\" y=\""
       << num(ay.p0 + 16) << "\" text-anchor=\"middle\">" << tick_label(v) << "</text>\n";
  }
  for (double v : ay.ticks()) {
    double y = ay.map(v);
    os << "<line x1=\"" << num(ax.p0) << "\" y1=\"" << num(y) << "\" x2=\"" << num(ax.p1)
       << "\" y2=\"" << num(y) << "\" stroke=\"#e0e0e0\"/>\n<text x=\"" << num(ax.p0 - 6)
       << "\" y=\"" << num(y + 4) << "\" text-anchor=\"end\">" << tick_label(v) << "</text>\n";
  }
  os << "<rect x=\"" << num(ax.p0) << "\" y=\"" << num(ay.p1) << "\" width=\"" << num(ax.p1 - ax.p0)
     << "\" height=\"" << num(ay.p0 - ay.p1) << "\" fill=\"none\" stroke=\"black\"/>\n"
     << "<text x=\"" << num((ax.p0 + ax.p1) / 2) << "\" y=\"" << num(kHeight - 18)
     << "\" text-anchor=\"middle\">" << svg_escape(c.x_label) << "</text>\n"
     << "<text transform=\"translate(22," << num((ay.p0 + ay.p1) / 2)
     << ") rotate(-90)\" text-anchor=\"middle\">" << svg_escape(c.y_label) << "</text>\n";
}

}  // namespace

std::string svg_escape(const std::string& text) {
  std::string out;
  for (char ch : text) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

std::string svg_line_chart(const LineChart& c) {
  std::vector<double> xs, ys;
  for (const Series& s : c.series) {
    check(s.x.size() == s.y.size(), "svg chart: series '", s.name, "' has ", s.x.size(), " x and ",
          s.y.size(), " y values");
    xs.insert(xs.end(), s.x.begin(), s.x.end());
    ys.insert(ys.end(), s.y.begin(), s.y.end());
  }
  Axis ax = make_axis(xs, c.log_x, kLeft, kWidth - kRight, "x");
  Axis ay = make_axis(ys, c.log_y, kHeight - kBottom, kTop, "y");
  std::ostringstream os;
  header(os, c.title);
  axes(os, ax, ay, c);
  for (size_t i = 0; i < c.series.size(); ++i) {
    const Series& s = c.series[i];
    os << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"2\""
       << (s.dashed ? " stroke-dasharray=\"6 4\"" : "") << " points=\"";
    for (size_t j = 0; j < s.x.size(); ++j) {
      if ((c.log_x && !(s.x[j] > 0)) || (c.log_y && !(s.y[j] > 0))) continue;
      os << num(ax.map(s.x[j])) << "," << num(ay.map(s.y[j])) << " ";
    }
    os << "\"/>\n";
    legend_entry(os, static_cast<int>(i), s.name, s.color, s.dashed);
  }
  for (size_t i = 0; i < c.markers.size(); ++i) {
    const Marker& m = c.markers[i];
    if (m.x < ax.lo || m.x > ax.hi) continue;
    double x = ax.map(m.x), y = ay.p1 + 14 + 14 * static_cast<double>(i);
    os << "<line x1=\"" << num(x) << "\" y1=\"" << num(ay.p1) << "\" x2=\"" << num(x) << "\" y2=\""
       << num(ay.p0) << "\" stroke=\"#888\" stroke-dasharray=\"2 3\"/>\n<text x=\"" << num(x + 4)
       << "\" y=\"" << num(y) << "\" font-size=\"11\">" << svg_escape(m.label) << "</text>\n";
  }
  os << "</svg>\n";
  return os.str();
}

std::string svg_bar_chart(const BarChart& c) {
  check(!c.bars.empty(), "svg chart: a bar chart needs bars");
  double top = 0;
  for (const Bar& b : c.bars) {
    double sum = 0;
    for (const Segment& s : b.segments) sum += s.value;
    top = std::max(top, sum);
  }
  const double left = 190, right = kWidth - kRight - 40;
  const double bottom = kTop + kBarRow * static_cast<double>(c.bars.size());
  const double height = bottom + kBottom;
  Axis ax{0, top > 0 ? top * 1.05 : 1, left, right, false};
  std::ostringstream os;
  header(os, c.title, height);
  for (double v : ax.ticks()) {
    os << "<line x1=\"" << num(ax.map(v)) << "\" y1=\"" << kTop << "\" x2=\"" << num(ax.map(v))
       << "\" y2=\"" << num(bottom) << "\" stroke=\"#e0e0e0\"/>\n<text x=\"" << num(ax.map(v))
       << "\" y=\"" << num(bottom + 16) << "\" text-anchor=\"middle\">" << tick_label(v)
       << "</text>\n";
  }
  std::set<std::string> named;
  int legend = 0;
  for (size_t i = 0; i < c.bars.size(); ++i) {
    const Bar& b = c.bars[i];
    double y = kTop + kBarRow * static_cast<double>(i) + kBarRow * 0.15, h = kBarRow * 0.7, x = 0;
    os << "<text x=\"" << num(left - 8) << "\" y=\"" << num(y + h / 2 + 4)
       << "\" text-anchor=\"end\">" << svg_escape(b.label) << "</text>\n";
    for (const Segment& s : b.segments) {
      os << "<rect x=\"" << num(ax.map(x)) << "\" y=\"" << num(y) << "\" width=\""
         << num(ax.map(x + s.value) - ax.map(x)) << "\" height=\"" << num(h) << "\" fill=\""
         << s.color << "\"/>\n";
      x += s.value;
      if (!s.name.empty() && named.insert(s.name).second) {
        legend_entry(os, legend++, s.name, s.color, false);
      }
    }
    os << "<text x=\"" << num(ax.map(x) + 6) << "\" y=\"" << num(y + h / 2 + 4)
       << "\" font-size=\"11\">" << svg_escape(b.note) << "</text>\n";
  }
  os << "<line x1=\"" << left << "\" y1=\"" << kTop << "\" x2=\"" << left << "\" y2=\""
     << num(bottom) << "\" stroke=\"black\"/>\n<text x=\"" << num((left + right) / 2) << "\" y=\""
     << num(height - 18) << "\" text-anchor=\"middle\">" << svg_escape(c.x_label)
     << "</text>\n</svg>\n";
  return os.str();
}

}  // namespace k3::cost
