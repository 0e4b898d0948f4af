// Rung: activation-reference. The gradient forward (attribution::GradientModel) computes
// the model Ember runs: at every tensor stage of every layer, and the logits, its
// activations equal the reference route's hook captures (a Session on the reference
// route with an ActiveHooks copying each stage), on every fixture model of every family.
// The gradients of tests/attribution/test_autograd.py are therefore gradients of the
// reference route itself.
//
// Rung: interventions. The gradient predicts what an edit does on the real reference
// route: a central finite difference of the metric, (M(a + h d) - M(a - h d)) / 2h, with
// the edit made by a hook inside a Session (not by the gradient code), matches grad . d
// within 1e-3 relative, at after_layer, after_attention, mlp_activation and head_outputs,
// on Llama and Qwen3. Not on Gemma 4: its route's GELU is llama.cpp's F16 table, so its
// metric is a step function at F16 resolution and a finite difference measures the steps
// (about 2% off at h = 1e-2 on the fixtures); its gradients, those of the smooth GELU the
// table samples, are checked against autograd (test_autograd.py).
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "attribution/gradient_model.hpp"
#include "attribution/metric.hpp"
#include "record/manifest.hpp"
#include "runtime/loaded_model.hpp"
#include "runtime/session.hpp"
#include "support/fixtures.hpp"

