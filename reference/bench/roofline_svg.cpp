// The roofline plot: bench JSON in, one SVG document out. Drawn by hand like the leaderboard's
// charts (reference/core/svg.hpp holds what they share), so it needs no plotting library and
// renders the same in a browser, an image viewer and a Markdown page.
#include "reference/bench/roofline_svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "reference/core/error.hpp"
#include "reference/core/svg.hpp"

namespace convlab {

namespace {

using nlohmann::json;
using svg::coord;
using svg::escape;

// --- Reading the reports ----------------------------------------------------------------------

// The first report's GPU and ceilings become the chart's; a later report must share its GPU.
void read_machine(const json& m, const std::string& origin, RooflineChart& chart) {
  const std::string gpu = m.at("gpu").get<std::string>();
  if (!chart.nets.empty()) {
    if (gpu != chart.gpu) {
      throw Error(origin + ": measured on " + gpu + ", the first report on " + chart.gpu +
                  ": a roofline is drawn for one GPU, so plot the reports of each GPU apart");
    }
    return;
  }
  const json& peaks = m.at("physical_peak_flops");
  chart.gpu = gpu;
  chart.ceilings = {peaks.at("fp32").get<double>(), peaks.at("tf32").get<double>(),
                    peaks.at("fp16").get<double>(),
                    m.at("memory_bandwidth_bytes_per_s").get<double>()};
  chart.sgemm_peak = m.at("fp32_peak_flops").get<double>();
  if (!(chart.ceilings.bandwidth > 0)) {
    throw Error(origin + ": the report has no measured memory bandwidth to draw the slope with");
  }
}

// A point for a run of `seconds` on a layer of `flops`, when it was timed.
void add_point(RooflineChart& chart, RooflinePoint p, double flops, const json& run) {
  p.seconds = run.at("min_s").get<double>();
  if (!(p.seconds > 0)) return;
  p.flops_per_s = flops / p.seconds;
  p.percent_of_bound = run.value("percent_of_bound", 0.0);
  chart.points.push_back(std::move(p));
}

// The class a report names; an unknown one is an error naming the report.
Precision class_named(const std::string& name, const std::string& origin) {
  try {
    return parse_precision(name);
  } catch (const Error& e) {
    throw Error(origin + ": " + e.what());
  }
}

// Every measured cuDNN row and every correct variant of every layer.
void read_points(const json& report, const std::string& origin, RooflineChart& chart) {
  const std::string net = report.at("net").get<std::string>();
  for (const json& layer : report.at("layers")) {
    const json& roof = layer.at("roofline");
    const double flops = roof.at("flops").get<double>(), ai = roof.at("intensity").get<double>();
    const std::string name = net + " " + layer.at("name").get<std::string>();
    for (const auto& [precision, cu] : layer.at("cudnn").items()) {
      if (cu.contains("not_measured")) continue;
      add_point(chart,
                {.layer = name,
                 .implementation = "cuDNN " + cu.at("algorithm").get<std::string>(),
                 .precision = class_named(precision, origin),
                 .library = true,
                 .intensity = ai},
                flops, cu);
    }
    for (const json& v : layer.at("variants")) {
      if (v.at("status") != "ok") continue;
      add_point(chart,
                {.layer = name,
                 .implementation = v.at("variant").get<std::string>(),
                 .precision = class_named(v.at("precision").get<std::string>(), origin),
                 .intensity = ai},
                flops, v);
    }
  }
}

void read_report(const BenchJson& r, RooflineChart& chart) {
  try {
    const json j = json::parse(r.text);
    if (!j.is_object() || j.value("command", "") != "bench") {
      throw Error(r.origin +
                  ": not a convlab bench report (no \"command\": \"bench\"); write one "
                  "with convlab bench --json FILE");
    }
    read_machine(j.at("machine"), r.origin, chart);
    read_points(j, r.origin, chart);
    chart.nets.push_back(j.at("net").get<std::string>());
  } catch (const json::exception& e) {
    throw Error(r.origin + ": not a bench report this convlab can draw (" + e.what() +
                "); write it again with this convlab's bench --json FILE");
  }
}

// --- Drawing -----------------------------------------------------------------------------------

// Okabe-Ito colours, as on the leaderboard page: one per precision class.
const char* class_colour(Precision precision) {
  switch (precision) {
    case Precision::fp32:
      return "#0072B2";
    case Precision::tf32:
      return "#009E73";
    case Precision::fp16:
      return "#CC79A7";
  }
  return "#0072B2";
}

// Where the plot sits in the picture.
struct Frame {
  double width = 920, height = 600, left = 84, right = 30, top = 70, bottom = 530;
};

// The ceilings a chart draws, each with its class, value and whether it was measured.
struct Ceiling {
  Precision precision;
  double flops_per_s;
  bool measured;
};

std::vector<Ceiling> ceilings_of(const RooflineChart& c) {
  std::vector<Ceiling> out;
  for (Precision p : precision_classes()) {
    const double peak = c.ceilings.peak(p);
    if (peak > 0) out.push_back({p, peak, false});
  }
  if (c.sgemm_peak > 0) out.push_back({Precision::fp32, c.sgemm_peak, true});
  return out;
}

// A log axis from a round value (1, 2 or 5 x 10^k) at or below `lo` to one at or above `hi`.
svg::Axis log_axis(double lo, double hi, double p0, double p1) {
  svg::Axis a;
  a.log = true;
  a.lo = svg::nice_125(lo, true);
  a.hi = std::max(svg::nice_125(hi, false), a.lo * 10);
  a.p0 = p0;
  a.p1 = p1;
  return a;
}

// Intensity: every point, with room on the left for the slope's label, and every ridge (where a
// ceiling meets the memory slope) with room right of it for the ceiling's label, so that no
// label crosses a point or a line.
svg::Axis x_axis(const RooflineChart& c, const Frame& f) {
  double lo = 1e300, hi = 0;
  for (const RooflinePoint& p : c.points) {
    lo = std::min(lo, p.intensity), hi = std::max(hi, 1.25 * p.intensity);
  }
  for (const Ceiling& k : ceilings_of(c))
    hi = std::max(hi, 8 * k.flops_per_s / c.ceilings.bandwidth);
  return log_axis(lo * 0.4, hi, f.left, f.width - f.right);
}

// FLOP/s: every point and every ceiling; upwards.
svg::Axis y_axis(const RooflineChart& c, const Frame& f) {
  double lo = 1e300, hi = 0;
  for (const RooflinePoint& p : c.points) {
    lo = std::min(lo, p.flops_per_s), hi = std::max(hi, p.flops_per_s);
  }
  for (const Ceiling& k : ceilings_of(c)) hi = std::max(hi, k.flops_per_s);
  return log_axis(lo * 0.8, hi * 1.3, f.bottom, f.top);
}

// 2e12 -> "2 T": FLOP/s ticks with an SI prefix.
std::string si_label(double v) {
  const struct {
    double scale;
    const char* prefix;
  } units[] = {{1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}};
  for (const auto& u : units) {
    if (v >= u.scale * (1 - 1e-9)) return svg::tick_label(v / u.scale) + " " + u.prefix;
  }
  return svg::tick_label(v);
}

void line(std::ostringstream& o, const std::string& cls, double x1, double y1, double x2, double y2,
          const std::string& extra = "") {
  o << "<line class=\"" << cls << "\" x1=\"" << coord(x1) << "\" y1=\"" << coord(y1) << "\" x2=\""
    << coord(x2) << "\" y2=\"" << coord(y2) << "\"" << extra << "/>";
}

void text(std::ostringstream& o, const std::string& cls, double x, double y, const char* anchor,
          const std::string& content, const std::string& extra = "") {
  o << "<text class=\"" << cls << "\" x=\"" << coord(x) << "\" y=\"" << coord(y)
    << "\" text-anchor=\"" << anchor << "\"" << extra << ">" << escape(content) << "</text>";
}

void grid(std::ostringstream& o, const svg::Axis& x, const svg::Axis& y) {
  for (double t : x.ticks()) {
    line(o, "grid", x(t), y.p1, x(t), y.p0);
    text(o, "tick", x(t), y.p0 + 18, "middle", svg::tick_label(t));
  }
  for (double t : y.ticks()) {
    line(o, "grid", x.p0, y(t), x.p1, y(t));
    text(o, "tick", x.p0 - 8, y(t) + 4, "end", si_label(t));
  }
  line(o, "axis", x.p0, y.p0, x.p1, y.p0);
  line(o, "axis", x.p0, y.p0, x.p0, y.p1);
}

std::string tflops(double flops_per_s) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1f TFLOP/s", flops_per_s / 1e12);
  return buf;
}

// The memory slope, from the left edge (or the bottom) up to the highest ceiling, labelled
// along its length.
void slope(std::ostringstream& o, const RooflineChart& c, const svg::Axis& x, const svg::Axis& y) {
  const double bw = c.ceilings.bandwidth;
  double top = 0;
  for (const Ceiling& k : ceilings_of(c)) top = std::max(top, k.flops_per_s);
  const double a = std::max(x.lo, y.lo / bw), b = std::min(x.hi, top / bw);
  if (!(a < b)) return;
  line(o, "roof slope", x(a), y(a * bw), x(b), y(b * bw));
  const double at = a * std::pow(b / a, 0.03);
  const double angle =
      std::atan2(y(b * bw) - y(a * bw), x(b) - x(a)) * 180.0 / 3.14159265358979323846;
  char label[64];
  std::snprintf(label, sizeof label, "memory: %.2f TB/s", bw / 1e12);
  o << "<g transform=\"translate(" << coord(x(at)) << ' ' << coord(y(at * bw)) << ") rotate("
    << coord(angle) << ")\">";
  text(o, "roof-label slope-label", 0, -7, "start", label);
  o << "</g>";
}

// Each ceiling from its ridge to the right edge, labelled at the right: physical ceilings above
// their line, the measured SGEMM peak (dashed) below its own.
void ceilings(std::ostringstream& o, const RooflineChart& c, const svg::Axis& x,
              const svg::Axis& y) {
  for (const Ceiling& k : ceilings_of(c)) {
    const double ridge = std::max(x.lo, k.flops_per_s / c.ceilings.bandwidth);
    const std::string colour = class_colour(k.precision);
    line(o, k.measured ? "roof ceiling measured" : "roof ceiling", x(ridge), y(k.flops_per_s), x.p1,
         y(k.flops_per_s), " stroke=\"" + colour + "\"");
    const std::string label = k.measured ? "fp32 SGEMM, measured: " + tflops(k.flops_per_s)
                                         : std::string(precision_name(k.precision)) +
                                               " peak, physical: " + tflops(k.flops_per_s);
    text(o, "roof-label", x.p1 - 4, y(k.flops_per_s) + (k.measured ? 15 : -6), "end", label,
         " fill=\"" + colour + "\"");
  }
}

std::string point_title(const RooflinePoint& p) {
  char figures[160];
  std::snprintf(figures, sizeof figures, ": %.4g ms, %.2f TFLOP/s at %.3g flops per byte",
                p.seconds * 1e3, p.flops_per_s / 1e12, p.intensity);
  const std::string precision(precision_name(p.precision));
  std::string t = p.layer + ", " + p.implementation + " (" + precision + ")" + figures;
  if (p.percent_of_bound > 0) {
    char pct[64];
    std::snprintf(pct, sizeof pct, ", %.1f%% of the %s bound", p.percent_of_bound,
                  precision.c_str());
    t += pct;
  }
  return t;
}

// cuDNN's squares first, the variants' circles over them.
void points(std::ostringstream& o, const RooflineChart& c, const svg::Axis& x, const svg::Axis& y) {
  for (bool library : {true, false}) {
    for (const RooflinePoint& p : c.points) {
      if (p.library != library) continue;
      const double px = x(p.intensity), py = y(p.flops_per_s);
      const std::string colour = class_colour(p.precision);
      o << "<g class=\"point " << (library ? "cudnn" : "ours") << "\"><title>"
        << escape(point_title(p)) << "</title>";
      if (library) {
        o << "<rect x=\"" << coord(px - 5) << "\" y=\"" << coord(py - 5)
          << "\" width=\"10\" height=\"10\" stroke=\"" << colour << "\"/>";
      } else {
        o << "<circle cx=\"" << coord(px) << "\" cy=\"" << coord(py) << "\" r=\"5\" fill=\""
          << colour << "\"/>";
      }
      o << "</g>";
    }
  }
}

// Marker styles and the colours of the classes shown, in a box at the top left (above the
// memory slope, where a roofline has no points).
void legend(std::ostringstream& o, const RooflineChart& c, const Frame& f) {
  std::vector<Precision> classes;
  for (const Ceiling& k : ceilings_of(c)) {
    if (std::find(classes.begin(), classes.end(), k.precision) == classes.end()) {
      classes.push_back(k.precision);
    }
  }
  const double x0 = f.left + 14, y0 = f.top + 12, row = 19;
  const double h = row * static_cast<double>(2 + classes.size()) + 10;
  o << "<g class=\"legend\"><rect class=\"legend-box\" x=\"" << coord(x0) << "\" y=\"" << coord(y0)
    << "\" width=\"196\" height=\"" << coord(h) << "\"/>";
  double y = y0 + row;
  o << "<circle cx=\"" << coord(x0 + 16) << "\" cy=\"" << coord(y - 4) << "\" r=\"5\" fill=\""
    << class_colour(Precision::fp32) << "\"/>";
  text(o, "legend-text", x0 + 30, y, "start", "variant (ours)");
  y += row;
  o << "<rect x=\"" << coord(x0 + 11) << "\" y=\"" << coord(y - 9)
    << "\" width=\"10\" height=\"10\" class=\"cudnn-mark\" stroke=\""
    << class_colour(Precision::fp32) << "\"/>";
  text(o, "legend-text", x0 + 30, y, "start", "cuDNN, same class");
  for (Precision k : classes) {
    y += row;
    o << "<rect x=\"" << coord(x0 + 8) << "\" y=\"" << coord(y - 6) << "\" width=\"16\" "
      << "height=\"4\" fill=\"" << class_colour(k) << "\"/>";
    text(o, "legend-text", x0 + 30, y, "start",
         std::string(precision_name(k)) + " class: ceiling and points");
  }
  o << "</g>";
}

std::string joined(const std::vector<std::string>& parts) {
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : ", ") + p;
  return s;
}

