// Exactly N threads for the fast kernels, in one of two ways:
//   ThreadPool(N)           owns a oneTBB task_arena of concurrency N (the calling thread
//                           plus N - 1 workers); with N = 1 nothing goes through oneTBB.
//                           If N exceeds oneTBB's default, a tbb::global_control owned by
//                           the pool raises the process limit while the pool lives.
//   ThreadPool::callers()   runs in the task_arena of whoever calls it (a
//                           runtime::Session runs evaluations in an arena of exactly
//                           --threads threads); threads() is that arena's concurrency.
#pragma once

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

#include <cstddef>
#include <memory>

namespace ember::kernels::fast {

class ThreadPool {
public:
    explicit ThreadPool(int threads);  // ember::Error unless 1 <= threads <= 1024
    static ThreadPool callers() { return ThreadPool(); }

    ThreadPool(ThreadPool&&) = default;
    ThreadPool& operator=(ThreadPool&&) = default;

    int threads() const { return arena_ ? threads_ : oneapi::tbb::this_task_arena::max_concurrency(); }

    // Calls body(begin, end) on disjoint chunks covering [0, n), each at most `grain`
    // long, possibly in parallel; returns when all are done. Chunks are handed out
    // dynamically, so which thread runs which chunk varies; callers make each chunk's
    // result independent of that.
    template <typename Body>
    void for_chunks(std::size_t n, std::size_t grain, const Body& body) {
        for_chunks_indexed(n, grain, [&](std::size_t begin, std::size_t end, int) { body(begin, end); });
    }

    // As for_chunks, with body(begin, end, worker): worker in [0, threads()) is the
    // thread running the chunk, for per-thread scratch space.
    template <typename Body>
    void for_chunks_indexed(std::size_t n, std::size_t grain, const Body& body) {
        if (n == 0) return;
        if (n <= grain || threads() == 1) {
            body(std::size_t{0}, n, 0);
            return;
        }
        auto run = [&] {
            oneapi::tbb::parallel_for(
                oneapi::tbb::blocked_range<std::size_t>(0, n, grain),
                [&](const oneapi::tbb::blocked_range<std::size_t>& range) {
                    body(range.begin(), range.end(), oneapi::tbb::this_task_arena::current_thread_index());
                },
                oneapi::tbb::simple_partitioner());
        };
        if (arena_) arena_->execute(run);
        else run();
    }

private:
    ThreadPool() = default;

    int threads_ = 1;
    std::unique_ptr<oneapi::tbb::global_control> limit_;
    std::unique_ptr<oneapi::tbb::task_arena> arena_;
};

}  // namespace ember::kernels::fast
