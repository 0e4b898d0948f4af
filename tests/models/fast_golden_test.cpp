// Rungs: golden logits and activation-reference, fast route. Every fixture model, every
// golden prompt, on the fast route against llama.cpp's own outputs MODEL.golden.json
// (the fast route converts activations to each weight's dot-product type and sums in
// llama.cpp's orders: docs/fast-path.md), with the checks of golden_checks.hpp and
// tol = 1e-3 for every family (measured: every model within 5e-7, the goldens' printed
// precision, on every variant). ctest runs this suite once per CPU variant
// (and again with EMBER_CPU=scalar and avx2, which every x86-64 machine CI runs on has;
// tests/models/CMakeLists.txt); each run prints the
// variant and the largest errors per model.
#include "golden_checks.hpp"
#include "kernels/fast/kernel_set.hpp"

namespace ember::test {
namespace {

constexpr double kTolerance = 1e-3;

void check_model(const std::string& name) {
    MESSAGE("kernel set: " << std::string(kernels::fast::process_kernel_set().description));
    golden_checks::check_model(name, runtime::Route::Fast, golden_path(name), kTolerance);
}

}  // namespace

TEST_CASE("golden fast: stories260K") { check_model("stories260K"); }
TEST_CASE("golden fast: stories260K-q8_0") { check_model("stories260K-q8_0"); }
TEST_CASE("golden fast: stories260K-f16") { check_model("stories260K-f16"); }
TEST_CASE("golden fast: stories260K-bf16") { check_model("stories260K-bf16"); }
TEST_CASE("golden fast: llama-2-tiny-random") { check_model("llama-2-tiny-random"); }
TEST_CASE("golden fast: synth-llama3-q8_0") { check_model("synth-llama3-q8_0"); }
TEST_CASE("golden fast: synth-qwen3-q8_0") { check_model("synth-qwen3-q8_0"); }
TEST_CASE("golden fast: synth-gemma4-q8_0") { check_model("synth-gemma4-q8_0"); }
TEST_CASE("golden fast: synth-gemma4-e-q8_0") { check_model("synth-gemma4-e-q8_0"); }
// K-quant and legacy-quant fixtures (../shared/fixtures/README.md, "synth-*-k-*")
TEST_CASE("golden fast: synth-llama3-k-q6_k") { check_model("synth-llama3-k-q6_k"); }
TEST_CASE("golden fast: synth-llama3-k-q4_k_m") { check_model("synth-llama3-k-q4_k_m"); }
TEST_CASE("golden fast: synth-llama3-k-q4_0") { check_model("synth-llama3-k-q4_0"); }
TEST_CASE("golden fast: synth-qwen3-k-q5_k_m") { check_model("synth-qwen3-k-q5_k_m"); }
TEST_CASE("golden fast: synth-qwen3-k-q3_k_m") { check_model("synth-qwen3-k-q3_k_m"); }
TEST_CASE("golden fast: synth-qwen3-k-q5_1") { check_model("synth-qwen3-k-q5_1"); }
TEST_CASE("golden fast: synth-gemma4-k-q4_k_m") { check_model("synth-gemma4-k-q4_k_m"); }
TEST_CASE("golden fast: synth-gemma4-k-q2_k") { check_model("synth-gemma4-k-q2_k"); }
TEST_CASE("golden fast: synth-gemma4-k-q4_1") { check_model("synth-gemma4-k-q4_1"); }
TEST_CASE("golden fast: synth-gemma4-k-q5_0") { check_model("synth-gemma4-k-q5_0"); }

}  // namespace ember::test
