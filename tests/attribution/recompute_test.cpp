// Rung: activation-reference (for gradients). The backward that recomputes each layer from
// its kept input (the default tape, TapeKeeps::LayerInputs: gradient checkpointing at the
// layer boundaries) gives the same bytes as the backward over a tape that kept every
// intermediate, at every stage site of every layer (activation and gradient), on every
// fixture model of every family (Gemma 4's shared K/V and per-layer embeddings included),
// with and without edits of the forward (integrated gradients' interpolation, which a
// recompute must make again). The forward's `observe` calls see the same bytes too.
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "attribution/gradient_model.hpp"
#include "attribution/metric.hpp"
#include "record/manifest.hpp"
#include "runtime/loaded_model.hpp"
#include "support/fixtures.hpp"

namespace ember {
namespace {

using attribution::GradientModel;
using attribution::TapeKeeps;
using hooks::Stage;

using SiteKey = std::pair<Stage, std::uint32_t>;  // before_logits: layer kNoLayer
struct SiteBytes {
    std::vector<float> activation, gradient;
};

std::vector<float> copy(kernels::ConstRows t) {
    REQUIRE(t.contiguous());
    return {t.data, t.data + t.rows * t.cols};
}

bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every site the backward reports, activation and gradient.
std::map<SiteKey, SiteBytes> backward_sites(const GradientModel& gm, const std::vector<std::int32_t>& ids,
                                            const attribution::Metric& metric, const attribution::SiteEdit& edit,
                                            TapeKeeps keeps, std::map<SiteKey, std::vector<float>>* observed = nullptr) {
    attribution::SiteSink observe;
    if (observed)
        observe = [&](const attribution::Site& s) { (*observed)[{s.stage, s.layer.value_or(hooks::kNoLayer)}] = copy(s.activation); };
    const attribution::Tape tape = gm.forward(ids, metric.rows(), edit, observe, keeps);
    attribution::Matrix dlogits;
    metric.evaluate(tape.logits.view(), &dlogits);
    std::map<SiteKey, SiteBytes> sites;
    gm.backward(tape, dlogits.view(), [&](const attribution::Site& s) {
        sites[{s.stage, s.layer.value_or(hooks::kNoLayer)}] = {copy(s.activation), copy(s.gradient)};
    });
    return sites;
}

TEST_CASE("the recomputing backward gives the same bytes as the backward over a full tape, every family") {
    for (const char* name : test::kFixtureModels) {
        const std::string model_name = name;
        CAPTURE(model_name);
        const runtime::LoadedModel model(test::fixture_path(std::string("models/") + name + ".gguf"), std::nullopt);
        const GradientModel gm(model.file, model.model->config());
        const auto encoded = runtime::encode_prompt(model.tokenizer, "كتب الطالب الدرس في المكتبة", config::AddBos::Auto);
        const std::size_t T = encoded.ids.size();
        attribution::Metric metric{attribution::MetricKind::LogProb, {}};
        for (std::size_t j = T - 3; j < T; ++j) metric.terms.push_back({j - 1, encoded.ids[j], -1});

        // An edit at two sites of layer 0 (a scale, then an add): not idempotent, so a
        // recompute that skipped it, or made the before_layer one twice, would differ.
        const attribution::SiteEdit edit = [](Stage stage, std::uint32_t layer, kernels::Rows t) {
            if (layer != 0) return;
            if (stage == Stage::HeadOutputs)
                for (std::size_t r = 0; r < t.rows; ++r)
                    for (std::size_t c = 0; c < t.cols; ++c) t.row(r)[c] *= 0.5f;
            if (stage == Stage::BeforeLayer || stage == Stage::AfterMlp)
                for (std::size_t r = 0; r < t.rows; ++r) t.row(r)[0] += 0.25f;
        };
        for (const bool edited : {false, true}) {
            CAPTURE(edited);
            const attribution::SiteEdit& e = edited ? edit : attribution::SiteEdit{};
            std::map<SiteKey, std::vector<float>> observed;
            const auto full = backward_sites(gm, encoded.ids, metric, e, TapeKeeps::Everything);
            const auto recomputed = backward_sites(gm, encoded.ids, metric, e, TapeKeeps::LayerInputs, &observed);
            REQUIRE(full.size() == 9 * model.model->config().n_layers + 1);  // 9 layer stages, before_logits
            REQUIRE(recomputed.size() == full.size());
            REQUIRE(observed.size() == full.size());
            for (const auto& [key, bytes] : full) {
                CAPTURE(hooks::stage_name(key.first));
                CAPTURE(key.second);
                const SiteBytes& other = recomputed.at(key);
                CHECK(same_bytes(bytes.gradient, other.gradient));
                CHECK(same_bytes(bytes.activation, other.activation));
                CHECK(same_bytes(bytes.activation, observed.at(key)));
            }
        }
    }
}

}  // namespace
}  // namespace ember
