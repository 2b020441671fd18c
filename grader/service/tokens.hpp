/// @file
/// @brief The service's team tokens (random, kept only as SHA-256 digests), the limit on
/// failed logins per client address, and the browser sessions of the team pages.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace convlab::service {

/// A fresh token: "cvl_" and 64 hex digits from the kernel's random source.
std::string new_token();

/// The digest the database keeps for `token` (64 lowercase hex digits).
std::string token_digest(const std::string& token);

/// Counts failed logins per client address over a sliding minute; an address that failed
/// `limit` times in the last minute is refused until its oldest failure is a minute old.
class LoginLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  /// `limit`: failures allowed per address and minute.
  explicit LoginLimiter(int limit) : limit_(limit) {}
  /// Seconds until `address` may try again; 0 when it may try now.
  int blocked_for(const std::string& address, Clock::time_point now = Clock::now());
  /// Records a failed login from `address`.
  void failed(const std::string& address, Clock::time_point now = Clock::now());

 private:
  void forget_old(std::deque<Clock::time_point>& times, Clock::time_point now);
  int limit_;
  std::mutex mutex_;
  std::map<std::string, std::deque<Clock::time_point>> failures_;
};

/// The team pages' browser sessions, in memory (a restart signs every browser out). A team's
/// client asks for a link (its token in the header, never in a URL); the link works once and
/// briefly, and opens a session held in an HttpOnly cookie. A session names the token digest
/// it came from, so a token issued anew ends the sessions of the old one.
class PageSessions {
 public:
  using Clock = std::chrono::steady_clock;
  /// What a session or link belongs to.
  struct Owner {
    std::string account;  ///< the team or staff account
    std::string digest;   ///< the digest of the token it was opened with
  };
  /// How long a link stays usable.
  static constexpr std::chrono::seconds kLinkLife{300};
  /// How long a session lasts.
  static constexpr std::chrono::seconds kSessionLife{12 * 3600};

  /// A new one-time link key for `owner`.
  std::string new_link(const Owner& owner, Clock::time_point now = Clock::now());
  /// Spends a link key: a new session id, or nullopt when the key is unknown, used or old.
  std::optional<std::string> redeem(const std::string& key, Clock::time_point now = Clock::now());
  /// The owner of a session, or nullopt when it is unknown or over.
  std::optional<Owner> owner(const std::string& session, Clock::time_point now = Clock::now());

 private:
  struct Entry {
    Owner owner;
    Clock::time_point expires;
  };
  void forget_old(Clock::time_point now);
  std::mutex mutex_;
  std::map<std::string, Entry> links_, sessions_;
};

}  // namespace convlab::service
