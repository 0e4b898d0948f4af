// Rungs: activation-reference (the stages inside the blocks against the model's own GGUF
// weights, recomputed here) and interventions (zeroing one head of head_outputs).
//
// On every family, both routes, for a prefill of kTokens tokens:
// - after_attention = attn_output · head_outputs (Gemma 4: then its post-attention norm),
//   the product done here in double from the dequantized weights;
// - after_mlp = ffn_down · mlp_activation (Gemma 4: then its post-FFN norm);
// - residual_mid = before_layer + after_attention bit for bit (and, Llama and Qwen3,
//   after_layer = residual_mid + after_mlp);
// - mlp_input = the route's MLP norm of residual_mid, and the route's gate/up/activation
//   of mlp_input = mlp_activation, bit for bit;
// - zeroing head h of head_outputs at one layer changes after_attention by exactly that
//   head's term W_o[:, hD:(h+1)D] · heads[:, hD:(h+1)D] (Llama, Qwen3; Gemma 4's post norm
//   is not linear, so there the ablated after_attention is the identity above applied to
//   the ablated heads);
// - attention_pattern: every row sums to 1, is 0 beyond the causal limit and outside a
//   sliding window, and equals softmax(scale · q·kᵀ) with q and k recomputed from the
//   captured before_layer rows and the layer's weights (layers with their own K/V).
// The fast route rounds each matmul input to the weight's dot type (Q8_0: 8-bit
// activations), so a double product is not its envelope: there the identities are
// checked bit for bit against the fast backend's own operations on the captured tensors
// (after_attention is the fast attn_output of what head_outputs left, and so on), and the
// pattern against softmax of q, k recomputed with the fast backend.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <ember/npy.hpp>

#include "experiments/experiment_runner.hpp"
#include "gguf/gguf_file.hpp"
#include "hooks/hooks.hpp"
#include "kernels/ops.hpp"
#include "kernels/reference/kernels.hpp"
#include "models/model.hpp"
#include "models/tensor_loader.hpp"
#include "runtime/session.hpp"
#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace ember::test {
namespace {

using hooks::Stage;

constexpr std::size_t kTokens = 8;  // longer than Gemma 4's fixtures' sliding window (4)

struct Captured {
    std::size_t rows = 0, cols = 0;
    std::vector<float> values;
};

// Copies every stage of the prefill; optionally zeroes one head of head_outputs first.
class Probe final : public hooks::ActiveHooks {
public:
    struct ZeroHead {
        std::uint32_t layer;
        std::size_t head;
        std::size_t head_dim;
    };
    std::optional<ZeroHead> zero;
    std::map<std::pair<Stage, std::uint32_t>, Captured> seen;

    void stage(Stage stage, const hooks::EvalInfo& eval, std::uint32_t layer, hooks::TensorView t) override {
        if (eval.phase != hooks::Phase::Prefill) return;
        if (stage == Stage::HeadOutputs && zero && zero->layer == layer) {
            for (std::size_t r = 0; r < t.rows; ++r)
                std::fill_n(t.data + r * t.cols + zero->head * zero->head_dim, zero->head_dim, 0.0f);
        }
        seen[{stage, layer}] = Captured{t.rows, t.cols, std::vector<float>(t.data, t.data + t.rows * t.cols)};
    }
    const Captured& at(Stage stage, std::uint32_t layer) const {
        const auto it = seen.find({stage, layer});
        REQUIRE_MESSAGE(it != seen.end(), hooks::stage_name(stage) << " of layer " << layer << " was not seen");
        return it->second;
    }
};

// y[t] = W x[t] in double from the dequantized weight rows; columns [c0, c1) of x only.
std::vector<double> product(const kernels::WeightMatrix& w, const Captured& x, std::size_t c0, std::size_t c1) {
    REQUIRE(x.cols == w.cols);
    std::vector<float> row(w.cols);
    std::vector<double> y(x.rows * w.rows, 0.0);
    for (std::size_t o = 0; o < w.rows; ++o) {
        kernels::reference::dequantize_row(w.type, w.row(o), row.data(), w.cols);
        for (std::size_t t = 0; t < x.rows; ++t) {
            double sum = 0.0;
            for (std::size_t c = c0; c < c1; ++c) sum += static_cast<double>(row[c]) * x.values[t * x.cols + c];
            y[t * w.rows + o] = sum;
        }
    }
    return y;
}

// Gemma 4's sandwich norm: rms_norm(y) * weight, per row, in double.
void post_norm(std::vector<double>& y, std::size_t cols, const std::vector<float>& weight, float eps) {
    for (std::size_t r = 0; r < y.size() / cols; ++r) {
        double sum = 0.0;
        for (std::size_t c = 0; c < cols; ++c) sum += y[r * cols + c] * y[r * cols + c];
        const double inverse = 1.0 / std::sqrt(sum / static_cast<double>(cols) + eps);
        for (std::size_t c = 0; c < cols; ++c) y[r * cols + c] *= inverse * weight[c];
    }
}

// The route's own operation on a captured tensor: y = W x, then (Gemma 4) the post norm.
Captured route_product(kernels::Backend& backend, const kernels::WeightMatrix& w, const Captured& x,
                       const std::vector<float>* norm, float eps) {
    Captured y{x.rows, w.rows, std::vector<float>(x.rows * w.rows)};
    const kernels::Rows out(y.values.data(), y.rows, y.cols);
    backend.matmul(kernels::ConstRows(x.values.data(), x.rows, x.cols), w, out);
    if (norm) backend.rms_norm(out, *norm, eps, out);
    return y;
}

double max_difference(const std::vector<double>& want, const Captured& got) {
    REQUIRE(want.size() == got.values.size());
    double worst = 0.0;
    for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(want[i] - got.values[i]));
    return worst;
}

