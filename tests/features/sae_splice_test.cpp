// Rung: interventions (an SAE spliced into the forward pass).
//
// On every family (Llama, Qwen3, Gemma 4) and both routes, with a seeded random SAE at
// after_layer 1:
// - an unedited splice leaves the run unchanged: every prompt row's logits and a greedy
//   generation's tokens and logits are bit for bit those of the run without the SAE (the
//   features were computed: the sae_features stage fired with active features);
// - zeroing one active feature at sae_features changes the site by exactly minus the
//   feature's decoder row times its value: before_layer 2 (= the spliced after_layer 1)
//   equals after_layer 1 + float(-f · W_dec[j]) element for element, and nothing else
//   changed in the rows where the feature was 0;
// - feature-level patching: writing run A's features into run B at the same rows makes
//   B's spliced site equal B's site + decode(f_A) - decode(f_B), i.e. A's reconstruction
//   plus B's error term, checked against the decoder computed here.
// The same at before_logits (the final norm's output, `model.norm`): an unedited splice
// changes no logit and no generated token; zeroing a feature moves the final norm's
// output by exactly -f W_dec[j] in the rows where it fired, and changes the logits.
// And for an MLP transcoder reading mlp_input 1 (the MLP's normed input, by Gemma Scope 2's
// hook names) and writing after_mlp 1: the same two properties at its output site.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "features/sae.hpp"
#include "features/sae_loader.hpp"
#include "features/sae_splicer.hpp"
#include "gguf/gguf_file.hpp"
#include "models/model.hpp"
#include "runtime/generate.hpp"
#include "runtime/session.hpp"
#include "support/fixtures.hpp"

