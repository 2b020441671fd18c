/// @file
/// @brief The service's team tokens (random, kept only as SHA-256 digests) and the limit on
/// failed logins per client address.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <mutex>
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

}  // namespace convlab::service
