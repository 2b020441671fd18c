// Ranking: best times -> median, standard deviation, sigma, points; anonymous labels.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "grader/leaderboard/leaderboard.hpp"
#include "reference/core/error.hpp"
#include "reference/core/text.hpp"
#include "reference/milestones/milestone.hpp"

namespace convlab::grader {

namespace fs = std::filesystem;

namespace {

// SipHash-2-4 (Aumasson and Bernstein, 2012): a keyed hash made for short inputs, so a label
// cannot be computed from a team name without the database's secret.
std::uint64_t rotl(std::uint64_t x, int b) {
  return (x << b) | (x >> (64 - b));
}

std::uint64_t siphash24(const std::array<std::uint8_t, 16>& key, const std::string& msg) {
  auto load = [](const std::uint8_t* p, std::size_t n) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
    return v;
  };
  const std::uint64_t k0 = load(key.data(), 8), k1 = load(key.data() + 8, 8);
  std::uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
  std::uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
  auto round = [&] {
    v0 += v1, v1 = rotl(v1, 13), v1 ^= v0, v0 = rotl(v0, 32);
    v2 += v3, v3 = rotl(v3, 16), v3 ^= v2;
    v0 += v3, v3 = rotl(v3, 21), v3 ^= v0;
    v2 += v1, v1 = rotl(v1, 17), v1 ^= v2, v2 = rotl(v2, 32);
  };
  const auto* p = reinterpret_cast<const std::uint8_t*>(msg.data());
  const std::size_t n = msg.size(), whole = n / 8 * 8;
  for (std::size_t i = 0; i < whole; i += 8) {
    const std::uint64_t m = load(p + i, 8);
    v3 ^= m, round(), round(), v0 ^= m;
  }
  const std::uint64_t b = (static_cast<std::uint64_t>(n) << 56) | load(p + whole, n - whole);
  v3 ^= b, round(), round(), v0 ^= b;
  v2 ^= 0xff;
  round(), round(), round(), round();
  return v0 ^ v1 ^ v2 ^ v3;
}

// The database stores its key as 32 hex digits; any other text is folded into 16 bytes.
std::array<std::uint8_t, 16> key_bytes(const std::string& key) {
  std::array<std::uint8_t, 16> k{};
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const bool is_hex =
      key.size() == 32 && std::all_of(key.begin(), key.end(), [&](char c) { return hex(c) >= 0; });
  if (is_hex) {
    for (std::size_t i = 0; i < 16; ++i) {
      k[i] = static_cast<std::uint8_t>(hex(key[2 * i]) * 16 + hex(key[2 * i + 1]));
    }
  } else {
    for (std::size_t i = 0; i < key.size(); ++i) {
      k[i % 16] = static_cast<std::uint8_t>(k[i % 16] * 31 + static_cast<unsigned char>(key[i]));
    }
  }
  return k;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::string anonymous_label(const std::string& team, const std::string& key, int hex_digits) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(siphash24(key_bytes(key), team)));
  return "Team " + std::string(buf, static_cast<std::size_t>(std::clamp(hex_digits, 1, 16)));
}

RankingRule load_ranking_rule(const fs::path& root, const std::string& milestone,
                              const std::optional<std::string>& rule_override) {
  const fs::path path = root / "milestones" / milestone / "checks.json";
  const std::vector<std::string> ids = milestone_ids(root);
  if (std::find(ids.begin(), ids.end(), milestone) == ids.end()) {
    // Latest first: "final, m3 or m2".
    std::vector<std::string> graded = graded_milestone_ids(root);
    std::string choices;
    for (std::size_t i = graded.size(); i-- > 0;) {
      choices += graded[i] + (i == 1 ? " or " : i > 1 ? ", " : "");
    }
    throw Error("unknown milestone '" + milestone + "' (no " + path.string() +
                "); use --milestone " + choices);
  }
  const Milestone ms = load_milestone(root, milestone);
  RankingRule rule;
  rule.cpu = ms.default_device == "cpu";
  bool has_threshold = false;
  if (ms.ranking) {
    rule.rule = ms.ranking->rule;
    rule.points = ms.ranking->points;
    rule.points_per_stddev = ms.ranking->points_per_stddev;
    if (ms.ranking->threshold_ms) {
      std::tie(rule.full_ms, rule.zero_ms) = *ms.ranking->threshold_ms;
      has_threshold = true;
    }
  }
  if (rule_override) rule.rule = *rule_override;
  if (rule.rule != "stddev_from_median" && rule.rule != "threshold") {
    throw Error("unknown ranking rule '" + rule.rule +
                "': choose stddev_from_median (the original) or threshold");
  }
  if (!(rule.points > 0.0) || !(rule.points_per_stddev >= 0.0)) {
    throw Error("the ranking in " + path.string() + " needs points > 0 and points_per_stddev >= 0");
  }
  if (rule.rule == "threshold") {
    if (!has_threshold) {
      throw Error("milestone " + milestone + " has no ranking threshold {full_ms, zero_ms} in " +
                  path.string() + "; add one or use --rule stddev_from_median");
    }
    if (!(rule.full_ms >= 0.0 && rule.full_ms < rule.zero_ms)) {
      throw Error("the ranking threshold in " + path.string() + " needs 0 <= full_ms < zero_ms");
    }
  }
  return rule;
}

