// Kernel micro-benchmark (not part of ctest): matrix-vector (decode) streaming rate in
// GB/s of weights and matrix-matrix (prefill) rate in GOPS (2 * rows * cols * tokens per
// product) for 1B-model-shaped layers, per weight type, for the process kernel set
// (EMBER_CPU picks another) and a given thread count.
//
//   ember_kernel_bench [--threads N] [--tokens T] [--types q8_0,f16,bf16,f32,q2_k,...]
//                      [--seconds S] [--shape ROWSxCOLS] [--no-gemm] [--no-gemv] [--no-ops]
//
// Decode streams weights from memory, not cache: each matrix-vector measurement cycles
// through enough copies of the weights to exceed any last-level cache (>= 256 MiB).
// Every product includes converting its F32 activations (quantizing for Q8_0).
// The ops section times attention (1B shape: 32 query / 8 KV heads of 64) for one
// decoded token at a few context lengths and for the whole prefill, and SwiGLU.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/fast/aligned_buffer.hpp"
#include "kernels/fast/attention.hpp"
#include "kernels/fast/row_ops.hpp"
#include "kernels/float16.hpp"
#include "kernels/fast/kernel_set.hpp"
#include "kernels/fast/matmul.hpp"
#include "kernels/fast/thread_pool.hpp"
#include "kernels/weight_format.hpp"

namespace fast = ember::kernels::fast;
using ember::gguf::GgmlType;

namespace {

struct Shape {
    const char* name;
    std::size_t rows, cols;
};

constexpr Shape kShapes[] = {
    {"attn_q/attn_output 2048x2048", 2048, 2048},
    {"ffn_gate/ffn_up 8192x2048", 8192, 2048},
    {"ffn_down 2048x8192", 2048, 8192},
    {"output (vocab) 128256x2048", 128256, 2048},
};

std::size_t row_bytes(GgmlType type, std::size_t cols) {
    const ember::kernels::WeightFormat& f = ember::kernels::weight_format(type);
    return ember::kernels::format_row_bytes(f.block_size, f.block_bytes, cols);
}

// Random weights with realistic magnitudes, `copies` times. The legacy and K-quant
// formats: random bytes per block, drawn again until the block dequantizes to finite
// values within +-1000 (the table's dequantizer judges, as in backend_ops_test).
fast::AlignedBuffer random_weights(GgmlType type, std::size_t rows, std::size_t cols, std::size_t copies) {
    const std::size_t bytes = row_bytes(type, cols) * rows;
    fast::AlignedBuffer buffer(bytes * copies);
    std::mt19937 rng(42);
    std::normal_distribution<float> value(0.0f, 0.02f);
    std::uniform_int_distribution<int> q(-127, 127);
    std::byte* p = buffer.data();
    const ember::kernels::WeightFormat& f = ember::kernels::weight_format(type);
    if (type == GgmlType::Q8_0) {
        auto* blocks = reinterpret_cast<fast::BlockQ8_0*>(p);
        for (std::size_t b = 0; b < rows * cols / 32; ++b) {
            blocks[b].d = ember::kernels::fp32_to_fp16(0.0005f + std::fabs(value(rng)) * 0.01f);
            for (auto& v : blocks[b].qs) v = static_cast<std::int8_t>(q(rng));
        }
    } else if (f.block_size > 1) {
        std::uniform_int_distribution<int> byte(0, 255);
        std::vector<float> values(f.block_size);
        for (std::size_t b = 0; b < rows * cols / f.block_size; ++b) {
            std::byte* block = p + b * f.block_bytes;
            for (bool ok = false; !ok;) {
                for (std::size_t i = 0; i < f.block_bytes; ++i) block[i] = static_cast<std::byte>(byte(rng));
                f.dequantize_row(block, values.data(), f.block_size);
                ok = std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v) && std::abs(v) <= 1000; });
            }
        }
    } else {
        for (std::size_t i = 0; i < rows * cols; ++i) {
            const float v = value(rng);
            if (type == GgmlType::F32) std::memcpy(p + 4 * i, &v, 4);
            else {
                const std::uint16_t h = type == GgmlType::F16 ? ember::kernels::fp32_to_fp16(v) : ember::kernels::fp32_to_bf16(v);
                std::memcpy(p + 2 * i, &h, 2);
            }
        }
    }
    for (std::size_t c = 1; c < copies; ++c) std::memcpy(p + c * bytes, p, bytes);
    return buffer;
}