struct Fixture {
    std::string name;
    gguf::File file;
    std::unique_ptr<models::Model> model;
    explicit Fixture(const std::string& n)
        : name(n), file(gguf::File::open(fixture_path("models/" + n + ".gguf"))), model(models::load_model(file)) {}
    const models::ModelConfig& config() const { return model->config(); }
    models::TensorLoader loader() const { return models::TensorLoader(file, config()); }
};

std::vector<std::int32_t> prompt(const models::ModelConfig& c) {
    std::vector<std::int32_t> ids;
    for (std::size_t t = 0; t < kTokens; ++t) ids.push_back(static_cast<std::int32_t>((37 * t + 11) % c.n_vocab));
    return ids;
}

Probe run(const Fixture& f, runtime::Route route, std::optional<Probe::ZeroHead> zero = std::nullopt) {
    runtime::Session session(*f.model, {.route = route, .context_length = 64, .threads = 2, .max_batch = kTokens});
    Probe probe;
    probe.zero = zero;
    const auto ids = prompt(f.config());
    session.prefill(ids, false, &probe);
    return probe;
}

std::string weight(std::uint32_t layer, const char* name) { return models::TensorLoader::layer_weight(layer, name); }

// Tolerances: the reference route is exact up to float rounding of its double sums; the
// fast route rounds each matmul input to the weight's dot type (Q8_0: 8-bit activations)
// before summing, so its products differ from the double product by that quantization.
constexpr double kReferenceTolerance = 1e-5;

// The identity out = W x (then the post norm), checked as the route can be held to it.
void check_product(runtime::Route route, kernels::Backend& backend, const kernels::WeightMatrix& w, const Captured& x,
                   const std::vector<float>* norm, float eps, const Captured& got, const char* what) {
    if (route == runtime::Route::Reference) {
        std::vector<double> want = product(w, x, 0, x.cols);
        if (norm) post_norm(want, w.rows, *norm, eps);
        const double worst = max_difference(want, got);
        CHECK_MESSAGE(worst <= kReferenceTolerance, what << " differs from the product by " << worst);
    } else {
        const Captured want = route_product(backend, w, x, norm, eps);
        CHECK_MESSAGE(want.values == got.values, what << " is not the fast route's product of the captured tensor");
    }
}