constexpr const char* kStyle =
    "text{font-family:system-ui,-apple-system,\"Segoe UI\",Roboto,\"Helvetica Neue\",Arial,"
    "\"Noto Sans\",sans-serif}"
    ".bg{fill:#fff}.grid{stroke:#e6eaef;stroke-width:1}.axis{stroke:#59636e;stroke-width:1.2}"
    ".tick{fill:#59636e;font-size:12px}.title{fill:#1f2328;font-size:17px;font-weight:700}"
    ".sub{fill:#59636e;font-size:12.5px}.axis-title{fill:#1f2328;font-size:13px;font-weight:600}"
    ".roof{stroke-width:2.5;fill:none}.slope{stroke:#1f2328}.measured{stroke-dasharray:7 5;"
    "stroke-width:1.8}.roof-label{font-size:12.5px;font-weight:600;paint-order:stroke;"
    "stroke:#fff;stroke-width:3px;stroke-linejoin:round}.slope-label{fill:#1f2328}"
    ".point circle{stroke:#fff;stroke-width:1.2}.point rect,.cudnn-mark{fill:none;"
    "stroke-width:2}.legend-box{fill:#fff;stroke:#d1d9e0}.legend-text{fill:#1f2328;"
    "font-size:12.5px}";

}  // namespace

