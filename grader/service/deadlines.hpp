/// @file
/// @brief Deadlines per milestone: times as the staff write them (ISO 8601 with a zone), as
/// the service states them (UTC), and a team's own deadline once an extension is counted.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace convlab::service {

/// Seconds since 1970-01-01T00:00:00Z.
using UnixTime = std::int64_t;

/// The time now.
UnixTime unix_now();

/// Parses "2026-03-01T23:59:00Z", "2026-03-01T23:59Z" or "2026-03-01T23:59:00+01:00" (a space
/// may stand for the T). A zone is required: a deadline means one instant for everyone. Throws
/// Error saying the accepted forms.
UnixTime parse_time(const std::string& text);

/// "2026-03-01 23:59:00 UTC": how a deadline is shown to people.
std::string utc_text(UnixTime t);

/// "2026-03-01T23:59:00Z": how the database keeps a time.
std::string iso_utc(UnixTime t);

/// Parses a `--deadline` value "MILESTONE=TIME" into its two parts. Throws Error.
std::pair<std::string, UnixTime> parse_deadline_option(const std::string& text);

/// A team's deadline for one milestone.
struct TeamDeadline {
  UnixTime at = 0;        ///< the instant after which its grade jobs are refused
  bool extended = false;  ///< an extension moved it past the milestone's deadline
};

/// The deadline of `team` on `milestone`: the later of the milestone's deadline in
/// `deadlines` and the team's extension; nullopt when the milestone has no deadline.
std::optional<TeamDeadline> team_deadline(const std::map<std::string, UnixTime>& deadlines,
                                          const std::string& milestone,
                                          const std::optional<UnixTime>& extension);

}  // namespace convlab::service