// softmax(scale · q·kᵀ) recomputed from the captured residual entering the layer.
void check_pattern_against_weights(const Fixture& f, runtime::Route route, const Probe& probe, std::uint32_t l,
                                   double tol) {
    const models::ModelConfig& c = f.config();
    const models::LayerConfig& L = c.layers[l];
    if (!L.has_own_kv(l)) return;  // its keys are another layer's
    const models::TensorLoader t = f.loader();
    const bool gemma = c.family == models::Family::Gemma4;
    const bool head_norm = c.family != models::Family::Llama;
    const std::size_t T = kTokens, E = c.n_embd, D = L.head_dim, H = L.n_head, Hkv = L.n_head_kv;

    auto backend = runtime::make_backend(route);
    kernels::Ops ops(*backend);
    const Captured& x = probe.at(Stage::BeforeLayer, l);
    std::vector<float> h(T * E), q(T * H * D), k(T * Hkv * D);
    const kernels::Rows hr(h.data(), T, E), qr(q.data(), T, H * D), kr(k.data(), T, Hkv * D);
    ops.rms_norm({"attn_norm", 0, kernels::OpKind::Norm}, kernels::ConstRows(x.values.data(), T, E),
                 t.vector(weight(l, "attn_norm"), E), c.rms_eps, hr);
    ops.matmul({"attn_q", 0, kernels::OpKind::Projection}, hr, t.matrix(weight(l, "attn_q"), H * D, E), qr);
    ops.matmul({"attn_k", 0, kernels::OpKind::Projection}, hr, t.matrix(weight(l, "attn_k"), Hkv * D, E), kr);
    if (head_norm) {
        ops.rms_norm({"q_norm", 0, kernels::OpKind::Norm}, qr.reshape(T * H, D), t.vector(weight(l, "attn_q_norm"), D),
                     c.rms_eps, qr.reshape(T * H, D));
        ops.rms_norm({"k_norm", 0, kernels::OpKind::Norm}, kr.reshape(T * Hkv, D),
                     t.vector(weight(l, "attn_k_norm"), D), c.rms_eps, kr.reshape(T * Hkv, D));
    }
    std::vector<float> freqs;
    if (gemma && !L.sliding_window) freqs = t.vector("rope_freqs.weight", L.n_rot / 2);
    if (!gemma) freqs = t.optional_vector("rope_freqs.weight", L.n_rot / 2).value_or(std::vector<float>{});
    kernels::RopeParams rope = models::rope_params(c, L, freqs);
    ops.rope({"rope_q", 0, kernels::OpKind::Rope}, qr, 0, rope);
    rope.n_heads = Hkv;
    ops.rope({"rope_k", 0, kernels::OpKind::Rope}, kr, 0, rope);

    const kernels::AttentionParams params = models::attention_params(c, L);
    const Captured& pattern = probe.at(Stage::AttentionPattern, l);
    double worst = 0.0;
    for (std::size_t head = 0; head < H; ++head) {
        const std::size_t g = head / (H / Hkv);
        for (std::size_t i = 0; i < T; ++i) {
            const std::size_t begin = params.window == 0 || i < params.window ? 0 : i - params.window + 1;
            std::vector<double> s(i + 1, 0.0);
            double max = -INFINITY, total = 0.0;
            for (std::size_t j = begin; j <= i; ++j) {
                double dot = 0.0;
                for (std::size_t d = 0; d < D; ++d) dot += static_cast<double>(q[i * H * D + head * D + d]) * k[j * Hkv * D + g * D + d];
                s[j] = dot * params.scale;
                max = std::max(max, s[j]);
            }
            for (std::size_t j = begin; j <= i; ++j) total += s[j] = std::exp(s[j] - max);
            for (std::size_t j = begin; j <= i; ++j)
                worst = std::max(worst, std::abs(s[j] / total - pattern.values[(head * T + i) * T + j]));
        }
    }
    CHECK_MESSAGE(worst <= tol, f.name << " layer " << l << ": pattern differs from softmax(q k^T) by " << worst);
}

