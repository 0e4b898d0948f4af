#include "kernels/fast/thread_pool.hpp"

#include <oneapi/tbb/info.h>

#include <fmt/format.h>

#include "common/error.hpp"

namespace ember::kernels::fast {

ThreadPool::ThreadPool(int threads) : threads_(threads) {
    if (threads < 1 || threads > 1024) throw Error(fmt::format("thread count {} is out of range (1..1024)", threads));
    if (threads > oneapi::tbb::info::default_concurrency()) {
        limit_ = std::make_unique<oneapi::tbb::global_control>(oneapi::tbb::global_control::max_allowed_parallelism,
                                                               static_cast<std::size_t>(threads));
    }
    arena_ = std::make_unique<oneapi::tbb::task_arena>(threads);
    arena_->initialize();
}

}  // namespace ember::kernels::fast