namespace ember {
namespace {

using attribution::GradientModel;
using hooks::Stage;

// Every tensor stage's tensor, by (stage, layer).
class CaptureAll final : public hooks::ActiveHooks {
public:
    void stage(Stage stage, const hooks::EvalInfo&, std::uint32_t layer, hooks::TensorView t) override {
        captured[{stage, layer}].assign(t.data, t.data + t.rows * t.cols);
    }
    std::map<std::pair<Stage, std::uint32_t>, std::vector<float>> captured;
};

// Adds `scale * direction` to one stage's tensor of one layer.
class AddDirection final : public hooks::ActiveHooks {
public:
    AddDirection(Stage s, std::uint32_t l, const std::vector<float>& d, float h) : stage_(s), layer_(l), d_(d), h_(h) {}
    void stage(Stage stage, const hooks::EvalInfo&, std::uint32_t layer, hooks::TensorView t) override {
        if (stage != stage_ || layer != layer_) return;
        REQUIRE(t.rows * t.cols == d_.size());
        for (std::size_t i = 0; i < d_.size(); ++i) t.data[i] += h_ * d_[i];
    }
    bool wants(Stage stage) const override { return stage == stage_; }

private:
    Stage stage_;
    std::uint32_t layer_;
    const std::vector<float>& d_;
    float h_;
};

double max_abs_difference(kernels::ConstRows a, const std::vector<float>& b) {
    REQUIRE(a.rows * a.cols == b.size());
    double worst = 0;
    for (std::size_t i = 0; i < b.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(a.data[i]) - b[i]));
    return worst;
}

kernels::ConstRows tape_tensor(const attribution::Tape& tape, Stage s, std::uint32_t l) {
    const attribution::LayerTape& lt = tape.layers[l];
    switch (s) {
        case Stage::BeforeLayer: return lt.x_in.view();
        case Stage::AttentionPattern: return lt.pattern.view();
        case Stage::HeadOutputs: return lt.heads.view();
        case Stage::AfterAttention: return lt.attn_out.view();
        case Stage::ResidualMid: return lt.x_mid.view();
        case Stage::MlpInput: return lt.mlp_in.view();
        case Stage::MlpActivation: return lt.act.view();
        case Stage::AfterMlp: return lt.mlp_out.view();
        case Stage::AfterLayer: return lt.x_out.view();
        default: FAIL("not a layer stage"); return {};
    }
}

runtime::SessionOptions reference_options(std::size_t tokens) {
    runtime::SessionOptions o;
    o.route = runtime::Route::Reference;
    o.threads = 2;
    o.max_batch = tokens;
    o.all_logits = true;
    return o;
}

TEST_CASE("the gradient forward reproduces the reference route's activations bit for bit, every stage and family") {
    for (const char* name : test::kFixtureModels) {
        const runtime::LoadedModel model(test::fixture_path(std::string("models/") + name + ".gguf"), std::nullopt);
        const GradientModel gm(model.file, model.model->config());
        for (const char* prompt : {"Once upon a time, there was a little girl", "كتب الطالب الدرس في المكتبة"}) {
            const std::string model_name = name, prompt_text = prompt;
            CAPTURE(model_name);
            CAPTURE(prompt_text);
            const auto encoded = runtime::encode_prompt(model.tokenizer, prompt, config::AddBos::Auto);
            const std::size_t T = encoded.ids.size();
            runtime::Session session(*model.model, reference_options(T));
            CaptureAll capture;
            session.prefill(encoded.ids, true, &capture);

            std::vector<std::size_t> rows(T);
            for (std::size_t t = 0; t < T; ++t) rows[t] = t;
            const attribution::Tape tape = gm.forward(encoded.ids, rows, {}, {}, attribution::TapeKeeps::Everything);
            std::size_t compared = 0;
            for (const auto& [key, values] : capture.captured) {
                const auto [stage, layer] = key;
                CAPTURE(hooks::stage_name(stage));
                CAPTURE(layer);
                kernels::ConstRows mine = stage == Stage::BeforeLogits  ? tape.normed.view()
                                          : stage == Stage::AfterLogits ? tape.logits.view()
                                                                        : tape_tensor(tape, stage, layer);
                CHECK(max_abs_difference(mine, values) == 0.0);  // bit-equal (the same kernels in the same order)
                ++compared;
            }
            CHECK(compared == 9 * model.model->config().n_layers + 2);  // the 9 layer stages, before/after_logits
        }
    }
}

// M(edit) on the real reference route: the summed log-probability of the target rows.
double route_metric(const runtime::LoadedModel& model, std::span<const std::int32_t> ids, const attribution::Metric& m,
                    hooks::ActiveHooks* hooks) {
    runtime::Session session(*model.model, reference_options(ids.size()));
    const kernels::ConstRows logits = session.prefill(ids, true, hooks);
    std::vector<float> rows;
    for (const attribution::MetricTerm& t : m.terms) rows.insert(rows.end(), logits.row(t.row), logits.row(t.row) + logits.cols);
    return m.evaluate(kernels::ConstRows(rows.data(), m.terms.size(), logits.cols), nullptr);
}

TEST_CASE("central finite differences on the reference route agree with the gradient, every family") {
    struct Probe {
        const char* model;
        Stage stage;
        std::uint32_t layer;
    };
    const Probe probes[] = {
        {"stories260K", Stage::AfterLayer, 2},         {"stories260K", Stage::MlpActivation, 0},
        {"synth-qwen3-q8_0", Stage::AfterAttention, 1}, {"synth-qwen3-q8_0", Stage::HeadOutputs, 0},
        {"synth-llama3-q8_0", Stage::AfterLayer, 0},    {"synth-llama3-q8_0", Stage::MlpActivation, 1},
    };
    for (const Probe& p : probes) {
        const std::string model_name = p.model;
        CAPTURE(model_name);
        CAPTURE(hooks::stage_name(p.stage));
        const runtime::LoadedModel model(test::fixture_path(std::string("models/") + p.model + ".gguf"), std::nullopt);
        const GradientModel gm(model.file, model.model->config());
        const auto encoded = runtime::encode_prompt(model.tokenizer, "كتب الطالب الدرس في المكتبة", config::AddBos::Auto);
        const std::size_t T = encoded.ids.size();
        attribution::Metric metric{attribution::MetricKind::LogProb, {}};
        for (std::size_t j = T - 3; j < T; ++j) metric.terms.push_back({j - 1, encoded.ids[j], -1});

        const attribution::Tape tape = gm.forward(encoded.ids, metric.rows());
        attribution::Matrix dlogits;
        metric.evaluate(tape.logits.view(), &dlogits);
        std::vector<float> grad;
        gm.backward(tape, dlogits.view(), [&](const attribution::Site& s) {
            if (s.stage == p.stage && s.layer == p.layer) grad.assign(s.gradient.data, s.gradient.data + s.gradient.rows * s.gradient.cols);
        });
        REQUIRE(!grad.empty());
        // The direction: the gradient itself, unit length (the largest change per step).
        double norm = 0;
        for (float g : grad) norm += static_cast<double>(g) * g;
        norm = std::sqrt(norm);
        REQUIRE(norm > 0);
        std::vector<float> d(grad.size());
        for (std::size_t i = 0; i < grad.size(); ++i) d[i] = static_cast<float>(grad[i] / norm);
        const double predicted = norm;  // grad . d
        // h: small enough for the quadratic term, large enough for F32 rounding of M.
        const float h = 1e-2f;
        AddDirection plus(p.stage, p.layer, d, h), minus(p.stage, p.layer, d, -h);
        const double fd = (route_metric(model, encoded.ids, metric, &plus) - route_metric(model, encoded.ids, metric, &minus)) / (2.0 * h);
        CAPTURE(fd);
        CAPTURE(predicted);
        CHECK(std::abs(fd - predicted) <= 1e-3 * std::abs(predicted));
    }
}

}  // namespace
}  // namespace ember
