#include "runtime/threads.hpp"

#include <algorithm>
#include <thread>

namespace ember::runtime {

std::size_t effective_threads(std::uint32_t threads) {
    if (threads > 0) return threads;
    return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace ember::runtime
