// A stand-in for the engine's forward pass and generation loop, for driving the
// ExperimentRunner without a model. The synthetic "model" computes like a residual
// transformer so interventions propagate:
//   hidden = embedding(position, seed)                         [rows, n_embd]
//   per layer l: before_layer(hidden)
//                attn = 0.5 * hidden + 0.01 (l+1);  after_attention(attn);  hidden += attn
//                mlp = 0.25 * hidden - 0.02 (l+1);  after_mlp(mlp);         hidden += mlp
//                after_layer(hidden)
//   normed = 2 * hidden[last row];  before_logits(normed)      [1, n_embd]
//   logits[v] = sum_c normed[c] * (v + 1) * (-1)^c;  after_logits(logits)   [1, n_vocab]
// generate() drives a whole run the way `ember run` must: on_model_loaded,
// before_prefill, prefill, N-1 decode steps, on_generation_complete, and notify_error
// on any exception before it propagates.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "experiments/experiment_runner.hpp"
#include "hooks/hooks.hpp"
#include "models/model_config.hpp"
#include "support/temp_dir.hpp"

namespace ember::test {

struct SyntheticModel {
    std::uint32_t n_layers = 3;
    std::uint32_t n_embd = 4;
    std::uint32_t n_vocab = 6;

    models::ModelConfig config() const {
        models::ModelConfig c;
        c.family = models::Family::Qwen3;
        c.name = "synthetic";
        c.n_layers = n_layers;
        c.n_embd = n_embd;
        c.n_vocab = n_vocab;
        return c;
    }
};

// What one evaluation computed, each tensor as it was after every experiment's writes.
struct Trace {
    std::vector<std::vector<float>> before_layer, after_attention, after_mlp, after_layer;  // per layer
    std::vector<float> before_logits, logits;
};

inline hooks::EvalInfo prefill_eval(std::size_t prompt_tokens) {
    hooks::EvalInfo e;
    e.phase = hooks::Phase::Prefill;
    e.start_position = 0;
    e.n_tokens = prompt_tokens;
    e.step = 0;
    return e;
}

inline hooks::EvalInfo decode_eval(std::size_t prompt_tokens, std::size_t step) {
    hooks::EvalInfo e;
    e.phase = hooks::Phase::Decode;
    e.start_position = prompt_tokens + step - 1;
    e.n_tokens = 1;
    e.step = step;
    return e;
}

inline hooks::TensorView view(std::vector<float>& v, std::size_t rows, std::size_t cols) {
    return hooks::TensorView{v.data(), rows, cols};
}

// `seed` shifts the embedding, standing for a different prompt.
inline Trace forward(hooks::ActiveHooks& hooks, const SyntheticModel& m, const hooks::EvalInfo& eval, float seed = 0) {
    const std::size_t rows = eval.n_tokens;
    const std::size_t d = m.n_embd;
    std::vector<float> hidden(rows * d);
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < d; ++c)
            hidden[r * d + c] = seed * static_cast<float>(c + 1) + 0.5f * static_cast<float>(eval.start_position + r) +
                                0.125f * static_cast<float>(c);
    Trace t;
    for (std::uint32_t l = 0; l < m.n_layers; ++l) {
        hooks.before_layer(eval, l, view(hidden, rows, d));
        t.before_layer.push_back(hidden);
        std::vector<float> attn(rows * d);
        for (std::size_t i = 0; i < attn.size(); ++i) attn[i] = 0.5f * hidden[i] + 0.01f * static_cast<float>(l + 1);
        hooks.after_attention(eval, l, view(attn, rows, d));
        t.after_attention.push_back(attn);
        for (std::size_t i = 0; i < attn.size(); ++i) hidden[i] += attn[i];
        std::vector<float> mlp(rows * d);
        for (std::size_t i = 0; i < mlp.size(); ++i) mlp[i] = 0.25f * hidden[i] - 0.02f * static_cast<float>(l + 1);
        hooks.after_mlp(eval, l, view(mlp, rows, d));
        t.after_mlp.push_back(mlp);
        for (std::size_t i = 0; i < mlp.size(); ++i) hidden[i] += mlp[i];
        hooks.after_layer(eval, l, view(hidden, rows, d));
        t.after_layer.push_back(hidden);
    }
    std::vector<float> normed(hidden.end() - static_cast<std::ptrdiff_t>(d), hidden.end());
    for (float& v : normed) v *= 2.0f;
    hooks.before_logits(eval, view(normed, 1, d));
    t.before_logits = normed;
    std::vector<float> logits(m.n_vocab, 0.0f);
    for (std::size_t v = 0; v < m.n_vocab; ++v)
        for (std::size_t c = 0; c < d; ++c)
            logits[v] += normed[c] * static_cast<float>(v + 1) * (c % 2 ? -1.0f : 1.0f);
    hooks.after_logits(eval, view(logits, 1, m.n_vocab));
    t.logits = logits;
    return t;
}

// A whole run generating `generated` tokens: one prefill and generated-1 decode steps.
inline std::vector<Trace> generate(experiments::ExperimentRunner& runner, const SyntheticModel& m,
                                   std::size_t prompt_tokens, std::size_t generated, float seed = 0) {
    std::vector<Trace> traces;
    try {
        runner.on_model_loaded(m.config());
        const auto prefill = prefill_eval(prompt_tokens);
        runner.before_prefill(prefill);
        traces.push_back(forward(runner, m, prefill, seed));
        for (std::size_t step = 1; step < generated; ++step)
            traces.push_back(forward(runner, m, decode_eval(prompt_tokens, step), seed));
        runner.on_generation_complete(generated, experiments::StopReason::MaxTokens);
    } catch (const std::exception& e) {
        runner.notify_error(e.what());
        throw;
    }
    return traces;
}

inline experiments::RunInfo test_run_info(std::size_t prompt_tokens, const std::filesystem::path& output_dir = {}) {
    experiments::RunInfo r;
    r.run_id = "test-run";
    r.output_dir = output_dir.string();
    r.model_path = "/models/synthetic.gguf";
    r.model_sha256 = std::string(64, 'a');
    r.route = "reference";
    r.config_hash = std::string(64, 'c');
    for (std::size_t i = 0; i < prompt_tokens; ++i) r.prompt_token_ids.push_back(static_cast<std::uint32_t>(100 + i));
    return r;
}

inline experiments::ExperimentSpec spec(const std::filesystem::path& plugin, std::string config_json = "{}",
                                        const std::filesystem::path& base_dir = {}) {
    return experiments::ExperimentSpec{plugin, std::move(config_json), base_dir, "test"};
}

inline std::filesystem::path test_plugin(const std::string& name) {
    return std::filesystem::path(EMBER_TEST_PLUGIN_DIR) / ("lib" + name + ".so");
}
inline std::filesystem::path builtin_plugin(const std::string& name) {
    return std::filesystem::path(EMBER_BUILTIN_PLUGIN_DIR) / ("lib" + name + ".so");
}

// Collects what experiments log, one line per call.
struct LogLines {
    std::vector<std::string> lines;
    experiments::LogSink sink() {
        return [this](experiments::LogLevel, std::string_view, std::string_view message) {
            lines.emplace_back(message);
        };
    }
    std::vector<std::string> starting_with(const std::string& prefix) const {
        std::vector<std::string> out;
        for (const auto& l : lines)
            if (l.rfind(prefix, 0) == 0) out.push_back(l);
        return out;
    }
    bool contains(const std::string& text) const {
        for (const auto& l : lines)
            if (l.find(text) != std::string::npos) return true;
        return false;
    }
};

}  // namespace ember::test