RooflineChart roofline_chart(const std::vector<BenchJson>& reports) {
  RooflineChart chart;
  for (const BenchJson& r : reports) read_report(r, chart);
  if (chart.points.empty()) {
    throw Error("nothing to plot: no layer of " + joined(chart.nets) +
                " has a correct timed run (of a variant or of cuDNN)");
  }
  return chart;
}

std::string roofline_svg(const RooflineChart& c) {
  const Frame f;
  const svg::Axis x = x_axis(c, f), y = y_axis(c, f);
  const std::string title = "Roofline of the " + c.gpu + ": " + joined(c.nets);
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " << coord(f.width) << ' '
    << coord(f.height) << "\" width=\"" << coord(f.width) << "\" height=\"" << coord(f.height)
    << "\" role=\"img\" aria-labelledby=\"roofline-title roofline-desc\">"
    << "<title id=\"roofline-title\">" << escape(title) << "</title><desc id=\"roofline-desc\">"
    << "Log-log roofline: each conv layer's arithmetic intensity (flops per byte of compulsory "
    << "traffic) against the FLOP/s an implementation reached on it; circles are the variants, "
    << "squares cuDNN of the same precision class. Lines: the memory slope at the measured copy "
    << "bandwidth, the physical peak of each precision class, and the measured SGEMM peak "
    << "(dashed).</desc><style>" << kStyle << "</style>";
  o << "<rect class=\"bg\" width=\"100%\" height=\"100%\"/>";
  text(o, "title", f.left, 28, "start", title);
  text(o, "sub", f.left, 48, "start",
       "x and k read once, y written once; slope: measured copy bandwidth; solid ceilings: "
       "physical peaks. Hover a point for its figures.");
  grid(o, x, y);
  slope(o, c, x, y);
  ceilings(o, c, x, y);
  points(o, c, x, y);
  legend(o, c, f);
  text(o, "axis-title", (x.p0 + x.p1) / 2, f.height - 22, "middle",
       "Arithmetic intensity: flops per byte of compulsory traffic (log scale)");
  o << "<g transform=\"translate(22 " << coord((y.p0 + y.p1) / 2) << ") rotate(-90)\">";
  text(o, "axis-title", 0, 0, "middle", "FLOP/s (log scale)");
  o << "</g></svg>\n";
  return o.str();
}

}  // namespace convlab