void check_family(const std::string& name, runtime::Route route) {
    CAPTURE(name);
    CAPTURE(runtime::route_name(route));
    const Fixture f(name);
    const models::ModelConfig& c = f.config();
    const models::TensorLoader t = f.loader();
    const bool gemma = c.family == models::Family::Gemma4;
    const Probe clean = run(f, route);
    auto backend = runtime::make_backend(route);

    for (std::uint32_t l = 0; l < c.n_layers; ++l) {
        CAPTURE(l);
        const models::LayerConfig& L = c.layers[l];
        const std::size_t E = c.n_embd, H = L.n_head, D = L.head_dim;
        const Captured& heads = clean.at(Stage::HeadOutputs, l);
        CHECK(heads.rows == kTokens);
        CHECK(heads.cols == H * D);
        const kernels::WeightMatrix w_o = t.matrix(weight(l, "attn_output"), E, H * D);
        const std::vector<float> attn_norm = gemma ? t.vector(weight(l, "post_attention_norm"), E) : std::vector<float>{};
        const std::vector<float> ffn_norm = gemma ? t.vector(weight(l, "post_ffw_norm"), E) : std::vector<float>{};

        // after_attention = attn_output(head_outputs) (then Gemma 4's post norm)
        check_product(route, *backend, w_o, heads, gemma ? &attn_norm : nullptr, c.rms_eps,
                      clean.at(Stage::AfterAttention, l), "after_attention");

        // after_mlp = ffn_down(mlp_activation) (then Gemma 4's post norm)
        const Captured& activation = clean.at(Stage::MlpActivation, l);
        CHECK(activation.cols == L.n_ff);
        check_product(route, *backend, t.matrix(weight(l, "ffn_down"), E, L.n_ff), activation,
                      gemma ? &ffn_norm : nullptr, c.rms_eps, clean.at(Stage::AfterMlp, l), "after_mlp");

        // residual_mid = before_layer + after_attention, the residual add's own float sums
        // (both routes add elementwise in float); Llama and Qwen3: after_layer = residual_mid
        // + after_mlp (Gemma 4 adds its per-layer embedding and layer scale after that).
        const Captured& mid = clean.at(Stage::ResidualMid, l);
        const Captured& entering = clean.at(Stage::BeforeLayer, l);
        const Captured& attention = clean.at(Stage::AfterAttention, l);
        REQUIRE(mid.values.size() == entering.values.size());
        std::vector<float> sum(mid.values.size());
        for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = entering.values[i] + attention.values[i];
        CHECK_MESSAGE(mid.values == sum, "residual_mid is not before_layer + after_attention");
        if (!gemma) {
            const Captured& mlp_out = clean.at(Stage::AfterMlp, l);
            for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = mid.values[i] + mlp_out.values[i];
            CHECK_MESSAGE(clean.at(Stage::AfterLayer, l).values == sum, "after_layer is not residual_mid + after_mlp");
        }

        // mlp_input = the route's rms_norm(residual_mid) · ffn_norm, and it is what the MLP
        // reads: the route's act(gate(mlp_input)) * up(mlp_input) is mlp_activation, bit for bit.
        {
            kernels::Ops ops(*backend);
            const Captured& mlp_in = clean.at(Stage::MlpInput, l);
            REQUIRE(mlp_in.values.size() == mid.values.size());
            std::vector<float> normed(mid.values.size());
            ops.rms_norm({"ffn_norm", 0, kernels::OpKind::Norm}, kernels::ConstRows(mid.values.data(), kTokens, E),
                         t.vector(weight(l, "ffn_norm"), E), c.rms_eps, kernels::Rows(normed.data(), kTokens, E));
            CHECK_MESSAGE(mlp_in.values == normed, "mlp_input is not the MLP's norm of residual_mid");
            std::vector<float> gate(kTokens * L.n_ff), up(kTokens * L.n_ff), act(kTokens * L.n_ff);
            const kernels::Rows gate_rows(gate.data(), kTokens, L.n_ff), up_rows(up.data(), kTokens, L.n_ff),
                act_rows(act.data(), kTokens, L.n_ff);
            const kernels::ConstRows in(mlp_in.values.data(), kTokens, E);
            ops.matmul({"ffn_gate", 0, kernels::OpKind::Projection}, in, t.matrix(weight(l, "ffn_gate"), L.n_ff, E),
                       gate_rows);
            ops.matmul({"ffn_up", 0, kernels::OpKind::Projection}, in, t.matrix(weight(l, "ffn_up"), L.n_ff, E), up_rows);
            if (gemma) ops.geglu({"ffn_geglu", 0, kernels::OpKind::Activation}, gate_rows, up_rows, act_rows);
            else ops.swiglu({"ffn_swiglu", 0, kernels::OpKind::Activation}, gate_rows, up_rows, act_rows);
            CHECK_MESSAGE(act == activation.values, "mlp_activation is not the MLP of mlp_input");
        }

        // attention_pattern: [H * T, n_kv], rows sum to 1, causal, inside the window
        const Captured& pattern = clean.at(Stage::AttentionPattern, l);
        REQUIRE(pattern.rows == H * kTokens);
        REQUIRE(pattern.cols == kTokens);
        const std::size_t window = models::attention_params(c, L).window;
        std::size_t masked = 0;
        double worst_sum = 0.0;
        for (std::size_t r = 0; r < pattern.rows; ++r) {
            const std::size_t i = r % kTokens;  // the query's position
            double sum = 0.0;
            for (std::size_t j = 0; j < kTokens; ++j) {
                const float p = pattern.values[r * kTokens + j];
                sum += p;
                const bool visible = j <= i && (window == 0 || i - j < window);
                if (!visible) masked += p != 0.0f;
                else CHECK(p >= 0.0f);
            }
            worst_sum = std::max(worst_sum, std::abs(sum - 1.0));
        }
        CHECK_MESSAGE(masked == 0, masked << " masked positions hold a probability");
        CHECK(worst_sum <= 1e-6);
        check_pattern_against_weights(f, route, clean, l, 1e-5);

        // Zeroing head h changes after_attention by exactly that head's term.
        const std::size_t h = H - 1;
        const Probe ablated = run(f, route, Probe::ZeroHead{l, h, D});
        const Captured& ablated_heads = ablated.at(Stage::HeadOutputs, l);
        for (std::size_t r = 0; r < kTokens; ++r)
            for (std::size_t d = 0; d < D; ++d) REQUIRE(ablated_heads.values[r * H * D + h * D + d] == 0.0f);
        check_product(route, *backend, w_o, ablated_heads, gemma ? &attn_norm : nullptr, c.rms_eps,
                      ablated.at(Stage::AfterAttention, l), "ablated after_attention");
        if (!gemma && route == runtime::Route::Reference) {
            // Linear up to the residual add: the difference is exactly head h's term.
            const std::vector<double> term = product(w_o, heads, h * D, (h + 1) * D);
            const Captured& before = clean.at(Stage::AfterAttention, l);
            const Captured& after = ablated.at(Stage::AfterAttention, l);
            double worst = 0.0, largest = 0.0;
            for (std::size_t i = 0; i < term.size(); ++i) {
                worst = std::max(worst, std::abs((static_cast<double>(before.values[i]) - after.values[i]) - term[i]));
                largest = std::max(largest, std::abs(term[i]));
            }
            CHECK(largest > 1e-4);  // the head contributes something: the check can fail
            CHECK_MESSAGE(worst <= kReferenceTolerance, "the change differs from head " << h << "'s term by " << worst);
        }
        // Layers before the ablated one saw exactly the clean computation.
        if (l > 0) CHECK(ablated.at(Stage::AfterLayer, l - 1).values == clean.at(Stage::AfterLayer, l - 1).values);
    }
}

