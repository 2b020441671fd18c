#include "reference/profile/report.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <utility>

namespace convlab::profile {

namespace {

std::vector<ProfileRow> rows_of(const Profile& profile, Section section) {
  std::map<std::string, ProfileRow> by_name;
  std::uint64_t section_total = 0;
  for (const ProfileRecord& r : profile.records) {
    if (r.section != section) continue;
    ProfileRow& row = by_name[r.name];
    if (row.calls == 0) {
      row.name = r.name;
      row.min_ns = r.duration_ns;
      row.max_ns = r.duration_ns;
    }
    ++row.calls;
    row.total_ns += r.duration_ns;
    row.min_ns = std::min(row.min_ns, r.duration_ns);
    row.max_ns = std::max(row.max_ns, r.duration_ns);
    section_total += r.duration_ns;
  }
  std::vector<ProfileRow> rows;
  rows.reserve(by_name.size());
  for (auto& [name, row] : by_name) {
    row.avg_ns = static_cast<double>(row.total_ns) / static_cast<double>(row.calls);
    row.percent = section_total > 0 ? 100.0 * static_cast<double>(row.total_ns) /
                                          static_cast<double>(section_total)
                                    : 0.0;
    rows.push_back(std::move(row));
  }
  // std::map gave name order; a stable sort keeps it for equal totals.
  std::stable_sort(rows.begin(), rows.end(), [](const ProfileRow& a, const ProfileRow& b) {
    return a.total_ns > b.total_ns;
  });
  return rows;
}

std::string printf_double(int decimals, double value) {
  std::array<char, 64> buf{};
  std::snprintf(buf.data(), buf.size(), "%.*f", decimals, value);
  return buf.data();
}

std::uint64_t total_of(const std::vector<ProfileRow>& rows) {
  std::uint64_t t = 0;
  for (const ProfileRow& r : rows) t += r.total_ns;
  return t;
}

nlohmann::json rows_json(const std::vector<ProfileRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const ProfileRow& r : rows) {
    out.push_back({{"name", r.name},
                   {"calls", r.calls},
                   {"time_s", static_cast<double>(r.total_ns) * 1e-9},
                   {"percent", r.percent},
                   {"avg_s", r.avg_ns * 1e-9},
                   {"min_s", static_cast<double>(r.min_ns) * 1e-9},
                   {"max_s", static_cast<double>(r.max_ns) * 1e-9}});
  }
  return out;
}

}  // namespace

ProfileSummary summarize(const Profile& profile) {
  ProfileSummary s;
  s.gpu_activities = rows_of(profile, Section::gpu_activities);
  s.api_calls = rows_of(profile, Section::api_calls);
  s.overhead = rows_of(profile, Section::overhead);
  s.wall_ns = profile.wall_ns;
  s.dropped_records = profile.dropped_records;
  return s;
}

std::string format_duration(double ns) {
  if (!(ns >= 0.0)) ns = 0.0;  // also maps NaN to 0
  // nvprof truncated to whole nanoseconds (an average of 12.946ms over 26826 calls: "482ns").
  if (ns < 1000.0) return std::to_string(static_cast<std::uint64_t>(ns)) + "ns";
  struct Unit {
    const char* suffix;
    double scale;
    int digits;  // characters of the number: 6 for us and ms, 7 for seconds
  };
  constexpr std::array<Unit, 3> units{{{"us", 1e3, 6}, {"ms", 1e6, 6}, {"s", 1e9, 7}}};
  for (std::size_t u = 0; u < units.size(); ++u) {
    const bool last = u + 1 == units.size();
    const double v = ns / units[u].scale;
    if (!last && v >= 1000.0) continue;
    const int int_digits = v < 1.0 ? 1 : static_cast<int>(std::floor(std::log10(v))) + 1;
    int decimals = std::max(0, units[u].digits - int_digits - 1);
    std::string text = printf_double(decimals, v);
    // Rounding can add a digit: 999.996us is 1.0000ms, 9.99996us is 10.000us.
    if (!last && std::strtod(text.c_str(), nullptr) >= 1000.0) continue;
    if (decimals > 0 && static_cast<int>(text.size()) > units[u].digits) {
      text = printf_double(--decimals, v);
    }
    return text + units[u].suffix;
  }
  return "0ns";  // not reached: the last unit always returns
}

std::string format_percent(double percent) {
  return printf_double(2, percent) + "%";
}