using Clock = std::chrono::steady_clock;

// Median seconds per call of `run`, called repeatedly for about `seconds`.
template <typename Run>
double median_seconds(double seconds, Run run) {
    std::vector<double> times;
    const auto start = Clock::now();
    do {
        const auto t0 = Clock::now();
        run(times.size());
        times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    } while (std::chrono::duration<double>(Clock::now() - start).count() < seconds || times.size() < 5);
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    return times[times.size() / 2];
}

void bench_ops(const fast::KernelSet& kernels, fast::ThreadPool& pool, std::size_t n_tokens, double seconds) {
    const fast::AttentionShape shape{32, 8, 64, 0.125f, 0};
    const std::size_t width = 32 * 64, kv_width = 8 * 64, max_positions = 4096;
    std::mt19937 rng(3);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> q(n_tokens * width), out(n_tokens * width);
    for (auto& v : q) v = dist(rng);
    for (fast::KvType type : {fast::KvType::f32, fast::KvType::f16}) {
        const std::size_t element = type == fast::KvType::f32 ? 4 : 2;
        fast::AlignedBuffer keys(max_positions * kv_width * element), values(max_positions * kv_width * element);
        for (std::size_t i = 0; i < max_positions * kv_width; ++i) {
            const float k = dist(rng), v = dist(rng);
            if (type == fast::KvType::f32) {
                std::memcpy(keys.data() + 4 * i, &k, 4);
                std::memcpy(values.data() + 4 * i, &v, 4);
            } else {
                const std::uint16_t hk = ember::kernels::fp32_to_fp16(k), hv = ember::kernels::fp32_to_fp16(v);
                std::memcpy(keys.data() + 2 * i, &hk, 2);
                std::memcpy(values.data() + 2 * i, &hv, 2);
            }
        }
        const fast::KvCacheView kv{type, keys.data(), values.data(), kv_width * element, max_positions};
        fast::AlignedBuffer workspace(fast::attention_workspace_bytes(pool.threads(), shape, max_positions));
        const char* name = type == fast::KvType::f32 ? "F32 KV" : "F16 KV";
        for (std::size_t context : {192, 1024, 4096}) {
            const double s = median_seconds(seconds, [&](std::size_t) {
                fast::attention(kernels, pool, q.data(), width, 1, kv, context - 1, shape, out.data(), width, workspace.span());
            });
            fmt::print("attention decode, {}, context {:>5}: {:9.1f} us per layer\n", name, context, s * 1e6);
        }
        const double s = median_seconds(seconds, [&](std::size_t) {
            fast::attention(kernels, pool, q.data(), width, n_tokens, kv, 0, shape, out.data(), width, workspace.span());
        });
        fmt::print("attention prefill, {}, {} tokens: {:9.1f} us per layer\n", name, n_tokens, s * 1e6);
    }
    std::vector<float> gate(n_tokens * 8192), up(n_tokens * 8192), h(n_tokens * 8192);
    for (auto& v : gate) v = dist(rng);
    for (auto& v : up) v = dist(rng);
    for (std::size_t rows : {std::size_t{1}, n_tokens}) {
        const double s = median_seconds(seconds, [&](std::size_t) {
            fast::swiglu(kernels, pool, gate.data(), 8192, up.data(), 8192, h.data(), 8192, rows, 8192);
        });
        fmt::print("swiglu {} x 8192: {:9.1f} us\n", rows, s * 1e6);
    }
}

// A row of the weight-format table by its kernel suffix ("q8_0", "q2_k", ...).
GgmlType parse_type(const std::string& name) {
    for (const ember::kernels::WeightFormat& f : ember::kernels::weight_formats())
        if (f.kernel_suffix == name) return f.type;
    throw std::runtime_error("unknown type " + name);
}

}  // namespace