const char* const kFamilies[] = {"llama-2-tiny-random", "synth-llama3-q8_0", "synth-qwen3-q8_0", "synth-gemma4-q8_0",
                                 "synth-gemma4-e-q8_0"};

}  // namespace

TEST_CASE("inner stages, reference route: head_outputs, mlp_activation and attention_pattern identities") {
    for (const char* name : kFamilies) check_family(name, runtime::Route::Reference);
}

TEST_CASE("inner stages, fast route: the same identities within the fast route's envelope") {
    for (const char* name : kFamilies) check_family(name, runtime::Route::Fast);
}

TEST_CASE("an unsubscribed attention_pattern is never materialised") {
    // A hooks object that wants only after_layer: the pattern stage never fires.
    class AfterLayerOnly final : public hooks::ActiveHooks {
    public:
        std::size_t pattern_calls = 0, layer_calls = 0;
        void stage(Stage stage, const hooks::EvalInfo&, std::uint32_t, hooks::TensorView) override {
            pattern_calls += stage == Stage::AttentionPattern;
            layer_calls += stage == Stage::AfterLayer;
        }
        bool wants(Stage stage) const override { return stage == Stage::AfterLayer; }
    };
    const Fixture f("synth-qwen3-q8_0");
    runtime::Session session(*f.model, {.route = runtime::Route::Fast, .context_length = 64, .threads = 2, .max_batch = kTokens});
    AfterLayerOnly hooks;
    session.prefill(prompt(f.config()), false, &hooks);
    CHECK(hooks.layer_calls == f.config().n_layers);
    CHECK(hooks.pattern_calls == 0);
}

