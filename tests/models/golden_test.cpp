// Rungs: golden logits and activation-reference. Every fixture model, every golden
// prompt, on the reference route against llama.cpp's MODEL.f32.golden.json, with the
// checks of golden_checks.hpp. tol = 1e-5 for Llama and Qwen3, 2e-3 for Gemma 4
// (llama.cpp's GELU goes through an F16 table, model-math §3.5).
#include "golden_checks.hpp"

namespace ember::test {
namespace {

void check_model(const std::string& name) {
    const gguf::File file = gguf::File::open(fixture_path("models/" + name + ".gguf"));
    const double tol = models::load_model_config(file).family == models::Family::Gemma4 ? 2e-3 : 1e-5;
    golden_checks::check_model(name, runtime::Route::Reference, f32_golden_path(name), tol);
}

}  // namespace

TEST_CASE("golden f32: stories260K") { check_model("stories260K"); }
TEST_CASE("golden f32: stories260K-q8_0") { check_model("stories260K-q8_0"); }
TEST_CASE("golden f32: stories260K-f16") { check_model("stories260K-f16"); }
TEST_CASE("golden f32: stories260K-bf16") { check_model("stories260K-bf16"); }
TEST_CASE("golden f32: llama-2-tiny-random") { check_model("llama-2-tiny-random"); }
TEST_CASE("golden f32: synth-llama3-q8_0") { check_model("synth-llama3-q8_0"); }
TEST_CASE("golden f32: synth-qwen3-q8_0") { check_model("synth-qwen3-q8_0"); }
TEST_CASE("golden f32: synth-gemma4-q8_0") { check_model("synth-gemma4-q8_0"); }
TEST_CASE("golden f32: synth-gemma4-e-q8_0") { check_model("synth-gemma4-e-q8_0"); }
// K-quant and legacy-quant fixtures (../shared/fixtures/README.md, "synth-*-k-*")
TEST_CASE("golden f32: synth-llama3-k-q6_k") { check_model("synth-llama3-k-q6_k"); }
TEST_CASE("golden f32: synth-llama3-k-q4_k_m") { check_model("synth-llama3-k-q4_k_m"); }
TEST_CASE("golden f32: synth-llama3-k-q4_0") { check_model("synth-llama3-k-q4_0"); }
TEST_CASE("golden f32: synth-qwen3-k-q5_k_m") { check_model("synth-qwen3-k-q5_k_m"); }
TEST_CASE("golden f32: synth-qwen3-k-q3_k_m") { check_model("synth-qwen3-k-q3_k_m"); }
TEST_CASE("golden f32: synth-qwen3-k-q5_1") { check_model("synth-qwen3-k-q5_1"); }
TEST_CASE("golden f32: synth-gemma4-k-q4_k_m") { check_model("synth-gemma4-k-q4_k_m"); }
TEST_CASE("golden f32: synth-gemma4-k-q2_k") { check_model("synth-gemma4-k-q2_k"); }
TEST_CASE("golden f32: synth-gemma4-k-q4_1") { check_model("synth-gemma4-k-q4_1"); }
TEST_CASE("golden f32: synth-gemma4-k-q5_0") { check_model("synth-gemma4-k-q5_0"); }

}  // namespace ember::test
