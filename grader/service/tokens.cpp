#include "grader/service/tokens.hpp"

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "reference/core/error.hpp"
#include "tools/train/sha256.hpp"

namespace convlab::service {

namespace {
constexpr auto kWindow = std::chrono::minutes(1);
}  // namespace

std::string new_token() {
  std::array<std::uint8_t, 32> bytes{};
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(std::string("cannot draw a random token: ") + std::strerror(errno));
    got += static_cast<std::size_t>(n);
  }
  static const char* hex = "0123456789abcdef";
  std::string token = "cvl_";
  for (const std::uint8_t b : bytes) {
    token += hex[b >> 4];
    token += hex[b & 15];
  }
  return token;
}

std::string token_digest(const std::string& token) {
  return tools::sha256_hex({reinterpret_cast<const std::uint8_t*>(token.data()), token.size()});
}

void LoginLimiter::forget_old(std::deque<Clock::time_point>& times, Clock::time_point now) {
  while (!times.empty() && now - times.front() >= kWindow) times.pop_front();
}

int LoginLimiter::blocked_for(const std::string& address, Clock::time_point now) {
  const std::lock_guard lock(mutex_);
  const auto it = failures_.find(address);
  if (it == failures_.end()) return 0;
  forget_old(it->second, now);
  if (static_cast<int>(it->second.size()) < limit_) {
    if (it->second.empty()) failures_.erase(it);
    return 0;
  }
  const auto wait = kWindow - (now - it->second.front());
  return static_cast<int>(std::chrono::ceil<std::chrono::seconds>(wait).count());
}

void LoginLimiter::failed(const std::string& address, Clock::time_point now) {
  const std::lock_guard lock(mutex_);
  auto& times = failures_[address];
  forget_old(times, now);
  times.push_back(now);
}

void PageSessions::forget_old(Clock::time_point now) {
  for (auto* table : {&links_, &sessions_}) {
    std::erase_if(*table, [&](const auto& e) { return e.second.expires <= now; });
  }
}

std::string PageSessions::new_link(const Owner& owner, Clock::time_point now) {
  const std::string key = new_token().substr(4);
  const std::lock_guard lock(mutex_);
  forget_old(now);
  links_[key] = {owner, now + kLinkLife};
  return key;
}

std::optional<std::string> PageSessions::redeem(const std::string& key, Clock::time_point now) {
  const std::lock_guard lock(mutex_);
  forget_old(now);
  const auto it = links_.find(key);
  if (it == links_.end()) return std::nullopt;
  const Owner owner = it->second.owner;
  links_.erase(it);
  const std::string session = new_token().substr(4);
  sessions_[session] = {owner, now + kSessionLife};
  return session;
}

std::optional<PageSessions::Owner> PageSessions::owner(const std::string& session,
                                                       Clock::time_point now) {
  const std::lock_guard lock(mutex_);
  forget_old(now);
  const auto it = sessions_.find(session);
  if (it == sessions_.end()) return std::nullopt;
  return it->second.owner;
}

}  // namespace convlab::service
