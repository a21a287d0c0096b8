// The SVG writers and the --plots figure set.
#include <gtest/gtest.h>

#include "cost/figures.h"
#include "cost/svg_chart.h"
#include "util.h"

namespace k3::cost {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

void expect_well_formed(const std::string& svg) {
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_TRUE(svg.ends_with("</svg>\n"));
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
  EXPECT_EQ(count(svg, "<text"), count(svg, "</text>"));
}

TEST(CostSvg, LineChart) {
  LineChart c{"a < b & c", "x", "y", true, true, {}, {{10, "mark"}}};
  c.series.push_back({"one", {1, 10, 100}, {1, 100, 1e4}, "#000", false});
  c.series.push_back({"two", {1, 10, 100}, {0, 5, 50}, "#f00", true});  // 0 skipped on a log axis
  std::string svg = svg_line_chart(c);
  expect_well_formed(svg);
  EXPECT_EQ(count(svg, "<polyline"), 2u);
  EXPECT_NE(svg.find("a &lt; b &amp; c"), std::string::npos);
  EXPECT_NE(svg.find(">mark<"), std::string::npos);
  EXPECT_NE(svg.find(">10k<"), std::string::npos);  // log tick labels
}

TEST(CostSvg, BarChart) {
  BarChart c{"bars", "params", {}};
  c.bars.push_back({"a", {{3, "#111", "x"}, {1, "#222", "y"}}, "3 + 1"});
  c.bars.push_back({"b", {{2, "#111", "x"}}, "2"});
  std::string svg = svg_bar_chart(c);
  expect_well_formed(svg);
  EXPECT_EQ(count(svg, "<rect"), 1u + 3u);  // background + 3 segments
  EXPECT_THROW(svg_bar_chart(BarChart{}), Error);
}

TEST(CostSvg, KimiK3Figures) {
  QbSimOptions o;
  o.experts = 16;
  o.top_k = 2;
  o.tokens = 256;
  QbSimResult qb = qb_simulate(o);
  std::vector<Figure> figs = cost_figures(test::kimi_k3(), &qb);
  std::vector<std::string> names;
  for (const Figure& f : figs) {
    names.push_back(f.file);
    expect_well_formed(f.svg);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"capacity.svg", "param_budget.svg", "macs.svg",
                                             "cache_scalars.svg", "situ_gates.svg", "situ_diag.svg",
                                             "qb_maxvio.svg"}));
  EXPECT_NE(figs[0].svg.find("T*=2731"), std::string::npos);
  EXPECT_NE(figs[0].svg.find("T*=5461"), std::string::npos);
  EXPECT_NE(figs[1].svg.find("8 of 448"), std::string::npos);
  EXPECT_NE(figs[2].svg.find("104448"), std::string::npos);
  EXPECT_EQ(cost_figures(test::kimi_k3(), nullptr).size(), 6u);
}

}  // namespace
}  // namespace k3::cost
