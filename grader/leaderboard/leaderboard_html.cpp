// The leaderboard as one self-contained HTML page: inline CSS, inline SVG drawn here, no
// script and no external asset (a Content-Security-Policy forbids both), so it opens from a
// file, an e-mail attachment or a course page alike, and prints.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "grader/leaderboard/board_format.hpp"
#include "grader/leaderboard/leaderboard.hpp"
#include "reference/core/svg.hpp"

namespace convlab::grader {

namespace {

using board::fixed;
using svg::Axis;
using svg::nice_125;
using svg::tick_label;

// Okabe-Ito: distinguishable with the common colour-vision deficiencies, and in grey print.
// The ranked variant takes the strongest blue; the others take the rest in order.
constexpr const char* kRankedColour = "#0072B2";
constexpr const char* kPalette[] = {"#E69F00", "#009E73", "#CC79A7", "#56B4E9",
                                    "#D55E00", "#7F7F7F", "#000000"};

std::vector<std::string> variant_colours(const std::vector<std::string>& variants,
                                         const std::string& ranked) {
  std::vector<std::string> out;
  std::size_t next = 0;
  for (const std::string& v : variants) {
    out.emplace_back(v == ranked ? kRankedColour : kPalette[next++ % std::size(kPalette)]);
  }
  return out;
}

// Short names: the page writes many of both.
std::string esc(const std::string& s) {
  return svg::escape(s);
}
std::string px(double v) {
  return svg::coord(v);
}

// "−1.23" with a real minus sign, "+0.45" with a plus.
std::string signed_html(double v, int decimals) {
  const std::string s = fixed(std::fabs(v), decimals);
  if (s == fixed(0.0, decimals)) return s;
  return (v < 0 ? "\u2212" : "+") + s;
}

// Log when the values span more than ~30x: one slow team must not squash the others.
bool wants_log(double min_v, double max_v) {
  return min_v > 0.0 && max_v / min_v > 30.0;
}

void axis_ticks(std::ostringstream& o, const Axis& ax, double y_top, double y_axis, bool labels,
                double label_y) {
  for (double t : ax.ticks()) {
    const double x = ax(t);
    o << "<line class=\"grid\" x1=\"" << px(x) << "\" x2=\"" << px(x) << "\" y1=\"" << px(y_top)
      << "\" y2=\"" << px(y_axis) << "\"/>";
    if (labels) {
      o << "<text class=\"tick\" x=\"" << px(x) << "\" y=\"" << px(label_y)
        << "\" text-anchor=\"middle\">" << tick_label(t) << "</text>";
    }
  }
}

// -- The distribution of team times: a dot per team on a ms axis, the median and bands. ---

// The ms axis: every team, the +-2 sigma bands and the threshold rule's lines fit on it.
Axis distribution_axis(const Leaderboard& b, double x0, double x1) {
  const double med = b.median_s * 1e3, sd = b.stddev_s * 1e3;
  double lo = 1e300, hi = 0;
  for (const LeaderboardRow& row : b.rows) {
    lo = std::min(lo, row.best.op_time_s * 1e3);
    hi = std::max(hi, row.best.op_time_s * 1e3);
  }
  hi = std::max(hi, med + 2 * sd);
  if (med - 2 * sd > 0) lo = std::min(lo, med - 2 * sd);
  if (b.rule.rule == "threshold") {
    lo = std::min(lo, std::max(b.rule.full_ms, 1e-3));
    hi = std::max(hi, b.rule.zero_ms);
  }
  Axis ax;
  ax.p0 = x0;
  ax.p1 = x1;
  ax.log = wants_log(lo, hi);
  if (ax.log) {
    ax.lo = nice_125(lo * 0.9, true);
    ax.hi = nice_125(hi * 1.1, false);
  } else {
    const double pad = std::max((hi - lo) * 0.06, hi * 0.02 + 1e-6);
    // Start at zero when that costs little room: times read more honestly from a zero.
    ax.lo = lo - pad < 0.25 * hi ? 0.0 : lo - pad;
    ax.hi = hi + pad;
  }
  return ax;
}

// Beeswarm: each dot takes the lane nearest the centre line where it does not overlap (dots
// `gap` apart); the lane of each row, in row order.
std::vector<int> beeswarm_lanes(const Leaderboard& b, const Axis& ax, double gap) {
  std::map<int, double> lane_end;
  std::vector<int> lane_of;
  for (const LeaderboardRow& row : b.rows) {
    const double x = ax(row.best.op_time_s * 1e3);
    int chosen = 0;
    bool placed = false;
    for (int k = 0; k <= 24 && !placed; ++k) {
      for (int lane : {k, -k}) {
        auto it = lane_end.find(lane);
        if (it == lane_end.end() || x - it->second >= gap) {
          chosen = lane;
          placed = true;
          break;
        }
        if (k == 0) break;
      }
    }
    lane_end[chosen] = x;
    lane_of.push_back(chosen);
  }
  return lane_of;
}

// The plot's vertical extent, shared by its parts.
struct DistributionFrame {
  double top, plot_h, y_axis;
};

// Band edges and their labels above the plot (the median first so it always shows), with the
// points each edge earns under the standard-deviation rule.
void distribution_marks(std::ostringstream& o, const Leaderboard& b, const Axis& ax,
                        const DistributionFrame& f) {
  const double med = b.median_s * 1e3, sd = b.stddev_s * 1e3;
  struct Mark {
    int k;
    double x;
  };
  std::vector<Mark> marks{{0, ax(med)}};
  if (sd > 0) {
    for (int k : {-1, 1, -2, 2}) {
      const double v = med + k * sd;
      if (v >= ax.lo && v <= ax.hi) marks.push_back({k, ax(v)});
    }
  }
  std::vector<double> used;
  for (const Mark& m : marks) {
    if (m.k != 0) {
      o << "<line class=\"edge\" x1=\"" << px(m.x) << "\" x2=\"" << px(m.x) << "\" y1=\""
        << px(f.top) << "\" y2=\"" << px(f.y_axis) << "\"/>";
    }
    if (std::any_of(used.begin(), used.end(), [&](double u) { return std::fabs(u - m.x) < 64; })) {
      continue;
    }
    used.push_back(m.x);
    const std::string name =
        m.k == 0 ? "median " + fixed(med, 3) + " ms"
                 : (m.k < 0 ? "\u2212" : "+") + std::to_string(std::abs(m.k)) + "\u03c3";
    o << "<text class=\"mark" << (m.k == 0 ? " med" : "") << "\" x=\"" << px(m.x) << "\" y=\""
      << px(f.top - 26) << "\" text-anchor=\"middle\">" << name << "</text>";
    if (b.rule.rule != "threshold") {
      const double pts = ranking_points(b.rule, m.k, 0.0);
      o << "<text class=\"pts\" x=\"" << px(m.x) << "\" y=\"" << px(f.top - 10)
        << "\" text-anchor=\"middle\">" << fixed(pts, 2) << " pts</text>";
    }
  }
}

// The threshold rule's full-credit and no-credit lines.
void threshold_lines(std::ostringstream& o, const Leaderboard& b, const Axis& ax,
                     const DistributionFrame& f) {
  const struct {
    double v;
    const char* cls;
    std::string text;
    const char* anchor;
  } lines[] = {
      {b.rule.full_ms, "full", "full credit \u2264 " + tick_label(b.rule.full_ms) + " ms", "start"},
      {b.rule.zero_ms, "zero", "no credit \u2265 " + tick_label(b.rule.zero_ms) + " ms", "end"}};
  for (const auto& l : lines) {
    if (l.v < ax.lo || l.v > ax.hi) continue;
    const double x = ax(l.v);
    o << "<line class=\"thr " << l.cls << "\" x1=\"" << px(x) << "\" x2=\"" << px(x) << "\" y1=\""
      << px(f.top) << "\" y2=\"" << px(f.y_axis) << "\"/><text class=\"thr-label " << l.cls
      << "\" x=\"" << px(x + (l.anchor[0] == 's' ? 6 : -6)) << "\" y=\"" << px(f.top + 14)
      << "\" text-anchor=\"" << l.anchor << "\">" << esc(l.text) << "</text>";
  }
}

// One dot per team, numbered by rank; slowest drawn first so the fastest teams' dots sit on
// top where they touch.
void team_dots(std::ostringstream& o, const Leaderboard& b, const Axis& ax,
               const std::vector<int>& lane_of, double mid, double gap, double r) {
  for (std::size_t i = b.rows.size(); i-- > 0;) {
    const LeaderboardRow& row = b.rows[i];
    const double x = ax(row.best.op_time_s * 1e3), y = mid + lane_of[i] * gap;
    o << "<g class=\"dot" << (row.best.flagged ? " flagged" : "") << "\"><title>#" << row.rank
      << ' ' << esc(row.team) << ": " << board::ms(row.best.op_time_s) << " ms, "
      << signed_html(row.stddevs_from_median, 2) << "\u03c3, " << fixed(row.points, 2) << " points"
      << (row.best.flagged ? " (flagged)" : "") << "</title><circle cx=\"" << px(x) << "\" cy=\""
      << px(y) << "\" r=\"" << px(r) << "\"/><text x=\"" << px(x) << "\" y=\"" << px(y + 3.6)
      << "\" text-anchor=\"middle\">" << row.rank << "</text></g>";
  }
}

std::string distribution_svg(const Leaderboard& b) {
  const double W = 1100, left = 36, right = 36, top = 64, r = 10, gap = 2 * r + 2;
  const double med = b.median_s * 1e3, sd = b.stddev_s * 1e3;
  const Axis ax = distribution_axis(b, left, W - right);
  const std::vector<int> lane_of = beeswarm_lanes(b, ax, gap);
  int max_lane = 0;
  for (int lane : lane_of) max_lane = std::max(max_lane, std::abs(lane));
  const double plot_h = std::max(120.0, (2 * max_lane + 1) * gap + 36);
  const DistributionFrame f{top, plot_h, top + plot_h};
  const double mid = top + plot_h / 2, H = f.y_axis + 58;

  std::ostringstream o;
  o << "<svg viewBox=\"0 0 " << px(W) << ' ' << px(H)
    << "\" role=\"img\" aria-labelledby=\"dist-title dist-desc\" class=\"chart\">"
    << "<title id=\"dist-title\">Distribution of team times</title><desc id=\"dist-desc\">"
    << "One dot per team at its best correct Op Time in milliseconds, numbered by rank; "
    << "the median line and bands one and two standard deviations around it.</desc>";
  // Bands: +-2 sigma lightest, +-1 sigma darker, then the median line.
  if (sd > 0) {
    for (int k : {2, 1}) {
      const double a = ax(std::max(med - k * sd, ax.lo)), z = ax(med + k * sd);
      o << "<rect class=\"band" << k << "\" x=\"" << px(a) << "\" y=\"" << px(top) << "\" width=\""
        << px(std::max(0.0, z - a)) << "\" height=\"" << px(plot_h) << "\"/>";
    }
  }
  axis_ticks(o, ax, top, f.y_axis, true, f.y_axis + 20);
  distribution_marks(o, b, ax, f);
  if (b.rule.rule == "threshold") threshold_lines(o, b, ax, f);
  o << "<line class=\"med-line\" x1=\"" << px(ax(med)) << "\" x2=\"" << px(ax(med)) << "\" y1=\""
    << px(top - 4) << "\" y2=\"" << px(f.y_axis) << "\"/>";
  o << "<line class=\"axis\" x1=\"" << px(ax.p0) << "\" x2=\"" << px(ax.p1) << "\" y1=\""
    << px(f.y_axis) << "\" y2=\"" << px(f.y_axis) << "\"/>";
  team_dots(o, b, ax, lane_of, mid, gap, r);
  o << "<text class=\"axis-title\" x=\"" << px((ax.p0 + ax.p1) / 2) << "\" y=\"" << px(H - 8)
    << "\" text-anchor=\"middle\">Best correct Op Time per team (ms"
    << (ax.log ? ", log scale" : "") << "); left is faster</text></svg>";
  return o.str();
}

// -- Each team's variants: grouped horizontal bars, and cuDNN's time in the same run. --------
std::string variants_svg(const Leaderboard& b, const std::vector<std::string>& variants,
                         const std::vector<std::string>& colours) {
  // A big class gets thinner bars so the chart stays a few screens long.
  const bool big = b.rows.size() > 20;
  const char* sm = big ? " sm" : "";
  const double W = 1100, label_w = 250, right = 70, top = 34, bar_h = big ? 9 : 14,
               bar_gap = big ? 2 : 3, group_pad = big ? 10 : 14;
  const double n_var = static_cast<double>(std::max<std::size_t>(variants.size(), 1));
  const double group_h = n_var * bar_h + (n_var - 1) * bar_gap + group_pad;
  const double plot_h = group_h * static_cast<double>(b.rows.size());
  const double y_axis = top + plot_h, H = y_axis + 56;

  double lo = 1e300, hi = 0;
  for (const LeaderboardRow& row : b.rows) {
    for (const auto& [name, t] : row.best.variants)
      lo = std::min(lo, t * 1e3), hi = std::max(hi, t * 1e3);
    lo = std::min(lo, row.best.op_time_s * 1e3), hi = std::max(hi, row.best.op_time_s * 1e3);
    if (row.best.reference_time_s) {
      lo = std::min(lo, *row.best.reference_time_s * 1e3);
      hi = std::max(hi, *row.best.reference_time_s * 1e3);
    }
  }
  Axis ax;
  ax.p0 = label_w;
  ax.p1 = W - right;
  ax.log = wants_log(lo, hi);
  if (ax.log) {
    ax.lo = nice_125(lo * 0.9, true);
    ax.hi = nice_125(hi * 1.1, false);
  } else {
    // Bars start at zero: their length is the time.
    ax.lo = 0.0;
    const double step = Axis::nice_step(hi * 1.08 / 6.0);
    ax.hi = std::ceil(hi * 1.08 / step) * step;
  }

  std::ostringstream o;
  o << "<svg viewBox=\"0 0 " << px(W) << ' ' << px(H)
    << "\" role=\"img\" aria-labelledby=\"var-title var-desc\" class=\"chart\">"
    << "<title id=\"var-title\">Op Time of every variant, per team</title><desc id=\"var-desc\">"
    << "For each team in rank order, one bar per optimisation variant: its best correct Op Time "
    << "in milliseconds in the team's ranked run; a dark tick marks cuDNN timed in the same "
    << "run.</desc>";
  axis_ticks(o, ax, top, y_axis, true, y_axis + 20);
  for (double t : ax.ticks()) {
    o << "<text class=\"tick\" x=\"" << px(ax(t)) << "\" y=\"" << px(top - 10)
      << "\" text-anchor=\"middle\">" << tick_label(t) << "</text>";
  }
  for (std::size_t i = 0; i < b.rows.size(); ++i) {
    const LeaderboardRow& row = b.rows[i];
    const double g0 = top + group_h * static_cast<double>(i);
    const double b0 = g0 + group_pad / 2;
    if (i % 2 == 1) {
      o << "<rect class=\"stripe\" x=\"0\" y=\"" << px(g0) << "\" width=\"" << px(W)
        << "\" height=\"" << px(group_h) << "\"/>";
    }
    o << "<g class=\"team\"><title>#" << row.rank << ' ' << esc(row.team) << "</title>"
      << "<text class=\"team-label\" x=\"" << px(label_w - 14) << "\" y=\""
      << px(g0 + group_h / 2 + 4.5) << "\" text-anchor=\"end\"><tspan class=\"rank\">" << row.rank
      << "</tspan>\u2002" << esc(board::truncate(row.team, 26, true)) << "</text></g>";
    // Bars, then the cuDNN tick over them, then the texts over both so none is crossed out.
    std::ostringstream texts;
    for (std::size_t v = 0; v < variants.size(); ++v) {
      const double y = b0 + static_cast<double>(v) * (bar_h + bar_gap);
      const double text_y = y + bar_h / 2 + (big ? 3.0 : 3.8);  // baseline: centred on the bar
      const auto it = std::find_if(row.best.variants.begin(), row.best.variants.end(),
                                   [&](const auto& p) { return p.first == variants[v]; });
      if (it == row.best.variants.end()) {
        texts << "<text class=\"none" << sm << "\" x=\"" << px(ax.p0 + 6) << "\" y=\"" << px(text_y)
              << "\">" << esc(variants[v]) << ": no correct time</text>";
        continue;
      }
      const double ms = it->second * 1e3, x = ax(ms);
      o << "<rect x=\"" << px(ax.p0) << "\" y=\"" << px(y) << "\" width=\""
        << px(std::max(1.0, x - ax.p0)) << "\" height=\"" << px(bar_h) << "\" fill=\"" << colours[v]
        << "\"><title>" << esc(row.team) << ", " << esc(variants[v]) << ": " << fixed(ms, 3)
        << " ms</title></rect>";
      texts << "<text class=\"val" << sm << "\" x=\"" << px(x + 5) << "\" y=\"" << px(text_y)
            << "\">" << fixed(ms, 3) << "</text>";
    }
    if (row.best.reference_time_s) {
      const double x = ax(*row.best.reference_time_s * 1e3);
      o << "<g class=\"ref\"><title>cuDNN in the same run: " << board::ms(row.best.reference_time_s)
        << " ms</title><line x1=\"" << px(x) << "\" x2=\"" << px(x) << "\" y1=\"" << px(b0 - 3)
        << "\" y2=\"" << px(g0 + group_h - group_pad / 2 + 3) << "\"/></g>";
    }
    o << texts.str();
  }
  o << "<line class=\"axis\" x1=\"" << px(ax.p0) << "\" x2=\"" << px(ax.p0) << "\" y1=\"" << px(top)
    << "\" y2=\"" << px(y_axis) << "\"/><line class=\"axis\" x1=\"" << px(ax.p0) << "\" x2=\""
    << px(ax.p1) << "\" y1=\"" << px(y_axis) << "\" y2=\"" << px(y_axis) << "\"/>";
  o << "<text class=\"axis-title\" x=\"" << px((ax.p0 + ax.p1) / 2) << "\" y=\"" << px(H - 8)
    << "\" text-anchor=\"middle\">Op Time (ms" << (ax.log ? ", log scale" : "")
    << "); shorter is faster</text></svg>";
  return o.str();
}

constexpr const char* kCss = R"css(
:root{--ink:#1f2328;--muted:#59636e;--line:#d1d9e0;--soft:#f6f8fa;--accent:#0072B2;--flag:#D55E00}
*{box-sizing:border-box}
html{-webkit-print-color-adjust:exact;print-color-adjust:exact}
body{margin:0;background:#eef1f4;color:var(--ink);font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,"Noto Sans",sans-serif}
main{max-width:1200px;margin:0 auto;padding:28px 24px 40px}
header{margin-bottom:18px}
.eyebrow{font-size:12px;font-weight:600;letter-spacing:.08em;text-transform:uppercase;color:var(--accent);margin:0}
h1{font-size:30px;line-height:1.2;margin:2px 0 6px;font-weight:700}
.sub{color:var(--muted);margin:0}
.badge{display:inline-block;font-size:12px;font-weight:600;padding:1px 8px;border-radius:999px;border:1px solid var(--line);background:#fff;color:var(--muted);vertical-align:middle;margin-left:8px}
.cards{display:grid;grid-template-columns:repeat(5,minmax(0,1fr));gap:12px;margin:18px 0}
.card{background:#fff;border:1px solid var(--line);border-radius:10px;padding:12px 16px}
.card .k{font-size:13px;color:var(--muted);font-weight:600}
.card .v{font-size:24px;font-weight:650;font-variant-numeric:tabular-nums;line-height:1.3}
.card .u{font-size:14px;font-weight:500;color:var(--muted)}
.card .d{font-size:12px;color:var(--muted)}
section{background:#fff;border:1px solid var(--line);border-radius:10px;padding:18px 22px 20px;margin:14px 0}
h2{font-size:19px;margin:0 0 2px}
.note{color:var(--muted);font-size:13px;margin:0 0 12px}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
caption{text-align:left;color:var(--muted);font-size:13px;padding:0 0 10px}
th,td{padding:7px 10px;text-align:right;white-space:nowrap;border-bottom:1px solid var(--line)}
thead th{font-size:12px;font-weight:600;color:var(--muted);letter-spacing:.02em;border-bottom:2px solid var(--ink);vertical-align:bottom}
th.l,td.l{text-align:left}
td.team{white-space:normal;overflow-wrap:anywhere;font-weight:600;min-width:12em}
td.rank{font-weight:700;width:3.5em}
tbody tr:nth-child(even){background:var(--soft)}
tbody tr.top td.rank{color:var(--accent)}
tr.flagged td:first-child{box-shadow:inset 4px 0 0 var(--flag)}
.neg{color:#006B3C}.pos{color:#9A3412}
.pts{display:inline-flex;align-items:center;gap:8px}
.meter{display:inline-block;width:72px;height:8px;border-radius:4px;background:#e3e8ee;overflow:hidden}
.meter>span{display:block;height:100%;background:var(--accent)}
.flag{color:var(--flag);font-weight:700}
.sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
.legend{list-style:none;display:flex;flex-wrap:wrap;gap:6px 18px;margin:0 0 10px;padding:0;font-size:13px;color:var(--ink)}
.legend li{display:inline-flex;align-items:center;gap:6px}
.sw{display:inline-block;width:14px;height:14px;border-radius:3px}
.sw.b1{background:#cfe3f3}.sw.b2{background:#e9f2fa;border:1px solid #cfe3f3}
.sw.med{width:3px;height:16px;border-radius:0;background:var(--ink)}
.sw.dot{border-radius:50%;background:var(--accent)}.sw.dot.f{background:var(--flag)}
.sw.tick{width:3px;height:16px;border-radius:0;background:#1f2328}
svg.chart{display:block;width:100%;height:auto;font-family:inherit}
svg .band2{fill:#e9f2fa}svg .band1{fill:#cfe3f3}
svg .grid{stroke:#e6eaef;stroke-width:1}
svg .edge{stroke:#9dbbd6;stroke-width:1;stroke-dasharray:3 3}
svg .axis{stroke:#59636e;stroke-width:1.2}
svg .med-line{stroke:#1f2328;stroke-width:2}
svg .tick{fill:#59636e;font-size:12px}
svg .mark{fill:#1f2328;font-size:12.5px;font-weight:600}
svg .pts{fill:#59636e;font-size:11.5px}
svg .axis-title{fill:#1f2328;font-size:13px;font-weight:600}
svg .dot circle{fill:#0072B2;stroke:#fff;stroke-width:1.5}
svg .dot.flagged circle{fill:#D55E00}
svg .dot text{fill:#fff;font-size:10.5px;font-weight:700}
svg .thr{stroke-width:2;stroke-dasharray:6 4}
svg .thr.full{stroke:#009E73}svg .thr.zero{stroke:#D55E00}
svg .thr-label{font-size:12px;font-weight:600}
svg .thr-label.full{fill:#00704f}svg .thr-label.zero{fill:#a34700}
svg .stripe{fill:#f6f8fa}
svg .team-label{fill:#1f2328;font-size:13px;font-weight:600}
svg .team-label .rank{fill:#59636e;font-weight:700}
svg .val{fill:#3d444d;font-size:11px;paint-order:stroke;stroke:#fff;stroke-width:3px;stroke-linejoin:round}
svg .none{fill:#6e7781;font-size:11px;font-style:italic}
svg .val.sm,svg .none.sm{font-size:8.5px}
svg .ref line{stroke:#1f2328;stroke-width:2.5}
footer{color:var(--muted);font-size:12.5px;margin-top:18px}
footer p{margin:4px 0}
.empty{font-size:16px;color:var(--muted);padding:24px 0}
@media (max-width:820px){.cards{grid-template-columns:repeat(2,minmax(0,1fr))}}
@media print{
 body{background:#fff;font-size:11pt}
 main{max-width:none;padding:0}
 section,.card{border-color:#b9c2cc;break-inside:avoid}
 section.table{break-inside:auto}
 tr{break-inside:avoid}
 thead{display:table-header-group}
 @page{margin:14mm}
}
)css";

}  // namespace

const char* leaderboard_css() {
  return kCss;
}

// The page's head and header: title, team count, GPU and the latest run.
void page_header(std::ostringstream& o, const Leaderboard& b, int refresh_s) {
  const std::string title = "convlab leaderboard \u2014 milestone " + b.milestone;
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    // Defence in depth: even if a name slipped through unescaped, nothing runs or loads.
    << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
       "style-src 'unsafe-inline'\">\n";
  if (refresh_s > 0) o << "<meta http-equiv=\"refresh\" content=\"" << refresh_s << "\">\n";
  o << "<title>" << esc(title) << "</title>\n<style>" << kCss << "</style>\n</head>\n<body>\n"
    << "<main>\n<header>\n<p class=\"eyebrow\">convlab \u00b7 team ranking</p>\n<h1>Leaderboard: "
    << "milestone " << esc(b.milestone);
  if (b.anonymized) o << "<span class=\"badge\">anonymised</span>";
  o << "</h1>\n";

  if (b.rows.empty()) return;

  std::string latest;
  for (const LeaderboardRow& r : b.rows) latest = std::max(latest, r.best.graded_at);
  const std::string gpu = board::common_gpu(b);
  o << "<p class=\"sub\">" << b.rows.size() << (b.rows.size() == 1 ? " team" : " teams")
    << " ranked by the " << esc(board::ranked_what(b));
  if (!gpu.empty()) o << " on " << esc(gpu);
  if (!latest.empty()) o << " \u00b7 latest graded run " << esc(latest);
  o << "</p>\n</header>\n";
}

// The library the milestone is timed beside: the CPU library convolution or cuDNN.
std::string library_name(const Leaderboard& b) {
  return b.rule.cpu ? "CPU library conv" : "cuDNN";
}

// Summary cards: teams, fastest, median, spread, the library's median time.
void summary_cards(std::ostringstream& o, const Leaderboard& b) {
  std::vector<double> refs;
  for (const LeaderboardRow& r : b.rows) {
    if (r.best.reference_time_s) refs.push_back(*r.best.reference_time_s);
  }
  std::sort(refs.begin(), refs.end());
  const LeaderboardRow& fastest = b.rows.front();
  auto card = [&](const std::string& k, const std::string& v, const std::string& unit,
                  const std::string& d) {
    o << "<div class=\"card\"><div class=\"k\">" << k << "</div><div class=\"v\">" << v;
    if (!unit.empty()) o << " <span class=\"u\">" << unit << "</span>";
    o << "</div><div class=\"d\">" << d << "</div></div>\n";
  };
  o << "<div class=\"cards\">\n";
  card("Teams", std::to_string(b.rows.size()), "", "with a correct timed run");
  card("Fastest", board::ms(fastest.best.op_time_s), "ms", esc(fastest.team));
  card("Median", board::ms(b.median_s), "ms", "of the teams' best times");
  card("Std deviation", board::ms(b.stddev_s), "ms", "population, over the teams");
  const std::string lib = library_name(b);
  if (!refs.empty()) {
    const double ref_median = refs.size() % 2 == 1
                                  ? refs[refs.size() / 2]
                                  : 0.5 * (refs[refs.size() / 2 - 1] + refs[refs.size() / 2]);
    card(lib, board::ms(ref_median), "ms", "median over the teams' runs");
  } else {
    card(lib, "\u2014", "", "not timed in these runs");
  }
  o << "</div>\n";
}

// What a row is: a team's fastest run, or its submission that counts (the service's rule).
std::string rows_are(const Leaderboard& b) {
  const auto submitted = std::count_if(b.rows.begin(), b.rows.end(),
                                       [](const LeaderboardRow& r) { return r.best.submitted; });
  if (submitted == 0) return "Each team's fastest correct run";
  const std::string counted =
      "Each team's grade that counts (its last one submitted before its deadline)";
  if (static_cast<std::size_t>(submitted) == b.rows.size()) return counted;
  return counted + "; for a team graded outside the submission service, its fastest correct run";
}

// The ranked table.
void ranking_table(std::ostringstream& o, const Leaderboard& b) {
  const std::string lib = library_name(b);
  const std::string gpu = board::common_gpu(b);
  bool mixed_gpus = gpu.empty();
  bool all_gpu_empty = std::all_of(b.rows.begin(), b.rows.end(),
                                   [](const LeaderboardRow& r) { return r.best.gpu_name.empty(); });
  mixed_gpus = mixed_gpus && !all_gpu_empty;
  o << "<section class=\"table\" aria-labelledby=\"rank-h\">\n<h2 id=\"rank-h\">Ranking</h2>\n"
    << "<p class=\"note\">Points: " << esc(board::rule_sentence(b.rule))
    << ". \u03c3 is the number of standard deviations from the median (negative is faster)."
    << "</p>\n<table>\n<caption>" << esc(rows_are(b)) << ", fastest first.</caption>\n"
    << "<thead><tr><th scope=\"col\" class=\"l\">Rank</th><th scope=\"col\" class=\"l\">Team</th>"
    << "<th scope=\"col\">Op Time<br>(ms)</th><th scope=\"col\">Median of runs<br>(ms)</th>"
    << "<th scope=\"col\">" << lib << "<br>(ms)</th><th scope=\"col\">Speedup<br>vs " << lib
    << "</th>"
    << "<th scope=\"col\">\u03c3 from<br>median</th><th scope=\"col\">Points<br>(of "
    << fixed(b.rule.points, 0) << ")</th>";
  if (mixed_gpus) o << "<th scope=\"col\" class=\"l\">GPU</th>";
  o << "<th scope=\"col\" class=\"l\"><span class=\"sr\">Flag</span>\u2691</th></tr></thead>\n"
    << "<tbody>\n";
  for (const LeaderboardRow& r : b.rows) {
    const std::string sp = board::speedup(r.best);
    const double share = b.rule.points > 0 ? 100.0 * r.points / b.rule.points : 0.0;
    o << "<tr class=\"" << (r.rank <= 3 ? "top" : "") << (r.best.flagged ? " flagged" : "")
      << "\"><td class=\"l rank\">" << r.rank << "</td><td class=\"l team\">" << esc(r.team)
      << "</td><td>" << board::ms(r.best.op_time_s) << "</td><td>"
      << board::ms(r.best.op_time_median_s, "\u2014") << "</td><td>"
      << board::ms(r.best.reference_time_s, "\u2014") << "</td><td>"
      << (sp.empty() ? "\u2014" : sp + "\u00d7") << "</td><td class=\""
      << (r.stddevs_from_median < 0   ? "neg"
          : r.stddevs_from_median > 0 ? "pos"
                                      : "")
      << "\">" << signed_html(r.stddevs_from_median, 2) << "</td><td><span class=\"pts\">"
      << fixed(r.points, 2) << "<span class=\"meter\" aria-hidden=\"true\"><span style=\"width:"
      << fixed(std::clamp(share, 0.0, 100.0), 1) << "%\"></span></span></span></td>";
    if (mixed_gpus) o << "<td class=\"l\">" << esc(r.best.gpu_name) << "</td>";
    o << "<td class=\"l\">";
    if (r.best.flagged) {
      std::string why;
      for (const std::string& f : r.best.flags) why += (why.empty() ? "" : "; ") + f;
      o << "<span class=\"flag\" title=\"" << esc(why.empty() ? "flagged" : why)
        << "\">\u2691<span class=\"sr\"> flagged: " << esc(why) << "</span></span>";
    }
    o << "</td></tr>\n";
  }
  o << "</tbody>\n</table>\n</section>\n";
}

// The distribution of team times, with its legend.
void distribution_section(std::ostringstream& o, const Leaderboard& b) {
  o << "<section aria-labelledby=\"dist-h\">\n<h2 id=\"dist-h\">Distribution of team times</h2>\n"
    << "<p class=\"note\">Each dot is a team, numbered by rank, at its best correct Op Time. "
    << "Hover a dot for its team.</p>\n<ul class=\"legend\">"
    << "<li><span class=\"sw med\"></span>median</li>"
    << "<li><span class=\"sw b1\"></span>\u00b11 standard deviation</li>"
    << "<li><span class=\"sw b2\"></span>\u00b12 standard deviations</li>"
    << "<li><span class=\"sw dot\"></span>team</li>";
  if (std::any_of(b.rows.begin(), b.rows.end(),
                  [](const LeaderboardRow& r) { return r.best.flagged; })) {
    o << "<li><span class=\"sw dot f\"></span>flagged team</li>";
  }
  o << "</ul>\n" << distribution_svg(b) << "\n</section>\n";
}

// Each team's variants, where the runs timed more than the ranked one.
void variants_section(std::ostringstream& o, const Leaderboard& b) {
  std::vector<std::string> variants;
  for (const LeaderboardRow& r : b.rows) {
    for (const auto& [name, t] : r.best.variants) {
      if (std::find(variants.begin(), variants.end(), name) == variants.end()) {
        variants.push_back(name);
      }
    }
  }
  if (!variants.empty()) {
    o << "<section aria-labelledby=\"var-h\">\n<h2 id=\"var-h\">Variants per team</h2>\n"
      << "<p class=\"note\">Every optimisation variant's best correct Op Time in the team's "
      << "ranked run, on the same model and images.</p>\n<ul class=\"legend\">";
    const std::vector<std::string> colours =
        variant_colours(variants, b.rows.front().best.ranked_variant);
    for (std::size_t v = 0; v < variants.size(); ++v) {
      o << "<li><span class=\"sw\" style=\"background:" << colours[v] << "\"></span>"
        << esc(variants[v])
        << (variants[v] == b.rows.front().best.ranked_variant ? " (ranked)" : "") << "</li>";
    }
    o << "<li><span class=\"sw tick\"></span>cuDNN, same run</li></ul>\n"
      << variants_svg(b, variants, colours) << "\n</section>\n";
  }
}

std::string leaderboard_html(const Leaderboard& b, int live_refresh_s) {
  std::ostringstream o;
  page_header(o, b, live_refresh_s);
  if (b.rows.empty()) {
    o << "</header>\n<section><p class=\"empty\">No team has a correct timed run on milestone "
      << esc(b.milestone) << " yet.</p></section>\n</main>\n</body>\n</html>\n";
    return o.str();
  }
  summary_cards(o, b);
  ranking_table(o, b);
  distribution_section(o, b);
  variants_section(o, b);
  o << "<footer>\n<p>" << esc(rows_are(b)) << ". Op Time is the "
    << "minimum over that run's timed runs (the original rule: re-run and keep the fastest); "
    << "\u201cmedian of runs\u201d is their median. cuDNN was timed in the same run on the same "
    << "GPU, so the speedup compares across GPUs.</p>\n<p>\u03c3 = (time \u2212 median) / "
    << "standard deviation of the teams' best times (population: the class is the whole "
    << "population ranked). Flagged runs (\u2691) are ranked but wait for a human to look."
    << "</p>\n<p>";
  if (live_refresh_s > 0) {
    o << "Served live by <code>convlab serve</code> from the results database; the page "
      << "reloads every " << live_refresh_s << " s.";
  } else {
    o << "Generated by <code>convlab leaderboard</code>.";
  }
  o << "</p>\n</footer>\n"
    << "</main>\n</body>\n</html>\n";
  return o.str();
}

}  // namespace convlab::grader
