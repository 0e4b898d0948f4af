// Rung: interventions. The gradient at an SAE's features (the sae_features site of
// attribution/sae_gradient.hpp: out_scale · W_dec[j] · dM/dsite) predicts what editing the
// features does on the real reference route, where features::SaeSplicer splices the edit
// into the site: a central finite difference of the metric along the gradient's direction,
// (M(f + h d) - M(f - h d)) / 2h with the features edited by a hook behind the splicer,
// matches grad . d within 1e-3 relative, on Llama (stories260K) and Qwen3, with and
// without an output scale (a scaling factor: out_scale = 1 / factor), and for an MLP
// transcoder (mlp_input 1 to after_mlp 1: the gradient is read at its output site). The
// activation reported at the site is the splicer's own features, bit for bit. Integrated
// gradients at the features (the path made by the splice) are complete: their estimates
// over every feature and prompt position sum, within 1e-3, to what patching all the
// corrupted prompt's features in does on the route (the SAEs and the transcoder).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include <algorithm>
#include <fstream>

#include "attribution/attribution.hpp"
#include "attribution/gradient_model.hpp"
#include "attribution/metric.hpp"
#include "attribution/sae_gradient.hpp"
#include "common/error.hpp"
#include "record/manifest.hpp"
#include "features/sae_splicer.hpp"
#include "runtime/loaded_model.hpp"
#include "runtime/session.hpp"
#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace ember {
namespace {

using hooks::Stage;

features::Sae random_sae(std::size_t d_in, std::size_t d_sae, std::uint32_t layer, float scaling_factor) {
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    features::Sae sae;
    sae.name = "random";
    sae.path = "in-memory";
    sae.architecture = features::Architecture::Standard;
    sae.d_in = sae.d_out = d_in;
    sae.d_sae = d_sae;
    sae.apply_b_dec_to_input = true;
    if (scaling_factor != 1.0f) {
        sae.normalization = features::Normalization::ScalingFactor;
        sae.scaling_factor = scaling_factor;
    }
    sae.hook_name = "after_layer:" + std::to_string(layer);
    sae.site = hooks::resolve_hook_name(sae.hook_name);
    for (std::size_t i = 0; i < d_in * d_sae; ++i) sae.W_enc.push_back(normal(rng) / std::sqrt(float(d_in)));
    for (std::size_t i = 0; i < d_sae * d_in; ++i) sae.W_dec.push_back(normal(rng) * 0.1f);
    for (std::size_t i = 0; i < d_sae; ++i) sae.b_enc.push_back(normal(rng) * 0.1f);
    for (std::size_t i = 0; i < d_in; ++i) sae.b_dec.push_back(normal(rng) * 0.01f);
    return sae;
}

// An MLP transcoder of layer 1: reads mlp_input, splices into after_mlp (no b_dec on the
// input, as transcoders have it).
features::Sae random_transcoder(std::size_t d, std::size_t d_sae) {
    features::Sae sae = random_sae(d, d_sae, 1, 1.0f);
    sae.name = "random-transcoder";
    sae.apply_b_dec_to_input = false;
    sae.hook_name = "mlp_input:1";
    sae.site = hooks::resolve_hook_name(sae.hook_name);
    sae.output_hook_name = "after_mlp:1";
    sae.output_site = hooks::resolve_hook_name(*sae.output_hook_name);
    return sae;
}

// Behind the splicer: records the features, or adds h * d to them.
class FeatureHook final : public hooks::ActiveHooks {
public:
    const std::vector<float>* direction = nullptr;
    float h = 0.0f;
    std::vector<float> seen;
    void stage(Stage stage, const hooks::EvalInfo&, std::uint32_t, hooks::TensorView t) override {
        if (stage != Stage::SaeFeatures) return;
        seen.assign(t.data, t.data + t.rows * t.cols);
        if (direction)
            for (std::size_t i = 0; i < seen.size(); ++i) t.data[i] += h * (*direction)[i];
    }
    bool wants(Stage stage) const override { return stage == Stage::SaeFeatures; }
};

double route_metric(const runtime::LoadedModel& model, const features::Sae& sae, std::span<const std::int32_t> ids,
                    const attribution::Metric& m, FeatureHook& hook) {
    runtime::SessionOptions o;
    o.route = runtime::Route::Reference;
    o.threads = 2;
    o.max_batch = ids.size();
    o.all_logits = true;
    runtime::Session session(*model.model, o);
    features::SaeSplicer splicer({{&sae, true}}, &hook);
    const kernels::ConstRows logits = session.prefill(ids, true, &splicer);
    std::vector<float> rows;
    for (const attribution::MetricTerm& t : m.terms) rows.insert(rows.end(), logits.row(t.row), logits.row(t.row) + logits.cols);
    return m.evaluate(kernels::ConstRows(rows.data(), m.terms.size(), logits.cols), nullptr);
}

TEST_CASE("the gradient at an SAE's features agrees with finite differences through the route's splice") {
    // Not Gemma 4: its GELU is llama.cpp's F16 table, a step function at F32 resolution, so a
    // finite difference does not measure its derivative (attribution_autograd_test covers it).
    for (const char* name : {"stories260K", "synth-qwen3-q8_0"}) {
        // factor 1.75: an output scale; 0: an MLP transcoder (mlp_input 1 to after_mlp 1)
        for (const float factor : {1.0f, 1.75f, 0.0f}) {
            const std::string model_name = name;
            CAPTURE(model_name);
            CAPTURE(factor);
            const runtime::LoadedModel model(test::fixture_path(std::string("models/") + name + ".gguf"), std::nullopt);
            const models::ModelConfig& c = model.model->config();
            const attribution::GradientModel gm(model.file, c);
            const features::Sae sae = factor == 0.0f ? random_transcoder(c.n_embd, 2 * c.n_embd)
                                                     : random_sae(c.n_embd, 2 * c.n_embd, 1, factor);
            attribution::check_sae_for_gradients(sae);
            const auto encoded = runtime::encode_prompt(model.tokenizer, "Once upon a time, there was a little girl", config::AddBos::Auto);
            const std::size_t T = encoded.ids.size();
            attribution::Metric metric{attribution::MetricKind::LogProb, {}};
            for (std::size_t j = T - 3; j < T; ++j) metric.terms.push_back({j - 1, encoded.ids[j], -1});

            const attribution::Tape tape = gm.forward(encoded.ids, metric.rows());
            attribution::Matrix dlogits;
            metric.evaluate(tape.logits.view(), &dlogits);
            std::vector<float> grad, encoded_features;
            gm.backward(tape, dlogits.view(), attribution::with_sae_features(&sae, [&](const attribution::Site& s) {
                if (s.stage != Stage::SaeFeatures) return;
                grad.assign(s.gradient.data, s.gradient.data + s.gradient.rows * s.gradient.cols);
                encoded_features.assign(s.activation.data, s.activation.data + s.activation.rows * s.activation.cols);
            }));
            REQUIRE(grad.size() == T * sae.d_sae);

            FeatureHook record;
            const double clean = route_metric(model, sae, encoded.ids, metric, record);
            REQUIRE(record.seen.size() == encoded_features.size());
            CHECK(std::memcmp(record.seen.data(), encoded_features.data(), encoded_features.size() * sizeof(float)) == 0);
            CHECK(clean == metric.evaluate(tape.logits.view(), nullptr));  // an unedited splice changes no bit

            double norm = 0;
            for (float g : grad) norm += static_cast<double>(g) * g;
            norm = std::sqrt(norm);
            REQUIRE(norm > 0);
            std::vector<float> d(grad.size());
            for (std::size_t i = 0; i < grad.size(); ++i) d[i] = static_cast<float>(grad[i] / norm);
            const float h = 1e-2f;
            FeatureHook plus, minus;
            plus.direction = minus.direction = &d;
            plus.h = h;
            minus.h = -h;
            const double fd = (route_metric(model, sae, encoded.ids, metric, plus) - route_metric(model, sae, encoded.ids, metric, minus)) / (2.0 * h);
            CAPTURE(fd);
            CAPTURE(norm);
            CHECK(std::abs(fd - norm) <= 1e-3 * norm);
        }
    }
}

TEST_CASE("an SAE at a site the gradient model does not report is refused by name") {
    features::Sae at_logits = random_sae(8, 16, 1, 1.0f);
    at_logits.hook_name = "model.norm";
    at_logits.site = hooks::resolve_hook_name(at_logits.hook_name);
    CHECK_THROWS_WITH_AS(attribution::check_sae_for_gradients(at_logits),
                         doctest::Contains("in-memory: its site 'model.norm' is not one the gradient model reports"),
                         Error);
    CHECK_NOTHROW(attribution::check_sae_for_gradients(random_transcoder(8, 16)));
}

// Behind the splicer: writes `values` into the first rows of the features.
class SetFeatures final : public hooks::ActiveHooks {
public:
    const std::vector<float>* values = nullptr;
    void stage(Stage stage, const hooks::EvalInfo&, std::uint32_t, hooks::TensorView t) override {
        if (stage == Stage::SaeFeatures) std::copy(values->begin(), values->end(), t.data);
    }
    bool wants(Stage stage) const override { return stage == Stage::SaeFeatures; }
};

TEST_CASE("integrated gradients at an SAE's features are complete: they sum to the route's effect of patching them all") {
    const runtime::LoadedModel model(test::fixture_path("models/stories260K.gguf"), std::nullopt);
    const models::ModelConfig& c = model.model->config();
    const attribution::GradientModel gm(model.file, c);
    for (const float factor : {1.0f, 1.75f, 0.0f}) {  // 0: the MLP transcoder
        CAPTURE(factor);
        const features::Sae sae = factor == 0.0f ? random_transcoder(c.n_embd, 2 * c.n_embd)
                                                 : random_sae(c.n_embd, 2 * c.n_embd, 1, factor);
        const test::TempDir tmp;
        attribution::AttributeRequest r;
        r.prompt = "Once upon a time, there was a little girl named Lily";
        r.corrupt = "Once upon a time, there was a little boy named Lily";
        r.target = ". She";
        r.sae = &sae;
        r.integrated_gradients = true;
        r.ig_steps = 64;
        r.threads = 2;
        r.output.stages = {"after_layer"};
        r.output.layers = std::vector<std::uint32_t>{1};
        r.output.dir = tmp.path() / "ig";
        attribution::run_attribution(model, gm, r);
        double sum = 0.0;
        std::size_t units = 0;
        std::ifstream table(tmp.path() / "ig" / "attribution.jsonl");
        for (std::string line; std::getline(table, line);) {
            const boost::json::value v = boost::json::parse(line);
            if (v.at("stage").as_string() != "sae_features") continue;
            sum += v.at("estimate").to_number<double>();
            ++units;
        }
        const auto clean = runtime::encode_prompt(model.tokenizer, r.prompt, config::AddBos::Auto);
        const auto corrupt = runtime::encode_prompt(model.tokenizer, *r.corrupt, config::AddBos::Auto);
        const auto evaluated = runtime::encode_prompt(model.tokenizer, r.prompt + r.target, config::AddBos::Auto);
        const std::size_t P = clean.ids.size(), T = evaluated.ids.size();
        REQUIRE(corrupt.ids.size() == P);
        CHECK(units == P * sae.d_sae);
        attribution::Metric metric{attribution::MetricKind::LogProb, {}};
        for (std::size_t j = P; j < T; ++j) metric.terms.push_back({j - 1, evaluated.ids[j], -1});
        FeatureHook record;
        const double m_clean = route_metric(model, sae, evaluated.ids, metric, record);
        FeatureHook corrupt_features;
        attribution::Metric none{attribution::MetricKind::LogProb, {{0, corrupt.ids[0], -1}}};
        route_metric(model, sae, corrupt.ids, none, corrupt_features);
        REQUIRE(corrupt_features.seen.size() == P * sae.d_sae);
        SetFeatures patch;
        patch.values = &corrupt_features.seen;
        runtime::SessionOptions o;
        o.route = runtime::Route::Reference;
        o.threads = 2;
        o.max_batch = T;
        o.all_logits = true;
        runtime::Session session(*model.model, o);
        features::SaeSplicer splicer({{&sae, true}}, &patch);
        const kernels::ConstRows logits = session.prefill(evaluated.ids, true, &splicer);
        std::vector<float> rows;
        for (const attribution::MetricTerm& t : metric.terms) rows.insert(rows.end(), logits.row(t.row), logits.row(t.row) + logits.cols);
        const double m_patched = metric.evaluate(kernels::ConstRows(rows.data(), metric.terms.size(), logits.cols), nullptr);
        CAPTURE(sum);
        CAPTURE(m_patched - m_clean);
        MESSAGE("IG at the features, factor " << factor << ": " << units << " estimates sum to " << sum
                << ", the route's patch of them all " << (m_patched - m_clean));
        CHECK(std::abs(m_patched - m_clean) > 1e-2);  // the patch does something
        CHECK(std::abs(sum - (m_patched - m_clean)) <= 1e-3 * std::max(1.0, std::abs(m_patched - m_clean)));
    }
}

}  // namespace
}  // namespace ember