TEST_CASE("the built-ins on a real model: ablate heads = [h] zeroes that head, capture saves the attention pattern") {
    const Fixture f("synth-gemma4-q8_0");
    const models::ModelConfig& c = f.config();
    const std::uint32_t layer = 1;
    const std::size_t H = c.layers[layer].n_head, D = c.layers[layer].head_dim;
    TempDir out;
    experiments::RunInfo info;
    info.run_id = "inner-stages";
    info.output_dir = out.path().string();
    info.route = "reference";
    const std::string plugins = EMBER_BUILTIN_PLUGIN_DIR;
    const std::vector<experiments::ExperimentSpec> specs = {
        {plugins + "/libablate.so", fmt::format(R"({{"stage": "head_outputs", "layers": [{}], "heads": [1]}})", layer), {}, "test"},
        {plugins + "/libcapture.so",
         fmt::format(R"({{"stages": ["head_outputs", "attention_pattern"], "layers": [{}], "phase": "prefill", "heads": [1]}})", layer),
         {}, "test"},
    };
    experiments::RunnerOptions options;
    options.log = [](experiments::LogLevel, std::string_view, std::string_view) {};
    experiments::ExperimentRunner runner(specs, info, options);
    runner.on_model_loaded(c);
    CHECK(runner.wants(Stage::AttentionPattern));  // capture subscribed to it...
    CHECK_FALSE(runner.wants(Stage::MlpActivation));  // ...and nobody to this one
    runtime::Session session(*f.model, {.route = runtime::Route::Reference, .context_length = 64, .threads = 2, .max_batch = kTokens});
    hooks::EvalInfo prefill;
    prefill.n_tokens = kTokens;
    runner.before_prefill(prefill);
    session.prefill(prompt(c), false, &runner);
    runner.on_generation_complete(0, experiments::StopReason::MaxTokens);
    runner.finish();

    const auto heads = ember::npy::read(out.path() / "capture" / fmt::format("head_outputs.layer{}.prefill.npy", layer));
    REQUIRE(heads.shape == std::vector<std::size_t>{kTokens, H * D});
    for (std::size_t t = 0; t < kTokens; ++t)
        for (std::size_t d = 0; d < D; ++d) CHECK(heads.values[t * H * D + D + d] == 0.0f);  // head 1 ablated
    double other = 0.0;
    for (std::size_t d = 0; d < D; ++d) other += std::abs(heads.values[d]);
    CHECK(other > 0.0);  // head 0 left alone

    // Only head 1: [T, 1, n_kv] ([positions, heads, n_kv]), each row summing to 1.
    const auto pattern = ember::npy::read(out.path() / "capture" / fmt::format("attention_pattern.layer{}.prefill.npy", layer));
    REQUIRE(pattern.shape == std::vector<std::size_t>{kTokens, 1, kTokens});
    for (std::size_t r = 0; r < kTokens; ++r) {
        double sum = 0.0;
        for (std::size_t j = 0; j < kTokens; ++j) sum += pattern.values[r * kTokens + j];
        CHECK(std::abs(sum - 1.0) <= 1e-6);
    }
}

TEST_CASE("ember extract records the inner stages with the shapes docs/formats.md gives, and verifies") {
    const Fixture f("synth-qwen3-q8_0");
    const models::LayerConfig& L = f.config().layers[1];
    TempDir out;
    const auto dir = out.path() / "run";
    const auto extract = run_command(std::string(EMBER_BINARY) + " extract --route reference --model " +
                                         shell_quote(fixture_path("models/synth-qwen3-q8_0.gguf").string()) +
                                         " --prompt " + shell_quote("مرحبا بالعالم") + " --out " + shell_quote(dir.string()) +
                                         " --stages head_outputs,attention_pattern,mlp_activation --layers 1",
                                     true);
    REQUIRE_MESSAGE(extract.exit_code == 0, extract.output);
    const auto heads = ember::npy::read(dir / "head_outputs.layer1.npy");
    REQUIRE(heads.shape.size() == 2);
    const std::size_t T = heads.shape[0];
    CHECK(heads.shape[1] == std::size_t{L.n_head} * L.head_dim);
    CHECK(ember::npy::read(dir / "mlp_activation.layer1.npy").shape == std::vector<std::size_t>{T, L.n_ff});
    const auto pattern = ember::npy::read(dir / "attention_pattern.layer1.npy");
    REQUIRE(pattern.shape == std::vector<std::size_t>{T, L.n_head, T});  // [positions, n_head, n_kv]
    for (std::size_t r = 0; r < T * L.n_head; ++r) {
        const std::size_t position = r / L.n_head;  // [i, h] at flat row i * n_head + h
        double sum = 0.0;
        for (std::size_t j = 0; j < T; ++j) {
            sum += pattern.values[r * T + j];
            if (j > position) CHECK(pattern.values[r * T + j] == 0.0f);
        }
        CHECK(std::abs(sum - 1.0) <= 1e-6);
    }
    const auto verify = run_command(std::string(EMBER_BINARY) + " verify " + shell_quote(dir.string()), true);
    CHECK_MESSAGE(verify.exit_code == 0, verify.output);
}

