#include "reference/core/parallel.hpp"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "reference/core/error.hpp"

namespace convlab {

int cpu_threads() {
  static const int threads = [] {
    if (const char* env = std::getenv("CONVLAB_THREADS"); env != nullptr && *env != '\0') {
      char* end = nullptr;
      const long v = std::strtol(env, &end, 10);
      if (*end != '\0' || v < 1 || v > 1024) {
        throw Error("CONVLAB_THREADS must be a whole number from 1 to 1024, got '" +
                    std::string(env) + "'");
      }
      return static_cast<int>(v);
    }
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }();
  return threads;
}

void parallel_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& body) {
  if (n <= 0) return;
  const std::int64_t workers = std::min<std::int64_t>(cpu_threads(), n);
  if (workers == 1) {
    body(0, n);
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(workers));
  {
    std::vector<std::jthread> pool;
    pool.reserve(static_cast<std::size_t>(workers));
    for (std::int64_t t = 0; t < workers; ++t) {
      pool.emplace_back([&, t] {
        try {
          body(n * t / workers, n * (t + 1) / workers);
        } catch (...) {
          errors[static_cast<std::size_t>(t)] = std::current_exception();
        }
      });
    }
  }
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace convlab
