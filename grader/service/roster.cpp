#include "grader/service/roster.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "reference/core/error.hpp"
#include "reference/core/files.hpp"

namespace convlab::service {
namespace fs = std::filesystem;

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream in(line);
  std::string cell;
  while (std::getline(in, cell, ',')) cells.push_back(trim(cell));
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

std::vector<Account> read_csv(const fs::path& file, const std::string& text) {
  std::vector<Account> out;
  std::stringstream in(text);
  std::string line;
  int number = 0, name_col = -1, role_col = -1;
  while (std::getline(in, line)) {
    ++number;
    if (trim(line).empty() || trim(line).starts_with("#")) continue;
    const auto cells = split_csv_line(line);
    const std::string where = file.string() + ":" + std::to_string(number) + ": ";
    if (name_col < 0) {
      for (int i = 0; i < static_cast<int>(cells.size()); ++i) {
        if (cells[i] == "name" || cells[i] == "team") name_col = i;
        if (cells[i] == "role") role_col = i;
      }
      if (name_col < 0) {
        throw Error(where + "the first line must name the columns: name (or team), and "
                            "optionally role; e.g. \"team,role\"");
      }
      continue;
    }
    if (static_cast<int>(cells.size()) <= name_col) {
      throw Error(where + "has no " + std::to_string(name_col + 1) + "th column, the name");
    }
    Account a;
    a.name = cells[name_col];
    // A missing role is a team.
    const std::string role =
        role_col >= 0 && role_col < static_cast<int>(cells.size()) ? cells[role_col] : "team";
    if (role != "team" && role != "staff" && !role.empty()) {
      throw Error(where + "role '" + role + "' is neither team nor staff");
    }
    a.staff = role == "staff";
    if (!valid_account_name(a.name)) {
      throw Error(where + "'" + a.name +
                  "' is not a valid name: use 1 to 64 letters, digits, '.', '_' or '-', "
                  "starting with a letter or digit");
    }
    out.push_back(a);
  }
  return out;
}

std::vector<Account> read_json(const fs::path& file, const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) {
    throw Error(file.string() + " is not a JSON object like {\"teams\": [\"a\", \"b\"], "
                                "\"staff\": [\"prof\"]}");
  }
  std::vector<Account> out;
  for (const char* key : {"teams", "staff"}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_array()) throw Error(file.string() + ": \"" + key + "\" must be an array");
    for (const auto& e : j[key]) {
      Account a;
      a.staff = std::string(key) == "staff";
      if (e.is_string()) {
        a.name = e.get<std::string>();
      } else if (e.is_object() && e.contains("name") && e["name"].is_string()) {
        a.name = e["name"].get<std::string>();
      } else {
        throw Error(file.string() + ": an entry of \"" + key + "\" is " + e.dump() +
                    "; give a name or {\"name\": ...}");
      }
      if (!valid_account_name(a.name)) {
        throw Error(file.string() + ": '" + a.name +
                    "' is not a valid name: use 1 to 64 letters, digits, '.', '_' or '-', "
                    "starting with a letter or digit");
      }
      out.push_back(a);
    }
  }
  return out;
}

}  // namespace

bool valid_account_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || !std::isalnum(static_cast<unsigned char>(name[0]))) {
    return false;
  }
  for (const char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return false;
    }
  }
  return name.find("..") == std::string::npos;
}

std::vector<Account> load_roster(const fs::path& file) {
  const auto content = try_read_file(file);
  if (!content) throw Error("cannot read the roster " + file.string() + ": check the path");
  const std::string& text = *content;
  const bool is_json = file.extension() == ".json" || trim(text).starts_with("{");
  std::vector<Account> accounts = is_json ? read_json(file, text) : read_csv(file, text);
  std::set<std::string> seen;
  for (const Account& a : accounts) {
    if (!seen.insert(a.name).second) {
      throw Error("the roster " + file.string() + " names '" + a.name + "' twice");
    }
  }
  if (accounts.empty()) throw Error("the roster " + file.string() + " names no team");
  return accounts;
}

}  // namespace convlab::service