double ranking_points(const RankingRule& rule, double sigma, double time_s) {
  if (rule.rule == "threshold") {
    const double ms = time_s * 1e3;
    if (ms <= rule.full_ms) return rule.points;
    if (ms >= rule.zero_ms) return 0.0;
    return rule.points * (rule.zero_ms - ms) / (rule.zero_ms - rule.full_ms);
  }
  return std::clamp(rule.points / 2.0 - sigma * rule.points_per_stddev, 0.0, rule.points);
}

Leaderboard rank_teams(const std::string& milestone, std::vector<TeamBest> teams,
                       const RankingRule& rule, const std::optional<std::string>& anonymize_key) {
  Leaderboard board;
  board.milestone = milestone;
  board.rule = rule;
  board.anonymized = anonymize_key.has_value();
  // A time that is not a positive finite number cannot come from a correct timed run.
  std::erase_if(teams, [](const TeamBest& t) { return !std::isfinite(t.op_time_s); });
  std::sort(teams.begin(), teams.end(), [](const TeamBest& a, const TeamBest& b) {
    return a.op_time_s != b.op_time_s ? a.op_time_s < b.op_time_s : a.team < b.team;
  });
  if (teams.empty()) return board;

  std::vector<double> times;
  for (const TeamBest& t : teams) times.push_back(t.op_time_s);
  board.median_s = median_of(times);
  // Population standard deviation (divide by N): the class is the whole population being
  // ranked, not a sample from which to estimate a wider spread; it also keeps two teams at
  // exactly +-1 sigma instead of inflating their spread by sqrt(2).
  double mean = 0.0;
  for (double t : times) mean += t;
  mean /= static_cast<double>(times.size());
  double var = 0.0;
  for (double t : times) var += (t - mean) * (t - mean);
  board.stddev_s = std::sqrt(var / static_cast<double>(times.size()));

  std::map<std::string, std::string> labels;
  if (anonymize_key) {
    // Lengthen only the labels that collide, so every other team keeps its label.
    std::map<std::string, int> digits;
    for (const TeamBest& t : teams) digits[t.team] = 6;
    for (bool clash = true; clash;) {
      std::map<std::string, std::vector<std::string>> by_label;
      for (const auto& [team, d] : digits) {
        labels[team] = anonymous_label(team, *anonymize_key, d);
        by_label[labels[team]].push_back(team);
      }
      clash = false;
      for (const auto& [label, names] : by_label) {
        if (names.size() < 2) continue;
        for (const std::string& team : names) {
          if (digits[team] < 16) ++digits[team], clash = true;
        }
      }
    }
  }

  for (std::size_t i = 0; i < teams.size(); ++i) {
    LeaderboardRow row;
    row.best = std::move(teams[i]);
    // Competition ranking: equal times share a rank, the next time skips (1, 2, 2, 4).
    row.rank = (i > 0 && row.best.op_time_s == board.rows.back().best.op_time_s)
                   ? board.rows.back().rank
                   : static_cast<int>(i) + 1;
    row.stddevs_from_median =
        board.stddev_s > 0.0 ? (row.best.op_time_s - board.median_s) / board.stddev_s : 0.0;
    row.points = ranking_points(rule, row.stddevs_from_median, row.best.op_time_s);
    if (anonymize_key) {
      // The students' view: no name, and nothing that is staff business (flags) or that
      // points back to a run (its id).
      row.best.team = labels.at(row.best.team);
      row.best.flagged = false;
      row.best.flags.clear();
      row.best.run_id = 0;
    }
    // Names from older grades or other tools may hold terminal controls: never printed.
    row.best.team = strip_control_chars(row.best.team);
    row.team = row.best.team;
    board.rows.push_back(std::move(row));
  }
  return board;
}

}  // namespace convlab::grader