std::string format_summary(const ProfileSummary& summary, long pid, std::string_view application) {
  const std::string prefix = "==" + std::to_string(pid) + "== ";
  std::string out;
  if (!application.empty())
    out += prefix + "Profiling application: " + std::string(application) + "\n";
  out += prefix + "Profiling result:\n";

  // Columns as nvprof laid them out: right-aligned, two spaces apart, at least as wide as its
  // own table (Type 16, Time(%) 7, the others 8), wider only when a cell needs it.
  const std::array<std::string, 8> header{"Type", "Time(%)", "Time", "Calls",
                                          "Avg",  "Min",     "Max",  "Name"};
  std::array<std::size_t, 7> width{16, 7, 8, 8, 8, 8, 8};
  std::vector<std::array<std::string, 8>> lines;
  const auto add_section = [&](const std::vector<ProfileRow>& rows, const char* type) {
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const ProfileRow& r = rows[i];
      lines.push_back({i == 0 ? type : "", format_percent(r.percent),
                       format_duration(static_cast<double>(r.total_ns)), std::to_string(r.calls),
                       format_duration(r.avg_ns), format_duration(static_cast<double>(r.min_ns)),
                       format_duration(static_cast<double>(r.max_ns)), r.name});
    }
  };
  add_section(summary.gpu_activities, "GPU activities:");
  add_section(summary.api_calls, "API calls:");
  if (lines.empty()) {
    return out + prefix + "Warning: no CUDA activity was recorded.\n";
  }
  for (const auto& cells : lines) {
    for (std::size_t c = 0; c < width.size(); ++c) width[c] = std::max(width[c], cells[c].size());
  }
  const auto print = [&](const std::array<std::string, 8>& cells) {
    std::string line;
    for (std::size_t c = 0; c < width.size(); ++c) {
      if (c > 0) line += "  ";
      line += std::string(width[c] - cells[c].size(), ' ') + cells[c];
    }
    out += line + "  " + cells[7] + "\n";
  };
  print(header);
  for (const auto& cells : lines) print(cells);

  if (summary.dropped_records > 0) {
    out += prefix + "Warning: " + std::to_string(summary.dropped_records) +
           " records were lost (no buffer space or no timestamps); the figures above undercount.\n";
  }
  if (!summary.overhead.empty()) {
    const ProfileRow& top = summary.overhead.front();
    std::uint64_t calls = 0;
    for (const ProfileRow& r : summary.overhead) calls += r.calls;
    out += prefix + "Overhead recorded by CUPTI, not counted above: " +
           format_duration(static_cast<double>(total_of(summary.overhead))) + " in " +
           std::to_string(calls) + " records (most: " + top.name + " " +
           format_duration(static_cast<double>(top.total_ns)) + ")\n";
  }
  return out;
}

nlohmann::json summary_json(const ProfileSummary& summary, long pid, std::string_view application) {
  return {{"pid", pid},
          {"application", std::string(application)},
          {"wall_time_s", static_cast<double>(summary.wall_ns) * 1e-9},
          {"dropped_records", summary.dropped_records},
          {"gpu_activities", rows_json(summary.gpu_activities)},
          {"api_calls", rows_json(summary.api_calls)},
          {"overhead", rows_json(summary.overhead)}};
}

std::string demangle(std::string_view name) {
  // Only "_Z" names are mangled functions; __cxa_demangle would also turn a plain "f" into
  // the type name "float".
  if (!name.starts_with("_Z")) return std::string(name);
  const std::string mangled(name);
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> text(
      abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), &std::free);
  return status == 0 && text ? std::string(text.get()) : mangled;
}

std::string api_name(std::string_view callback_name) {
  const std::size_t pos = callback_name.rfind("_v");
  if (pos == std::string_view::npos || pos + 2 == callback_name.size()) {
    return std::string(callback_name);
  }
  const std::string_view digits = callback_name.substr(pos + 2);
  const bool all_digits =
      std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  return std::string(all_digits ? callback_name.substr(0, pos) : callback_name);
}

std::string memcpy_name(CopyKind kind) {
  // Indexed by CopyKind (CUPTI's numbering).
  constexpr std::array<const char*, 11> directions{
      "Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
  const auto index = static_cast<std::size_t>(kind);
  return std::string("[CUDA memcpy ") +
         (index < directions.size() ? directions[index] : "Unknown") + "]";
}

}  // namespace convlab::profile
