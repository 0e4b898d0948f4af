// Rung: golden file (against llama-quantize's own output). The K-quant and legacy file
// types of `ember quantize` / `ember synth` against the fixtures llama-quantize wrote
// (../shared/fixtures/README.md, "synth-*-k-*"):
//  - the per-tensor type rules: for every quantizable tensor of the Q4_K_M, Q6_K and Q4_0
//    fixtures, target_type gives the type llama-quantize chose;
//  - the file rules, where the fixtures can check them: requantizing the dequantized
//    Q4_0 tensors of synth-llama3-k-q4_0 gives llama-quantize's bytes back, block for
//    block (a Q4_0 block's largest element is always the -8 d that sets d, so the round
//    trip is exact). The F32 originals of the fixtures are not kept, so Q4_K and Q6_K
//    bytes cannot be compared with llama-quantize here (docs/fast-path.md);
//  - a synth llama-tiny-k model of each file type holds the expected types and runs.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "gguf/gguf_file.hpp"
#include "kernels/reference/kernels.hpp"
#include "kernels/weight_format.hpp"
#include "model_tools/quantize.hpp"
#include "support/fixtures.hpp"

using namespace ember;
using ember::test::fixture_path;
using ember::test::run_command;
using ember::test::shell_quote;
namespace fs = std::filesystem;

namespace {

void check_types(const std::string& model, model_tools::FileType type) {
    const gguf::File f = gguf::File::open(fixture_path("models/" + model + ".gguf"));
    const bool has_output = f.find_tensor("output.weight") != nullptr;
    const int n_gqa = model_tools::n_gqa_of(f);
    int n_layers = 0;
    for (const auto& t : f.tensors()) n_layers = std::max(n_layers, model_tools::tensor_layer(t.name) + 1);
    std::size_t checked = 0;
    for (const auto& t : f.tensors()) {
        if (!model_tools::is_quantizable_weight(t.name, t.n_dims)) continue;
        CAPTURE(t.name);
        CHECK(gguf::type_name(model_tools::target_type(type, t.name, t.ne[0], model_tools::tensor_layer(t.name), n_layers,
                                                       has_output, n_gqa)) == gguf::type_name(t.type));
        ++checked;
    }
    CHECK(checked > 10);
}

}  // namespace

TEST_CASE("quantize types: llama-quantize's per-tensor types of every K-quant and legacy fixture of ember's file types") {
    check_types("synth-llama3-k-q4_k_m", model_tools::FileType::q4_k_m);
    check_types("synth-gemma4-k-q4_k_m", model_tools::FileType::q4_k_m);
    check_types("synth-llama3-k-q6_k", model_tools::FileType::q6_k);
    check_types("synth-llama3-k-q4_0", model_tools::FileType::q4_0);
    check_types("synth-gemma4-k-q4_1", model_tools::FileType::q4_1);
    check_types("synth-qwen3-k-q5_1", model_tools::FileType::q5_1);
    check_types("synth-gemma4-k-q2_k", model_tools::FileType::q2_k);
    check_types("synth-qwen3-k-q3_k_m", model_tools::FileType::q3_k_m);
    check_types("synth-qwen3-k-q5_k_m", model_tools::FileType::q5_k_m);
    check_types("stories260K-q8_0", model_tools::FileType::q8_0);
}

// Requantizing the dequantized tensors of `type` in `model` gives llama-quantize's bytes back
// (where the file rule's round trip is exact); returns how many tensors were compared.
static std::size_t check_round_trip(const std::string& model, gguf::GgmlType type) {
    const gguf::File f = gguf::File::open(fixture_path("models/" + model + ".gguf"));
    std::size_t tensors = 0;
    for (const auto& t : f.tensors()) {
        if (t.type != type) continue;
        CAPTURE(t.name);
        const auto data = f.tensor_data(t);
        std::vector<float> values(t.n_elements);
        kernels::reference::dequantize_row(t.type, data.data(), values.data(), values.size());
        const std::vector<std::byte> again = model_tools::quantize_rows(t.type, values, t.ne[0]);
        REQUIRE(again.size() == data.size());
        CHECK(std::memcmp(again.data(), data.data(), again.size()) == 0);
        ++tensors;
    }
    return tensors;
}

TEST_CASE("quantize types: Q4_0 file rule gives llama-quantize's bytes back from its dequantized tensors") {
    CHECK(check_round_trip("synth-llama3-k-q4_0", gguf::GgmlType::Q4_0) == 15);
}

TEST_CASE("quantize types: Q4_1 and Q5_1 file rules give llama-quantize's bytes back from its dequantized tensors") {
    CHECK(check_round_trip("synth-gemma4-k-q4_1", gguf::GgmlType::Q4_1) == 35);
    CHECK(check_round_trip("synth-qwen3-k-q5_1", gguf::GgmlType::Q5_1) == 14);
}

TEST_CASE("quantize types: ember synth writes models of every file type, of llama-quantize's types, that run") {
    const std::string vocab = shell_quote(fixture_path("models/stories260K.gguf").string());
    for (const char* type : {"q4_0", "q4_1", "q5_1", "q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k"}) {
        CAPTURE(type);
        const fs::path out = fs::temp_directory_path() / fmt::format("ember-synth-k-{}-{}.gguf", ::getpid(), type);
        auto r = run_command(fmt::format("{} synth --shape llama-tiny-k --type {} --vocab-from {} {}", EMBER_BINARY, type,
                                         vocab, shell_quote(out.string())),
                             true);
        REQUIRE_MESSAGE(r.exit_code == 0, r.output);
        {
            const gguf::File f = gguf::File::open(out);
            const model_tools::FileType ft = model_tools::parse_file_type(type);
            CHECK(f.get_u32("general.file_type") == static_cast<std::uint32_t>(ft));
            for (const auto& t : f.tensors()) {
                if (!model_tools::is_quantizable_weight(t.name, t.n_dims)) continue;
                CAPTURE(t.name);
                CHECK(t.type ==
                      model_tools::target_type(ft, t.name, t.ne[0], model_tools::tensor_layer(t.name), 2, false, 2));
            }
            CHECK(f.find_tensor("token_embd.weight")->type == gguf::GgmlType::Q6_K);  // the tied LM head
        }
        for (const char* route : test::built_routes()) {
            r = run_command(fmt::format("{} generate --model {} --route {} --prompt 'Once upon' --max-tokens 3", EMBER_BINARY,
                                        shell_quote(out.string()), route),
                            true);
            CHECK_MESSAGE(r.exit_code == 0, route << ": " << r.output);
        }
        fs::remove(out);
    }
}
