/// @file
/// @brief What the project's hand-drawn charts share (the leaderboard page's charts and the
/// bench's roofline plot): escaping text for SVG and HTML, coordinates, and a value axis
/// mapped onto pixels, linear or log, with its ticks.
#pragma once

#include <string>
#include <vector>

namespace convlab::svg {

/// `text` safe inside SVG or HTML, as element text or a quoted attribute: & < > " ' become
/// entities, control characters other than tab and newline become U+FFFD.
std::string escape(const std::string& text);

/// A coordinate with one decimal (finer than a pixel), e.g. "12.5".
std::string coord(double v);

/// A tick's label: "%.4g" below 100 ("0.25", "2"), whole numbers from 100 up ("1500").
std::string tick_label(double v);

/// The nearest of 1, 2, 5 x 10^k at or below `v` (down) or at or above it (!down); v > 0.
double nice_125(double v, bool down);

/// A value axis mapped onto pixels [p0, p1] (p1 may be below p0: a vertical axis grows
/// upwards), linear or log.
struct Axis {
  double lo = 0.0;   ///< the value at p0 (> 0 on a log axis)
  double hi = 1.0;   ///< the value at p1 (> lo)
  bool log = false;  ///< log10 scale
  double p0 = 0.0;   ///< the pixel of lo
  double p1 = 1.0;   ///< the pixel of hi

  /// The pixel of `v`, clamped to [lo, hi].
  double operator()(double v) const;
  /// Tick values inside [lo, hi]: 1-2-5 per decade on a log axis spanning at most four decades,
  /// decades only on a wider one; about six round steps on a linear axis.
  std::vector<double> ticks() const;
  /// A round step (1, 2 or 5 x 10^k) near `raw`.
  static double nice_step(double raw);
};

}  // namespace convlab::svg
