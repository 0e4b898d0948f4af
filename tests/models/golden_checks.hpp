// The golden-logit and activation-reference checks shared by the route suites
// (golden_test.cpp: reference route vs MODEL.f32.golden.json; fast_golden_test.cpp: fast
// route vs MODEL.golden.json). For one fixture model and every golden prompt:
//  - the log-sum-exp and the logits at the golden's 40 top ids at every prompt position;
//  - the hidden state after every layer (l_out-N, the after_layer hook) and after the
//    final norm (result_norm, the before_logits hook), every position;
//  - every greedy step (through runtime::generate and the KV cache): the token, its logit
//    and its margin, up to the first step whose golden margin is below
//    2 x tol x the largest |logit| of that step, where two correct engines may disagree.
// Errors are relative to the largest |value| of the tensor (hidden states) or of the
// position (logits). Each model's largest errors are printed.
#pragma once

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "capture_hooks.hpp"
#include "gguf/gguf_file.hpp"
#include "models/model.hpp"
#include "runtime/generate.hpp"
#include "runtime/session.hpp"
#include "support/fixtures.hpp"
#include "support/golden.hpp"

namespace ember::test {
namespace golden_checks {

struct Errors {
    double logits = 0, lse = 0, hidden = 0, result_norm = 0, greedy_logit = 0, greedy_margin = 0;
    std::string steps_compared;  // per prompt: "24/24"
};

inline double max_abs(const float* v, std::size_t n) {
    double m = 0;
    for (std::size_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(std::abs(v[i])));
    return m;
}

inline double log_sum_exp(const float* v, std::size_t n) {
    const double top = *std::max_element(v, v + n);
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(v[i]) - top);
    return top + std::log(sum);
}

inline void check_positions(const GoldenPrompt& p, kernels::ConstRows logits, double tol, std::size_t prompt_index, Errors& e) {
    REQUIRE(p.positions.size() == logits.rows);
    for (std::size_t t = 0; t < logits.rows; ++t) {
        const float* row = logits.row(t);
        const double scale = max_abs(row, logits.cols);
        const double lse_error = std::abs(log_sum_exp(row, logits.cols) - p.positions[t].lse) / scale;
        e.lse = std::max(e.lse, lse_error);
        CHECK_MESSAGE(lse_error <= tol, "prompt " << prompt_index << " position " << t << ": lse error " << lse_error);
        for (const auto& [id, expected] : p.positions[t].top) {
            const double error = std::abs(row[id] - expected) / scale;
            e.logits = std::max(e.logits, error);
            CHECK_MESSAGE(error <= tol, "prompt " << prompt_index << " position " << t << " token " << id << ": logit "
                                                  << row[id] << " vs " << expected << " (relative error " << error << ")");
        }
    }
}

inline double compare_hidden(const GoldenTensor& golden, const CapturedTensor& ours, const std::string& what) {
    REQUIRE_MESSAGE(ours.rows == golden.rows, what << ": " << ours.rows << " rows, golden " << golden.rows);
    REQUIRE_MESSAGE(ours.cols == golden.cols, what << ": " << ours.cols << " cols, golden " << golden.cols);
    const double scale = max_abs(golden.values.data(), golden.values.size());
    double worst = 0;
    for (std::size_t i = 0; i < golden.values.size(); ++i) {
        worst = std::max(worst, std::abs(static_cast<double>(ours.values[i]) - golden.values[i]) / scale);
    }
    return worst;
}

inline void check_hidden(const GoldenPrompt& p, const CaptureHooks& hooks, const models::ModelConfig& c, double tol,
                  std::size_t prompt_index, Errors& e) {
    for (std::uint32_t l = 0; l < c.n_layers; ++l) {
        const std::string name = fmt::format("l_out-{}", l);
        REQUIRE_MESSAGE(p.hidden.count(name), "the golden has no " << name);
        const double error = compare_hidden(p.hidden.at(name), hooks.prefill.after_layer[l], name);
        e.hidden = std::max(e.hidden, error);
        CHECK_MESSAGE(error <= tol, "prompt " << prompt_index << " " << name << ": relative error " << error);
    }
    const double error = compare_hidden(p.hidden.at("result_norm"), hooks.prefill.before_logits, "result_norm");
    e.result_norm = std::max(e.result_norm, error);
    CHECK_MESSAGE(error <= tol, "prompt " << prompt_index << " result_norm: relative error " << error);
}

// The hook sites themselves: before_layer(l+1) is after_layer(l), and for Llama and Qwen3
// after_layer = (before_layer + after_attention) + after_mlp, bit for bit.
inline void check_hook_identities(const CaptureHooks& hooks, const models::ModelConfig& c) {
    for (std::uint32_t l = 0; l + 1 < c.n_layers; ++l) {
        CHECK_MESSAGE(hooks.prefill.before_layer[l + 1].values == hooks.prefill.after_layer[l].values, "before_layer(" << l + 1 << ")");
    }
    if (c.family == models::Family::Gemma4) return;
    for (std::uint32_t l = 0; l < c.n_layers; ++l) {
        const auto& b = hooks.prefill.before_layer[l].values;
        std::size_t mismatches = 0;
        for (std::size_t i = 0; i < b.size(); ++i) {
            const float sum = (b[i] + hooks.prefill.after_attention[l].values[i]) + hooks.prefill.after_mlp[l].values[i];
            if (sum != hooks.prefill.after_layer[l].values[i]) ++mismatches;
        }
        CHECK_MESSAGE(mismatches == 0, "layer " << l << ": after_layer != before_layer + after_attention + after_mlp");
    }
}

inline void check_greedy(const GoldenPrompt& p, runtime::Session& session, double tol, std::size_t prompt_index, Errors& e) {
    CaptureHooks hooks(session.model().config().n_layers);
    runtime::GenerationOptions options;
    options.max_tokens = p.greedy.size();
    const runtime::GenerationResult result = runtime::generate(session, p.tokens, options, {}, {}, &hooks);
    REQUIRE(result.steps.size() == p.greedy.size());
    REQUIRE(hooks.max_abs_logit.size() == p.greedy.size());  // 1 prefill + N-1 decode evaluations

    std::size_t compared = 0;
    for (std::size_t i = 0; i < p.greedy.size(); ++i) {
        const GoldenStep& golden = p.greedy[i];
        const double scale = hooks.max_abs_logit[i];
        if (golden.margin < 2 * tol * scale) break;  // a near tie: either token is right
        const runtime::GenerationStep& ours = result.steps[i];
        REQUIRE_MESSAGE(ours.token == golden.token,
                        "prompt " << prompt_index << " greedy step " << i << ": token " << ours.token << ", golden " << golden.token);
        const double logit_error = std::abs(ours.logit - golden.logit) / scale;
        const double margin_error = std::abs(ours.margin - golden.margin) / scale;
        e.greedy_logit = std::max(e.greedy_logit, logit_error);
        e.greedy_margin = std::max(e.greedy_margin, margin_error);
        CHECK_MESSAGE(logit_error <= tol, "prompt " << prompt_index << " greedy step " << i << ": logit error " << logit_error);
        CHECK_MESSAGE(margin_error <= tol, "prompt " << prompt_index << " greedy step " << i << ": margin error " << margin_error);
        ++compared;
    }
    e.steps_compared += fmt::format("{}{}/{}", e.steps_compared.empty() ? "" : " ", compared, p.greedy.size());

    // Decode evaluations: one token each, at consecutive positions, steps 1, 2, ...
    for (std::size_t i = 1; i < hooks.evaluations.size(); ++i) {
        const hooks::EvalInfo& eval = hooks.evaluations[i];
        CHECK(eval.phase == hooks::Phase::Decode);
        CHECK(eval.n_tokens == 1);
        CHECK(eval.start_position == p.tokens.size() + i - 1);
        CHECK(eval.step == i);
    }
}

// Every golden prompt of one fixture model on `route`, against `golden_file`, within `tol`.
inline void check_model(const std::string& name, runtime::Route route, const std::filesystem::path& golden_file, double tol) {
    const gguf::File file = gguf::File::open(fixture_path("models/" + name + ".gguf"));
    const auto model = models::load_model(file);
    const models::ModelConfig& c = model->config();
    const Golden golden = load_golden(golden_file);
    REQUIRE(golden.n_vocab == c.n_vocab);

    Errors e;
    for (std::size_t i = 0; i < golden.prompts.size(); ++i) {
        const GoldenPrompt& p = golden.prompts[i];
        runtime::SessionOptions options;
        options.route = route;
        options.threads = 2;
        options.max_batch = p.tokens.size();
        options.all_logits = true;
        runtime::Session session(*model, options);

        CaptureHooks hooks(c.n_layers);
        const kernels::ConstRows logits = session.prefill(p.tokens, true, &hooks);
        check_positions(p, logits, tol, i, e);
        check_hidden(p, hooks, c, tol, i, e);
        check_hook_identities(hooks, c);
        check_greedy(p, session, tol, i, e);
    }
    MESSAGE(fmt::format("{} ({} route, tol {:g}): largest relative errors: logits {:.2e}, lse {:.2e}, l_out {:.2e}, result_norm "
                        "{:.2e}, greedy logit {:.2e}, greedy margin {:.2e}; greedy steps compared {}",
                        name, runtime::route_name(route), tol, e.logits, e.lse, e.hidden, e.result_norm, e.greedy_logit, e.greedy_margin,
                        e.steps_compared));
}

}  // namespace golden_checks
}  // namespace ember::test
