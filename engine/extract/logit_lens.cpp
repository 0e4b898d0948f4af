#include "extract/logit_lens.hpp"

#include <fmt/format.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/error.hpp"

namespace ember::extract {

void top_k(const float* logits, std::size_t n_vocab, std::size_t k, std::int32_t* ids, float* values) {
    std::vector<std::int32_t> order(n_vocab);
    std::iota(order.begin(), order.end(), 0);
    const auto better = [logits](std::int32_t a, std::int32_t b) {
        const float x = logits[a], y = logits[b];
        if (std::isnan(x) != std::isnan(y)) return std::isnan(y);
        if (x != y && !std::isnan(x)) return x > y;
        return a < b;
    };
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), better);
    for (std::size_t i = 0; i < k; ++i) {
        ids[i] = order[i];
        values[i] = logits[order[i]];
    }
}

std::vector<LensLayer> logit_lens(const models::Model& model, runtime::Route route, std::size_t threads,
                                  const std::vector<Capture>& sources, std::size_t k) {
    const models::ModelConfig& c = model.config();
    if (k > c.n_vocab)
        throw Error(fmt::format("output.logit_lens = {} is larger than the vocabulary ({} tokens)", k, c.n_vocab));
    const auto backend = runtime::make_backend(route);
    kernels::Ops ops(*backend);  // no observer: the lens is not part of the traced run
    tbb::task_arena arena(static_cast<int>(std::max<std::size_t>(threads, 1)));

    std::vector<LensLayer> out;
    std::vector<float> normed;
    std::vector<float> logits;
    for (const Capture& source : sources) {
        const std::size_t rows = source.positions.size();
        normed.resize(rows * c.n_embd);
        logits.resize(rows * c.n_vocab);
        arena.execute([&] {
            backend->reserve({.max_tokens = std::max<std::size_t>(rows, 1), .max_matmul_cols = c.n_embd});
            model.unembed(ops, kernels::ConstRows(source.values.data(), rows, c.n_embd),
                          kernels::Rows(normed.data(), rows, c.n_embd), kernels::Rows(logits.data(), rows, c.n_vocab));
        });
        LensLayer lens;
        lens.layer = source.layer.value_or(0);
        lens.positions = source.positions;
        lens.k = k;
        lens.ids.resize(rows * k);
        lens.logits.resize(rows * k);
        for (std::size_t r = 0; r < rows; ++r)
            top_k(logits.data() + r * c.n_vocab, c.n_vocab, k, lens.ids.data() + r * k, lens.logits.data() + r * k);
        out.push_back(std::move(lens));
    }
    return out;
}

}  // namespace ember::extract
