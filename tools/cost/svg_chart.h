// Minimal SVG charts for `k3 cost --plots`: line charts (linear or log axes) and horizontal bar
// charts (bars start at zero, optional stacked segments). Pure functions returning the SVG text;
// no plotting dependency. Coordinates are in SVG user units (px) on a fixed 720 x 440 canvas.
#pragma once

#include <string>
#include <vector>

namespace k3::cost {

struct Series {
  std::string name;
  std::vector<double> x, y;
  std::string color = "#1f77b4";
  bool dashed = false;
};

struct Marker {  // a vertical guide line with a label, e.g. a crossover length
  double x = 0;
  std::string label;
};

struct LineChart {
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;
  std::vector<Series> series;
  std::vector<Marker> markers;
};

struct Segment {
  double value = 0;
  std::string color = "#1f77b4";
  std::string name;  // shown in the legend when non-empty
};

struct Bar {
  std::string label;
  std::vector<Segment> segments;  // stacked left to right
  std::string note;               // printed after the bar, e.g. the exact value
};

struct BarChart {
  std::string title, x_label;
  std::vector<Bar> bars;
};

std::string svg_line_chart(const LineChart& chart);
std::string svg_bar_chart(const BarChart& chart);
std::string svg_escape(const std::string& text);

}  // namespace k3::cost
