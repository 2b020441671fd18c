/// @file
/// @brief The class roster the service accepts: the teams, and the staff who may read every
/// team's jobs. A CSV file (a header line with `name` or `team`, and optionally `role`) or a
/// JSON file ({"teams": [...], "staff": [...]}, each entry a name or {"name": ...}).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace convlab::service {

/// One account of the roster.
struct Account {
  std::string name;    ///< the team's name, as `convlab grade --team` records it
  bool staff = false;  ///< may read every team's jobs; submits like a team
};

/// Reads the roster. Throws Error naming the file and the line or entry for anything wrong: a
/// name outside [A-Za-z0-9._-] (1-64, starting with a letter or digit), a duplicate, an unknown
/// role, an empty roster.
std::vector<Account> load_roster(const std::filesystem::path& file);

/// Whether `name` is a valid account name (see load_roster).
bool valid_account_name(const std::string& name);

}  // namespace convlab::service