namespace ember::test {
namespace {

using hooks::Stage;

constexpr std::size_t kTokens = 7;
constexpr std::uint32_t kLayer = 1;

features::Sae random_sae(std::size_t d_in, std::size_t d_sae, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    features::Sae sae;
    sae.name = "random";
    sae.architecture = features::Architecture::Standard;
    sae.d_in = sae.d_out = d_in;
    sae.d_sae = d_sae;
    sae.apply_b_dec_to_input = true;
    sae.site = hooks::resolve_hook_name("after_layer:1");
    sae.hook_name = "after_layer:1";
    for (std::size_t i = 0; i < d_in * d_sae; ++i) sae.W_enc.push_back(normal(rng) / std::sqrt(float(d_in)));
    for (std::size_t i = 0; i < d_sae * d_in; ++i) sae.W_dec.push_back(normal(rng) * 0.1f);
    for (std::size_t i = 0; i < d_sae; ++i) sae.b_enc.push_back(normal(rng) * 0.1f);
    for (std::size_t i = 0; i < d_in; ++i) sae.b_dec.push_back(normal(rng) * 0.01f);
    return sae;
}

// Records the prefill's sites and features; optionally edits the features.
class Probe final : public hooks::ActiveHooks {
public:
    std::vector<float> site, next, features;
    std::size_t cols = 0, d_sae = 0;
    std::function<void(hooks::TensorView)> edit;
    void stage(Stage stage, const hooks::EvalInfo& eval, std::uint32_t layer, hooks::TensorView t) override {
        if (eval.phase != hooks::Phase::Prefill) return;
        if (stage == Stage::AfterLayer && layer == kLayer) site.assign(t.data, t.data + t.rows * t.cols), cols = t.cols;
        if (stage == Stage::BeforeLayer && layer == kLayer + 1) next.assign(t.data, t.data + t.rows * t.cols);
        if (stage == Stage::SaeFeatures) {
            features.assign(t.data, t.data + t.rows * t.cols);
            d_sae = t.cols;
            if (edit) edit(t);
        }
    }
};

std::vector<std::int32_t> prompt(const models::ModelConfig& c) {
    std::vector<std::int32_t> ids;
    for (std::size_t t = 0; t < kTokens; ++t) ids.push_back(static_cast<std::int32_t>((29 * t + 5) % c.n_vocab));
    return ids;
}

struct RunResult {
    std::vector<float> logits;  // every prompt row
    runtime::GenerationResult generation;
};

RunResult run(const models::Model& model, runtime::Route route, hooks::ActiveHooks* hooks) {
    const auto ids = prompt(model.config());
    RunResult out;
    {
        runtime::Session session(model, {.route = route, .context_length = 32, .threads = 2, .max_batch = kTokens,
                                         .all_logits = true});
        const kernels::ConstRows logits = session.prefill(ids, true, hooks);
        out.logits.assign(logits.data, logits.data + logits.rows * logits.cols);
    }
    runtime::Session session(model, {.route = route, .context_length = 32, .threads = 2, .max_batch = kTokens});
    runtime::GenerationOptions options;
    options.max_tokens = 6;
    out.generation = runtime::generate(session, ids, options, [](std::int32_t) { return false; }, {}, hooks);
    return out;
}

bool same_steps(const runtime::GenerationResult& a, const runtime::GenerationResult& b) {
    if (a.tokens != b.tokens || a.steps.size() != b.steps.size()) return false;
    for (std::size_t i = 0; i < a.steps.size(); ++i)
        if (a.steps[i].logit != b.steps[i].logit || a.steps[i].margin != b.steps[i].margin) return false;
    return true;
}

// The strongest feature of the last prompt row (it must fire).
std::size_t strongest_last_feature(const std::vector<float>& features, std::size_t d_sae) {
    const float* last = features.data() + (kTokens - 1) * d_sae;
    const std::size_t j = static_cast<std::size_t>(std::max_element(last, last + d_sae) - last);
    REQUIRE(last[j] > 0.0f);
    return j;
}

// Zeroes feature j in every row.
void zero_feature(hooks::TensorView t, std::size_t j) {
    for (std::size_t r = 0; r < t.rows; ++r) t.data[r * t.cols + j] = 0.0f;
}

// With feature j zeroed, the spliced site `after` must be `before` + float(-f_j W_dec[j])
// in the rows where it fired and `before` elsewhere: the elements that are not (and, in
// `moved`, those that changed at all).
std::size_t zeroing_mismatches(const features::Sae& sae, std::size_t j, const std::vector<float>& features,
                               const std::vector<float>& before, const std::vector<float>& after, std::size_t& moved) {
    const std::size_t E = sae.d_out;
    REQUIRE(before.size() == kTokens * E);
    REQUIRE(after.size() == kTokens * E);
    std::size_t wrong = 0;
    moved = 0;
    for (std::size_t t = 0; t < kTokens; ++t) {
        const float f = features[t * sae.d_sae + j];
        for (std::size_t i = 0; i < E; ++i) {
            const float x = before[t * E + i];
            const float want = f == 0.0f ? x : x + static_cast<float>((0.0 - f) * sae.W_dec[j * E + i]);
            wrong += after[t * E + i] != want;
            moved += after[t * E + i] != x;
        }
    }
    return wrong;
}

void check_family(const char* name, runtime::Route route) {
    CAPTURE(name);
    CAPTURE(runtime::route_name(route));
    const gguf::File file = gguf::File::open(fixture_path(std::string("models/") + name + ".gguf"));
    const std::unique_ptr<models::Model> model = models::load_model(file);
    const std::size_t E = model->config().n_embd;
    const features::Sae sae = random_sae(E, 2 * E, 7);

    // Unedited: bit for bit the run without the SAE.
    const RunResult plain = run(*model, route, nullptr);
    Probe reader;
    features::SaeSplicer spliced({{&sae, true}}, &reader);
    const RunResult with_sae = run(*model, route, &spliced);
    REQUIRE(reader.d_sae == sae.d_sae);
    std::size_t active = 0;
    for (float f : reader.features) active += f != 0.0f;
    CHECK(active > 0);
    CHECK(active < reader.features.size());
    CHECK_MESSAGE(plain.logits == with_sae.logits, "an unedited splice changed the prompt's logits");
    CHECK_MESSAGE(same_steps(plain.generation, with_sae.generation), "an unedited splice changed the generation");
    CHECK(reader.next == reader.site);  // before_layer 2 is after_layer 1 untouched

    // Zeroing the last row's strongest feature: the site moves by exactly -f W_dec[j].
    const std::size_t j = strongest_last_feature(reader.features, sae.d_sae);
    Probe zeroing;
    zeroing.edit = [&](hooks::TensorView t) { zero_feature(t, j); };
    features::SaeSplicer ablated({{&sae, true}}, &zeroing);
    const RunResult ablated_run = run(*model, route, &ablated);
    CHECK(zeroing.site == reader.site);  // the run's hooks see the site before the splice
    std::size_t moved = 0;
    const std::size_t wrong = zeroing_mismatches(sae, j, reader.features, reader.site, zeroing.next, moved);
    CHECK_MESSAGE(wrong == 0, wrong << " elements of the spliced site are not x - f W_dec[j]");
    CHECK(moved > 0);
    CHECK(ablated_run.logits != plain.logits);  // the ablation reached the logits

    // Patching run B's features with run A's (another prompt's rows): B's spliced site is
    // B's site + (decode(f_A) - decode(f_B)): A's reconstruction plus B's error term.
    Probe source;
    features::SaeSplicer read_a({{&sae, true}}, &source);
    {
        std::vector<std::int32_t> other = prompt(model->config());
        for (auto& id : other) id = static_cast<std::int32_t>((id * 7 + 3) % model->config().n_vocab);
        runtime::Session session(*model, {.route = route, .context_length = 32, .threads = 2, .max_batch = kTokens});
        session.prefill(other, false, &read_a);
    }
    Probe patched;
    patched.edit = [&](hooks::TensorView t) { std::copy(source.features.begin(), source.features.end(), t.data); };
    features::SaeSplicer patching({{&sae, true}}, &patched);
    run(*model, route, &patching);
    features::RowNorm norm;
    norm.in_scale.assign(kTokens, 1.0f), norm.in_shift.assign(kTokens, 0.0f);
    norm.out_scale.assign(kTokens, 1.0f), norm.out_shift.assign(kTokens, 0.0f);
    std::vector<float> recon_a(kTokens * E), recon_b(kTokens * E);
    features::decode(sae, source.features.data(), kTokens, norm, recon_a.data());
    features::decode(sae, reader.features.data(), kTokens, norm, recon_b.data());
    double worst = 0.0;
    for (std::size_t i = 0; i < kTokens * E; ++i) {
        const double want = static_cast<double>(recon_a[i]) + (static_cast<double>(reader.site[i]) - recon_b[i]);
        worst = std::max(worst, std::abs(want - patched.next[i]));
    }
    CHECK_MESSAGE(worst <= 1e-5, "patched site differs from A's reconstruction + B's error by " << worst);
}


// Around a splicer: the run's hooks (downstream of it) see before_logits before the
// splice; this records it after.
class AfterSplice final : public hooks::ActiveHooks {
public:
    explicit AfterSplice(hooks::ActiveHooks* inner) : inner_(inner) {}
    std::vector<float> site;  // before_logits after the splice, the prefill's rows
    void stage(Stage stage, const hooks::EvalInfo& eval, std::uint32_t layer, hooks::TensorView t) override {
        inner_->stage(stage, eval, layer, t);
        // the first prefill's (all_logits: every row); the generation's prefill has the last alone
        if (stage == Stage::BeforeLogits && eval.phase == hooks::Phase::Prefill && site.empty())
            site.assign(t.data, t.data + t.rows * t.cols);
    }
    bool wants(Stage stage) const override { return stage == Stage::BeforeLogits || inner_->wants(stage); }

private:
    hooks::ActiveHooks* inner_;
};

// Records before_logits (before the splice) and the features; optionally edits them.
class LogitsProbe final : public hooks::ActiveHooks {
public:
    std::vector<float> site, features;  // the first prefill's (as AfterSplice)
    std::function<void(hooks::TensorView)> edit;
    void stage(Stage stage, const hooks::EvalInfo& eval, std::uint32_t, hooks::TensorView t) override {
        if (eval.phase != hooks::Phase::Prefill) return;
        if (stage == Stage::BeforeLogits && site.empty()) site.assign(t.data, t.data + t.rows * t.cols);
        if (stage == Stage::SaeFeatures) {
            if (features.empty()) features.assign(t.data, t.data + t.rows * t.cols);
            if (edit) edit(t);
        }
    }
};

void check_before_logits(const char* name, runtime::Route route) {
    CAPTURE(name);
    CAPTURE(runtime::route_name(route));
    const gguf::File file = gguf::File::open(fixture_path(std::string("models/") + name + ".gguf"));
    const std::unique_ptr<models::Model> model = models::load_model(file);
    const std::size_t E = model->config().n_embd;
    features::Sae sae = random_sae(E, 2 * E, 11);
    sae.hook_name = "model.norm";
    sae.site = hooks::resolve_hook_name(sae.hook_name);
    REQUIRE(sae.site.stage == Stage::BeforeLogits);

    const RunResult plain = run(*model, route, nullptr);
    LogitsProbe reader;
    features::SaeSplicer spliced({{&sae, true}}, &reader);
    AfterSplice unedited(&spliced);
    const RunResult with_sae = run(*model, route, &unedited);
    REQUIRE(reader.features.size() == kTokens * sae.d_sae);  // every prompt row (all_logits)
    std::size_t active = 0;
    for (float f : reader.features) active += f != 0.0f;
    CHECK(active > 0);
    CHECK(active < reader.features.size());
    CHECK_MESSAGE(plain.logits == with_sae.logits, "an unedited splice at before_logits changed the logits");
    CHECK_MESSAGE(same_steps(plain.generation, with_sae.generation), "an unedited splice changed the generation");

    const std::size_t j = strongest_last_feature(reader.features, sae.d_sae);
    LogitsProbe zeroing;
    zeroing.edit = [&](hooks::TensorView t) { zero_feature(t, j); };
    features::SaeSplicer ablated({{&sae, true}}, &zeroing);
    AfterSplice after(&ablated);
    const RunResult ablated_run = run(*model, route, &after);
    CHECK(zeroing.site == reader.site);
    std::size_t moved = 0;
    const std::size_t wrong = zeroing_mismatches(sae, j, reader.features, reader.site, after.site, moved);
    CHECK_MESSAGE(wrong == 0, wrong << " elements of the spliced final norm are not x - f W_dec[j]");
    CHECK(moved > 0);
    CHECK(ablated_run.logits != plain.logits);
}

// Records layer 1's mlp_input and after_mlp (as the run's hooks see it: after a
// transcoder's delta) and the features; optionally edits them.
class MlpProbe final : public hooks::ActiveHooks {
public:
    std::vector<float> mlp_input, mlp_out, features;
    std::function<void(hooks::TensorView)> edit;
    void stage(Stage stage, const hooks::EvalInfo& eval, std::uint32_t layer, hooks::TensorView t) override {
        if (eval.phase != hooks::Phase::Prefill || layer != kLayer) return;
        if (stage == Stage::MlpInput) mlp_input.assign(t.data, t.data + t.rows * t.cols);
        if (stage == Stage::AfterMlp) mlp_out.assign(t.data, t.data + t.rows * t.cols);
        if (stage == Stage::SaeFeatures) {
            features.assign(t.data, t.data + t.rows * t.cols);
            if (edit) edit(t);
        }
    }
};

// An MLP transcoder at layer 1, named as Gemma Scope 2 names its sites (Gemma: the
// pre-FFN norm's output to the post-FFN norm's; Llama and Qwen3 checkpoints call the MLP's
// input norm post_attention_layernorm) and placed in the model by fit_sae_to_model: it
// reads mlp_input and writes after_mlp. Unedited, the run is bit for bit the run without
// it; zeroing a feature moves after_mlp by exactly -f W_dec[j], and mlp_input not at all.
void check_mlp_transcoder(const char* name, runtime::Route route) {
    CAPTURE(name);
    CAPTURE(runtime::route_name(route));
    const gguf::File file = gguf::File::open(fixture_path(std::string("models/") + name + ".gguf"));
    const std::unique_ptr<models::Model> model = models::load_model(file);
    const models::ModelConfig& c = model->config();
    const std::size_t E = c.n_embd;
    const bool gemma = c.family == models::Family::Gemma4;
    features::Sae sae = random_sae(E, 2 * E, 13);
    sae.apply_b_dec_to_input = false;
    sae.hook_name = gemma ? "model.language_model.layers.1.pre_feedforward_layernorm.output"
                          : "model.layers.1.post_attention_layernorm.output";
    sae.output_hook_name = gemma ? "model.language_model.layers.1.post_feedforward_layernorm.output"
                                 : "model.layers.1.mlp.output";
    sae.site = hooks::resolve_hook_name(sae.hook_name);
    sae.output_site = hooks::resolve_hook_name(*sae.output_hook_name);
    features::fit_sae_to_model(sae, features::site_widths(c));
    REQUIRE(hooks::site_text(sae.site) == "mlp_input:1");
    REQUIRE(hooks::site_text(*sae.output_site) == "after_mlp:1");

    const RunResult plain = run(*model, route, nullptr);
    MlpProbe before;
    run(*model, route, &before);
    MlpProbe reader;
    features::SaeSplicer spliced({{&sae, true}}, &reader);
    const RunResult with_sae = run(*model, route, &spliced);
    std::size_t active = 0;
    for (float f : reader.features) active += f != 0.0f;
    CHECK(active > 0);
    CHECK(active < reader.features.size());
    CHECK_MESSAGE(plain.logits == with_sae.logits, "an unedited transcoder changed the prompt's logits");
    CHECK_MESSAGE(same_steps(plain.generation, with_sae.generation), "an unedited transcoder changed the generation");
    CHECK(reader.mlp_out == before.mlp_out);

    const std::size_t j = strongest_last_feature(reader.features, sae.d_sae);
    MlpProbe zeroing;
    zeroing.edit = [&](hooks::TensorView t) { zero_feature(t, j); };
    features::SaeSplicer ablated({{&sae, true}}, &zeroing);
    const RunResult ablated_run = run(*model, route, &ablated);
    CHECK(zeroing.mlp_input == before.mlp_input);
    std::size_t moved = 0;
    const std::size_t wrong = zeroing_mismatches(sae, j, reader.features, before.mlp_out, zeroing.mlp_out, moved);
    CHECK_MESSAGE(wrong == 0, wrong << " elements of the spliced after_mlp are not x - f W_dec[j]");
    CHECK(moved > 0);
    CHECK(ablated_run.logits != plain.logits);
}

const char* const kFamilies[] = {"synth-llama3-q8_0", "synth-qwen3-q8_0", "synth-gemma4-q8_0"};

}  // namespace

TEST_CASE("an SAE spliced at after_layer 1, reference route: unedited is bit-identical, edits are exact") {
    for (const char* name : kFamilies) check_family(name, runtime::Route::Reference);
}

TEST_CASE("an SAE spliced at after_layer 1, fast route: unedited is bit-identical, edits are exact") {
    if (test::fast_route_missing()) return;
    for (const char* name : kFamilies) check_family(name, runtime::Route::Fast);
}

TEST_CASE("an SAE spliced at before_logits, both routes: unedited is bit-identical, a zeroed feature is exact") {
    for (const char* name : kFamilies) check_before_logits(name, runtime::Route::Reference);
    if (test::fast_route_missing()) return;
    for (const char* name : kFamilies) check_before_logits(name, runtime::Route::Fast);
}

TEST_CASE("an MLP transcoder (mlp_input 1 to after_mlp 1), both routes: unedited is bit-identical, a zeroed feature is exact") {
    for (const char* name : kFamilies) check_mlp_transcoder(name, runtime::Route::Reference);
    if (test::fast_route_missing()) return;
    for (const char* name : kFamilies) check_mlp_transcoder(name, runtime::Route::Fast);
}

}  // namespace ember::test
