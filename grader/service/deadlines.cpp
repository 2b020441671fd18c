#include "grader/service/deadlines.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <regex>

#include "reference/core/error.hpp"

namespace convlab::service {

namespace {

std::string format_utc(UnixTime t, const char* format) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

}  // namespace

UnixTime unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

UnixTime parse_time(const std::string& text) {
  static const std::regex form(
      R"((\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2}))?(Z|[+-]\d{2}:\d{2}))");
  std::smatch m;
  const auto bad = [&](const std::string& why) {
    return Error("'" + text + "' is not a time this service reads (" + why +
                 "): write it as 2026-03-01T23:59:00Z (UTC) or 2026-03-01T23:59:00+01:00");
  };
  if (!std::regex_match(text, m, form)) throw bad("a date, a time and a zone are needed");
  std::tm tm{};
  tm.tm_year = std::stoi(m[1]) - 1900;
  tm.tm_mon = std::stoi(m[2]) - 1;
  tm.tm_mday = std::stoi(m[3]);
  tm.tm_hour = std::stoi(m[4]);
  tm.tm_min = std::stoi(m[5]);
  tm.tm_sec = m[6].matched ? std::stoi(m[6]) : 0;
  if (tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 59) {
    throw bad("a field is out of range");
  }
  const std::tm asked = tm;
  UnixTime t = timegm(&tm);
  // timegm normalises 2026-02-30 to March 2nd: such a date is a typing mistake.
  if (tm.tm_mday != asked.tm_mday || tm.tm_mon != asked.tm_mon) throw bad("no such day");
  const std::string zone = m[7];
  if (zone != "Z") {
    const int hours = std::stoi(zone.substr(1, 2)), minutes = std::stoi(zone.substr(4, 2));
    if (hours > 14 || minutes > 59) throw bad("the zone is out of range");
    const UnixTime offset = hours * 3600 + minutes * 60;
    t += zone[0] == '+' ? -offset : offset;
  }
  return t;
}

std::string utc_text(UnixTime t) {
  return format_utc(t, "%Y-%m-%d %H:%M:%S UTC");
}

std::string iso_utc(UnixTime t) {
  return format_utc(t, "%Y-%m-%dT%H:%M:%SZ");
}

std::pair<std::string, UnixTime> parse_deadline_option(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw Error("--deadline " + text +
                ": give it as MILESTONE=TIME, e.g. --deadline m2=2026-03-01T23:59:00Z");
  }
  return {text.substr(0, eq), parse_time(text.substr(eq + 1))};
}

std::optional<TeamDeadline> team_deadline(const std::map<std::string, UnixTime>& deadlines,
                                          const std::string& milestone,
                                          const std::optional<UnixTime>& extension) {
  const auto it = deadlines.find(milestone);
  if (it == deadlines.end()) return std::nullopt;
  if (extension && *extension > it->second) return TeamDeadline{*extension, true};
  return TeamDeadline{it->second, false};
}

}  // namespace convlab::service
