#include "reference/core/svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace convlab::svg {

std::string escape(const std::string& text) {
  std::string out;
  out.reserve(text.size() + 16);
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
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
      case '\'':
        out += "&#39;";
        break;
      default:
        if ((c < 0x20 && ch != '\t' && ch != '\n') || c == 0x7f) {
          out += "\xEF\xBF\xBD";  // U+FFFD: XML 1.0 forbids most control characters
        } else {
          out += ch;
        }
    }
  }
  return out;
}

std::string coord(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string tick_label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 100 ? "%.0f" : "%.4g", v);
  return buf;
}

double nice_125(double v, bool down) {
  const double mag = std::pow(10.0, std::floor(std::log10(v)));
  const double ms[] = {1.0, 2.0, 5.0, 10.0};
  if (down) {
    double best = mag;
    for (double m : ms) {
      if (m * mag <= v) best = m * mag;
    }
    return best;
  }
  for (double m : ms) {
    if (m * mag >= v) return m * mag;
  }
  return 10.0 * mag;
}

double Axis::operator()(double v) const {
  v = std::clamp(v, lo, hi);
  const double f = log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo))
                       : (v - lo) / (hi - lo);
  return p0 + f * (p1 - p0);
}

std::vector<double> Axis::ticks() const {
  std::vector<double> t;
  if (log) {
    const int d0 = static_cast<int>(std::floor(std::log10(lo)));
    const int d1 = static_cast<int>(std::ceil(std::log10(hi)));
    const bool fine = d1 - d0 <= 4;  // 1-2-5 ticks while they fit
    for (int d = d0; d <= d1; ++d) {
      for (double m : {1.0, 2.0, 5.0}) {
        if (m != 1.0 && !fine) continue;
        const double v = m * std::pow(10.0, d);
        if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) t.push_back(v);
      }
    }
    return t;
  }
  const double step = nice_step((hi - lo) / 6.0);
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) {
    t.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  }
  return t;
}

double Axis::nice_step(double raw) {
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f < 1.5 ? 1.0 : f < 3.0 ? 2.0 : f < 7.0 ? 5.0 : 10.0) * mag;
}

}  // namespace convlab::svg