TEST_CASE("one layout for attention_pattern: capture and ember extract write [positions, n_head, n_kv], the hook's rows reordered") {
    const Fixture f("synth-qwen3-q8_0");
    const models::ModelConfig& c = f.config();
    const std::uint32_t layer = 1;
    const std::size_t H = c.layers[layer].n_head, T = kTokens;
    const std::vector<std::int32_t> ids = prompt(c);

    // The hook's view: head-major, row h * T + t (plugin.h).
    const Probe probe = run(f, runtime::Route::Reference);
    const Captured& view = probe.at(Stage::AttentionPattern, layer);
    REQUIRE(view.rows == H * T);
    REQUIRE(view.cols == T);

    // capture (every head), in process on the same ids.
    TempDir out;
    experiments::RunInfo info;
    info.run_id = "pattern-layout";
    info.output_dir = out.path().string();
    info.route = "reference";
    const std::vector<experiments::ExperimentSpec> specs = {
        {std::string(EMBER_BUILTIN_PLUGIN_DIR) + "/libcapture.so",
         fmt::format(R"({{"stages": ["attention_pattern"], "layers": [{}], "phase": "prefill"}})", layer), {}, "test"}};
    experiments::RunnerOptions options;
    options.log = [](experiments::LogLevel, std::string_view, std::string_view) {};
    experiments::ExperimentRunner runner(specs, info, options);
    runner.on_model_loaded(c);
    runtime::Session session(*f.model, {.route = runtime::Route::Reference, .context_length = 64, .threads = 2, .max_batch = kTokens});
    hooks::EvalInfo prefill;
    prefill.n_tokens = T;
    runner.before_prefill(prefill);
    session.prefill(ids, false, &runner);
    runner.on_generation_complete(0, experiments::StopReason::MaxTokens);
    runner.finish();
    const auto captured = ember::npy::read(out.path() / "capture" / fmt::format("attention_pattern.layer{}.prefill.npy", layer));

    // ember extract of the same ids.
    std::string id_text;
    for (std::int32_t id : ids) id_text += (id_text.empty() ? "" : ",") + std::to_string(id);
    const auto dir = out.path() / "extract";
    const auto extract = run_command(std::string(EMBER_BINARY) + " extract --route reference --threads 2 --model " +
                                         shell_quote(fixture_path("models/synth-qwen3-q8_0.gguf").string()) + " --ids " +
                                         id_text + " --out " + shell_quote(dir.string()) +
                                         fmt::format(" --stages attention_pattern --layers {}", layer),
                                     true);
    REQUIRE_MESSAGE(extract.exit_code == 0, extract.output);
    const auto extracted = ember::npy::read(dir / fmt::format("attention_pattern.layer{}.npy", layer));

    const std::vector<std::size_t> shape{T, H, T};
    REQUIRE(captured.shape == shape);
    REQUIRE(extracted.shape == shape);
    for (std::size_t t = 0; t < T; ++t)
        for (std::size_t h = 0; h < H; ++h)
            for (std::size_t k = 0; k < T; ++k) {
                const float hook = view.values[(h * T + t) * T + k];
                REQUIRE(captured.values[(t * H + h) * T + k] == hook);
                REQUIRE(extracted.values[(t * H + h) * T + k] == hook);
            }
}

}  // namespace ember::test