int main(int argc, char** argv) {
    int threads = 2;
    std::size_t n_tokens = 128;
    double seconds = 1.0;
    bool gemm = true, gemv = true, ops = true;
    Shape custom{};
    std::span<const Shape> shapes = kShapes;
    std::vector<GgmlType> types = {GgmlType::Q8_0, GgmlType::F16, GgmlType::BF16};
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) throw std::runtime_error(arg + " needs a value");
            return argv[++i];
        };
        if (arg == "--threads") threads = std::stoi(next());
        else if (arg == "--tokens") n_tokens = std::stoul(next());
        else if (arg == "--seconds") seconds = std::stod(next());
        else if (arg == "--no-gemm") gemm = false;
        else if (arg == "--no-gemv") gemv = false;
        else if (arg == "--no-ops") ops = false;
        else if (arg == "--shape") {  // ROWSxCOLS instead of the 1B shapes (e.g. for instruction counts)
            const std::string v = next();
            const std::size_t x = v.find('x');
            if (x == std::string::npos) throw std::runtime_error("--shape needs ROWSxCOLS");
            custom = {"custom", std::stoul(v.substr(0, x)), std::stoul(v.substr(x + 1))};
            shapes = {&custom, 1};
        }
        else if (arg == "--types") {
            types.clear();
            std::string list = next();
            for (std::size_t pos = 0; pos <= list.size();) {
                const std::size_t comma = std::min(list.find(',', pos), list.size());
                types.push_back(parse_type(list.substr(pos, comma - pos)));
                pos = comma + 1;
            }
        } else {
            fmt::print(stderr, "usage: ember_kernel_bench [--threads N] [--tokens T] [--types q8_0,f16,bf16,f32] "
                               "[--seconds S] [--shape ROWSxCOLS] [--no-gemm] [--no-gemv] [--no-ops]\n");
            return 2;
        }
    }

    const fast::KernelSet& kernels = fast::process_kernel_set();
    fast::ThreadPool pool(threads);
    fmt::print("kernel set {}, {} thread(s), prefill {} tokens\n", kernels.description, threads, n_tokens);
    fmt::print("{:<6} {:<30} {:>12} {:>10} {:>14} {:>10}\n", "type", "shape", "GEMV us", "GB/s", "GEMM ms", "GOPS");

    for (GgmlType type : types) {
        for (const Shape& shape : shapes) {
            const std::size_t matrix_bytes = row_bytes(type, shape.cols) * shape.rows;
            const std::size_t copies = std::max<std::size_t>(1, (256u << 20) / matrix_bytes + 1);
            const auto weights = random_weights(type, shape.rows, shape.cols, gemv ? copies : 1);
            std::mt19937 rng(7);
            std::normal_distribution<float> act(0.0f, 1.0f);
            std::vector<float> x(n_tokens * shape.cols);
            for (auto& v : x) v = act(rng);
            std::vector<float> y(n_tokens * shape.rows);
            fast::AlignedBuffer workspace(fast::activation_workspace_bytes(type, shape.cols, n_tokens));
            auto matrix = [&](std::size_t copy) {
                return ember::kernels::WeightMatrix{type, weights.data() + (copy % copies) * matrix_bytes, shape.rows,
                                                    shape.cols, row_bytes(type, shape.cols)};
            };

            std::string gemv_us = "-", gemv_rate = "-", gemm_ms = "-", gemm_rate = "-";
            if (gemv) {
                const double s = median_seconds(seconds, [&](std::size_t i) {
                    fast::matmul(kernels, pool, matrix(i), x.data(), 1, y.data(), workspace.span());
                });
                gemv_us = fmt::format("{:.1f}", s * 1e6);
                gemv_rate = fmt::format("{:.1f}", static_cast<double>(matrix_bytes) / s / 1e9);
            }
            const bool vocab = shape.rows > 100000;
            if (gemm && !vocab) {  // prefill needs the LM head for the last token only
                const double s = median_seconds(seconds, [&](std::size_t) {
                    fast::matmul(kernels, pool, matrix(0), x.data(), n_tokens, y.data(), workspace.span());
                });
                gemm_ms = fmt::format("{:.2f}", s * 1e3);
                gemm_rate = fmt::format("{:.1f}", 2.0 * shape.rows * shape.cols * n_tokens / s / 1e9);
            }
            fmt::print("{:<6} {:<30} {:>12} {:>10} {:>14} {:>10}\n", ember::gguf::type_name(type), shape.name, gemv_us,
                       gemv_rate, gemm_ms, gemm_rate);
            std::fflush(stdout);
        }
    }
    if (ops) bench_ops(kernels, pool, n_tokens, seconds);
    return 0;
}
