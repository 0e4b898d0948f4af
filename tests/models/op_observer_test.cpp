// Rung: smoke (structure). The seam the trace journal plugs into: with an observer
// attached, every operation of every layer is reported once per evaluation with its name,
// kind, layer, shapes, FLOP estimate, route and kernel; the numbers do not change.
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "gguf/gguf_file.hpp"
#include "models/model.hpp"
#include "runtime/generate.hpp"
#include "runtime/session.hpp"
#include "support/fixtures.hpp"
#include "support/golden.hpp"

namespace ember::test {
namespace {

struct Seen {
    std::string name;
    kernels::OpKind kind;
    std::int32_t layer;
    std::array<std::size_t, 2> input_shape, output_shape;
    std::uint64_t flops;
    std::string route, kernel;
};

class Recorder final : public kernels::OpObserver {
public:
    std::vector<Seen> ops;
    void on_op(const kernels::OpRecord& r) override {
        ops.push_back({std::string(r.site.name), r.site.kind, r.site.layer, r.input_shape, r.output_shape,
                       r.estimated_flops, std::string(r.route), std::string(r.kernel)});
    }
};

}  // namespace

TEST_CASE("op observer: every Llama layer reports the same operations once, numerics unchanged") {
    const gguf::File file = gguf::File::open(fixture_path("models/stories260K.gguf"));
    const auto model = models::load_model(file);
    const models::ModelConfig& c = model->config();
    const std::vector<std::int32_t> prompt = load_golden(f32_golden_path("stories260K")).prompts.at(0).tokens;
    const std::size_t T = prompt.size();

    runtime::Session plain(*model, {.route = runtime::Route::Reference, .threads = 2, .max_batch = T});
    const kernels::ConstRows plain_logits = plain.prefill(prompt);
    const std::vector<float> expected(plain_logits.row(0), plain_logits.row(0) + plain_logits.cols);

    Recorder recorder;
    runtime::Session traced(*model, {.route = runtime::Route::Reference, .threads = 2, .max_batch = T, .observer = &recorder});
    const kernels::ConstRows logits = traced.prefill(prompt);
    CHECK(std::memcmp(logits.row(0), expected.data(), expected.size() * sizeof(float)) == 0);

    const std::vector<std::string> layer_ops = {"attn_norm", "attn_q",      "attn_k",  "attn_v",   "rope_q",
                                                "rope_k",    "cache_k",     "cache_v", "kqv",      "attn_output",
                                                "ffn_inp",   "ffn_norm",    "ffn_gate", "ffn_up",  "ffn_swiglu",
                                                "ffn_down",  "l_out"};
    std::map<std::int32_t, std::vector<std::string>> by_layer;
    for (const Seen& op : recorder.ops) by_layer[op.layer].push_back(op.name);
    CHECK(by_layer[kernels::kNoLayer] == std::vector<std::string>{"token_embd", "result_norm", "output"});
    for (std::int32_t l = 0; l < static_cast<std::int32_t>(c.n_layers); ++l) CHECK(by_layer[l] == layer_ops);
    CHECK(recorder.ops.size() == 3 + c.n_layers * layer_ops.size());

    for (const Seen& op : recorder.ops) {
        CHECK(op.route == "reference");
        if (op.kind == kernels::OpKind::Projection) {
            CHECK(op.kernel == "reference.matmul.f32");
            CHECK(op.flops == 2ull * T * op.input_shape[1] * op.output_shape[1]);
            CHECK(op.input_shape[0] == T);
        }
    }
    CHECK(recorder.ops.back().kind == kernels::OpKind::LmHead);
    CHECK(recorder.ops.back().output_shape == std::array<std::size_t, 2>{1, c.n_vocab});

    // Generation adds one sampling record per chosen token.
    recorder.ops.clear();
    runtime::generate(traced, prompt, {.max_tokens = 4, .sampling = {}}, {});
    std::size_t sampling = 0;
    for (const Seen& op : recorder.ops) sampling += op.kind == kernels::OpKind::Sampling;
    CHECK(sampling == 4);
}

}  // namespace ember::test
