// Rung: smoke (reproducibility). The same prompt, seed and binary give bit-identical
// hidden states, logits and tokens on every run and with 1 or 2 threads, in every family
// and on both routes (the kernels split work over output rows and heads, never inside a
// sum).
#include <doctest/doctest.h>

#include <cstring>
#include <utility>
#include <string>
#include <vector>

#include "capture_hooks.hpp"
#include "gguf/gguf_file.hpp"
#include "kernels/reference/reference_backend.hpp"
#include "models/model.hpp"
#include "runtime/generate.hpp"
#include "runtime/session.hpp"
#include "support/fixtures.hpp"
#include "support/golden.hpp"

namespace ember::test {
namespace {

struct RunOutput {
    std::vector<std::vector<float>> hidden;  // after every layer, then result_norm (prefill)
    std::vector<float> logits;               // every prompt position
    std::vector<std::int32_t> greedy;
    std::vector<std::int32_t> sampled;
    std::vector<float> sampled_logits;
};

RunOutput run(const models::Model& model, const std::vector<std::int32_t>& prompt, std::size_t threads, runtime::Route route) {
    runtime::SessionOptions options;
    options.route = route;
    options.threads = threads;
    options.max_batch = prompt.size();
    options.all_logits = true;
    runtime::Session session(model, options);
    RunOutput out;

    CaptureHooks hooks(model.config().n_layers);
    const kernels::ConstRows logits = session.prefill(prompt, true, &hooks);
    out.logits.assign(logits.data, logits.data + logits.rows * logits.cols);
    for (const auto& t : hooks.prefill.after_layer) out.hidden.push_back(t.values);
    out.hidden.push_back(hooks.prefill.before_logits.values);

    runtime::GenerationOptions greedy;
    greedy.max_tokens = 16;
    out.greedy = runtime::generate(session, prompt, greedy, {}).tokens;

    runtime::GenerationOptions seeded;
    seeded.max_tokens = 16;
    seeded.sampling = {.temperature = 0.9f, .top_k = 40, .top_p = 0.95f, .seed = 1234};
    const auto result = runtime::generate(session, prompt, seeded, {});
    out.sampled = result.tokens;
    for (const auto& s : result.steps) out.sampled_logits.push_back(s.logit);
    return out;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void check_same(const RunOutput& a, const RunOutput& b, const char* what) {
    INFO(what);
    REQUIRE(a.hidden.size() == b.hidden.size());
    for (std::size_t i = 0; i < a.hidden.size(); ++i) CHECK_MESSAGE(bitwise_equal(a.hidden[i], b.hidden[i]), "hidden " << i);
    CHECK(bitwise_equal(a.logits, b.logits));
    CHECK(a.greedy == b.greedy);
    CHECK(a.sampled == b.sampled);
    CHECK(bitwise_equal(a.sampled_logits, b.sampled_logits));
}

void check_model(const std::string& name, runtime::Route route) {
    const gguf::File file = gguf::File::open(fixture_path("models/" + name + ".gguf"));
    const auto model = models::load_model(file);
    const Golden golden = load_golden(f32_golden_path(name));
    const std::vector<std::int32_t>& prompt = golden.prompts.at(0).tokens;
    const RunOutput one = run(*model, prompt, 1, route);
    const RunOutput two = run(*model, prompt, 2, route);
    const RunOutput again = run(*model, prompt, 2, route);
    check_same(one, two, "1 thread vs 2 threads");
    check_same(two, again, "two runs with 2 threads");
    CHECK(one.greedy.size() == 16);
}

// The logit-lens read-out (Model::unembed) of the last layer's output is the run's logits.
void check_unembed(const std::string& name) {
    const gguf::File file = gguf::File::open(fixture_path("models/" + name + ".gguf"));
    const auto model = models::load_model(file);
    const models::ModelConfig& c = model->config();
    const std::vector<std::int32_t> prompt = load_golden(f32_golden_path(name)).prompts.at(0).tokens;
    runtime::Session session(*model, {.route = runtime::Route::Reference, .threads = 2, .max_batch = prompt.size(), .all_logits = true});
    CaptureHooks hooks(c.n_layers);
    const kernels::ConstRows logits = session.prefill(prompt, true, &hooks);

    std::vector<float> last = hooks.prefill.after_layer.back().values;
    std::vector<float> normed(last.size());
    std::vector<float> lens(logits.rows * logits.cols);
    const auto backend = kernels::reference::make_reference_backend();
    kernels::Ops ops(*backend);
    model->unembed(ops, kernels::ConstRows(last.data(), prompt.size(), c.n_embd),
                   kernels::Rows(normed.data(), prompt.size(), c.n_embd), kernels::Rows(lens.data(), prompt.size(), c.n_vocab));
    CHECK(bitwise_equal(normed, hooks.prefill.before_logits.values));
    CHECK(bitwise_equal(lens, std::vector<float>(logits.data, logits.data + lens.size())));
}

// The rows of the last layer's ffn_down product in the evaluations it sees.
class LastDownRows final : public kernels::OpObserver {
public:
    explicit LastDownRows(std::int32_t last_layer) : last_layer_(last_layer) {}
    void on_op(const kernels::OpRecord& r) override {
        if (r.site.name == "ffn_down" && r.site.layer == last_layer_) rows = r.input_shape[0];
    }
    std::size_t rows = 0;

private:
    std::int32_t last_layer_;
};

// Without hooks, the last layer's MLP block (Gemma 4: and its per-layer-embedding
// residual) runs for the last row alone (models::mlp_rows) when its products allow:
// `alone` says whether they do for this model. Its logits are the bits of the whole
// evaluation that hooks observe.
void check_last_row_block(const std::string& name, runtime::Route route, bool alone) {
    INFO(name);
    const gguf::File file = gguf::File::open(fixture_path("models/" + name + ".gguf"));
    const auto model = models::load_model(file);
    const std::vector<std::int32_t> prompt = load_golden(f32_golden_path(name)).prompts.at(0).tokens;
    REQUIRE(prompt.size() > 1);
    runtime::SessionOptions options;
    options.route = route;
    options.threads = 2;
    options.max_batch = prompt.size();
    runtime::Session observed(*model, options);
    LastDownRows down(static_cast<std::int32_t>(model->config().n_layers) - 1);
    options.observer = &down;
    runtime::Session plain(*model, options);
    const kernels::ConstRows a = plain.prefill(prompt);
    CHECK(down.rows == (alone ? 1 : prompt.size()));
    CaptureHooks hooks(model->config().n_layers);
    const kernels::ConstRows b = observed.prefill(prompt, false, &hooks);
    REQUIRE(a.rows == 1);
    REQUIRE(b.rows == 1);
    CHECK(bitwise_equal(std::vector<float>(a.data, a.data + a.cols), std::vector<float>(b.data, b.data + b.cols)));
}

}  // namespace

// Rung: golden logits (the same bits as the whole evaluation, itself checked against llama.cpp).
TEST_CASE("the last layer's MLP block for the last row alone gives the whole evaluation's logits, bit for bit") {
    // name, whether the last row goes alone: not with F32 weights (stories260K), whose
    // product order depends on the row count, nor in synth-gemma4-e-q8_0, whose per-layer
    // embedding projection (proj, 8 columns) is F16
    const std::pair<const char*, bool> models[] = {
        {"stories260K", false},         {"synth-llama3-q8_0", true},     {"synth-qwen3-q8_0", true},
        {"synth-llama3-k-q4_k_m", true}, {"synth-qwen3-k-q5_1", true},    {"synth-gemma4-q8_0", true},
        {"synth-gemma4-e-q8_0", false},  {"synth-gemma4-k-q2_k", true},   {"synth-gemma4-k-q4_1", true}};
    for (const auto& [name, alone] : models) check_last_row_block(name, runtime::Route::Reference, alone);
    if (test::fast_route_missing()) return;
    for (const auto& [name, alone] : models) check_last_row_block(name, runtime::Route::Fast, alone);
}

TEST_CASE("unembed (logit lens) of the last layer reproduces the logits in every family") {
    for (const char* name : {"stories260K", "synth-qwen3-q8_0", "synth-gemma4-q8_0"}) {
        INFO(name);
        check_unembed(name);
    }
}

// Each family on the reference route always, and on the fast route where the build has it
// (a -DEMBER_FAST=OFF build registers only the reference cases: nothing is skipped).
TEST_CASE("determinism: llama (stories260K), 1 vs 2 threads and across runs, reference route") {
    check_model("stories260K", runtime::Route::Reference);
}
TEST_CASE("determinism: qwen3 (synth-qwen3-q8_0), 1 vs 2 threads and across runs, reference route") {
    check_model("synth-qwen3-q8_0", runtime::Route::Reference);
}
TEST_CASE("determinism: gemma4 (synth-gemma4-e-q8_0), 1 vs 2 threads and across runs, reference route") {
    check_model("synth-gemma4-e-q8_0", runtime::Route::Reference);
}
TEST_CASE("determinism: llama (stories260K), 1 vs 2 threads and across runs, fast route") {
    if (test::fast_route_missing()) return;
    check_model("stories260K", runtime::Route::Fast);
}
TEST_CASE("determinism: qwen3 (synth-qwen3-q8_0), 1 vs 2 threads and across runs, fast route") {
    if (test::fast_route_missing()) return;
    check_model("synth-qwen3-q8_0", runtime::Route::Fast);
}
TEST_CASE("determinism: gemma4 (synth-gemma4-e-q8_0), 1 vs 2 threads and across runs, fast route") {
    if (test::fast_route_missing()) return;
    check_model("synth-gemma4-e-q8_0", runtime::Route::Fast);
}

}  // namespace ember::test
