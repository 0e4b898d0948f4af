// What the block-scale check adds to a model file's first load (not part of ctest):
// hashing the mapped file alone against hashing it with the check fused into the same
// pass (models::hash_and_check_block_scales_uncached), alternately, ROUNDS times each, in
// one mapping (its pages are faulted in by the warm-up pass, so neither side pays for
// them: the ratio is the check's cost over the bare hash, a bound on its share of a
// real first load, which also reads the file and builds the model).
//
//   ember_load_check_bench MODEL.gguf [ROUNDS=7]
#include <fmt/format.h>

#include <algorithm>
#include <time.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/sha256_file.hpp"
#include "gguf/gguf_file.hpp"
#include "models/block_scales.hpp"

namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double thread_cpu_seconds() {
    timespec t{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// The pass's CPU time on this thread: the machine's other load moves it far less than
// the wall time (benchmark machines here are shared).
template <typename Pass>
double seconds(Pass&& pass, std::string& digest) {
    const double start = thread_cpu_seconds();
    digest = pass();
    return thread_cpu_seconds() - start;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        fmt::print(stderr, "usage: ember_load_check_bench MODEL.gguf [ROUNDS=7]\n");
        return 2;
    }
    const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
    try {
        const ember::gguf::File file = ember::gguf::File::open(argv[1]);
        const auto hash_only = [&] { return ember::sha256_hex(file.mapping()->bytes()); };
        const auto hash_and_check = [&] { return ember::models::hash_and_check_block_scales_uncached(file); };
        std::string a, b;
        seconds(hash_only, a);  // warm-up: faults every page in
        std::vector<double> plain, fused;
        for (int i = 0; i < rounds; ++i) {
            plain.push_back(seconds(hash_only, a));
            fused.push_back(seconds(hash_and_check, b));
            if (a != b) throw std::runtime_error("the two passes disagree on the digest");
        }
        const double bytes = static_cast<double>(file.mapping()->bytes().size());
        fmt::print("file: {} ({:.0f} MB)\n", argv[1], bytes / 1e6);
        fmt::print("hash only       rounds (CPU s): {:.4f}\n", fmt::join(plain, " "));
        fmt::print("hash and check  rounds (CPU s): {:.4f}\n", fmt::join(fused, " "));
        const double p = median(plain), f = median(fused);
        fmt::print("medians: hash only {:.4f} s ({:.0f} MB/s), hash and check {:.4f} s: the check adds {:+.2f}%\n", p,
                   bytes / 1e6 / p, f, 100 * (f / p - 1));
        // Per round, fused over the plain pass just before it (pairs share the machine's load).
        std::vector<double> ratios;
        for (int i = 0; i < rounds; ++i) ratios.push_back(fused[i] / plain[i]);
        fmt::print("median of per-round ratios: {:+.2f}%\n", 100 * (median(ratios) - 1));
        fmt::print("digest: {}\n", a);
    } catch (const std::exception& e) {
        fmt::print(stderr, "error: {}\n", e.what());
        return 1;
    }
}
