// Rung: smoke + file structure. `ember synth` writes a loadable Llama-shaped model with
// another model's tokenizer (tokenizer.* metadata byte for byte), the shape's tensors,
// finite weights of the documented scale, the same bytes for the same seed. The 1B shape
// itself (1.3 GB) is exercised by scripts/bench.sh, not here.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "gguf/gguf_file.hpp"
#include "kernels/float16.hpp"
#include "kernels/fast/kernel_types.hpp"
#include "models/model_config.hpp"
#include "gguf/gguf_writer.hpp"
#include "model_tools/synth.hpp"
#include "support/fixtures.hpp"

using namespace ember;
using ember::test::fixture_path;
using ember::test::run_command;
using ember::test::shell_quote;
namespace fs = std::filesystem;

namespace {

fs::path temp_path(const std::string& name) {
    return fs::temp_directory_path() / fmt::format("ember-synth-test-{}-{}", ::getpid(), name);
}

test::CommandResult synth(const std::string& options, const fs::path& out) {
    return run_command(fmt::format("{} synth {} {}", EMBER_BINARY, options, shell_quote(out.string())), true);
}

std::vector<char> read_all(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("synth: llama-tiny with the Llama 3 vocabulary, Q8_0, F16 and BF16") {
    const fs::path vocab = fixture_path("models/synth-llama3-q8_0.gguf");
    const gguf::File vocab_file = gguf::File::open(vocab);
    for (const char* type : {"q8_0", "f16", "bf16"}) {
        CAPTURE(type);
        const fs::path out = temp_path(std::string("tiny-") + type + ".gguf");
        const auto r = synth(fmt::format("--shape llama-tiny --type {} --vocab-from {}", type, shell_quote(vocab.string())), out);
        REQUIRE_MESSAGE(r.exit_code == 0, r.output);
        const gguf::File f = gguf::File::open(out);
        const auto config = models::load_model_config(f);
        CHECK(config.n_layers == 2);
        CHECK(config.n_embd == 64);
        CHECK(config.n_vocab == 128256);
        CHECK(f.find_tensor("output.weight") == nullptr);  // tied
        const std::string t = type;
        CHECK(f.get_u32("general.file_type") == (t == "q8_0" ? 7u : t == "f16" ? 1u : 32u));
        // every tokenizer key, byte for byte
        std::size_t copied = 0;
        for (const auto& e : vocab_file.metadata()) {
            if (e.key.substr(0, 10) != "tokenizer.") continue;
            const auto* mine = f.find(e.key);
            REQUIRE_MESSAGE(mine != nullptr, e.key);
            const auto a = vocab_file.bytes().subspan(e.offset, e.end - e.offset);
            const auto b = f.bytes().subspan(mine->offset, mine->end - mine->offset);
            CHECK_MESSAGE((a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0), e.key);
            ++copied;
        }
        CHECK(copied >= 5);
        // matrices: finite, mean ~0, standard deviation ~0.02 (uniform); norms are 1
        const auto* q = f.find_tensor("blk.1.attn_q.weight");
        REQUIRE(q != nullptr);
        CHECK(q->type == (t == "q8_0" ? gguf::GgmlType::Q8_0 : t == "f16" ? gguf::GgmlType::F16 : gguf::GgmlType::BF16));
        const auto data = f.tensor_data(*q);
        double sum = 0, sum_sq = 0;
        for (std::size_t i = 0; i < q->n_elements; ++i) {
            float v;
            if (q->type == gguf::GgmlType::Q8_0) {
                kernels::fast::BlockQ8_0 b;
                std::memcpy(&b, data.data() + (i / 32) * sizeof(b), sizeof(b));
                v = b.qs[i % 32] * kernels::fp16_to_fp32(b.d);
            } else {
                std::uint16_t h;
                std::memcpy(&h, data.data() + 2 * i, 2);
                v = q->type == gguf::GgmlType::F16 ? kernels::fp16_to_fp32(h) : kernels::bf16_to_fp32(h);
            }
            REQUIRE(std::isfinite(v));
            sum += v;
            sum_sq += static_cast<double>(v) * v;
        }
        const double n = static_cast<double>(q->n_elements);
        CHECK(std::fabs(sum / n) < 0.002);
        CHECK(std::sqrt(sum_sq / n) == doctest::Approx(0.02).epsilon(0.05));
        float norm;
        std::memcpy(&norm, f.tensor_data(*f.find_tensor("blk.0.ffn_norm.weight")).data(), 4);
        CHECK(norm == 1.0f);
        fs::remove(out);
    }
}

TEST_CASE("synth: the same seed gives the same bytes, another seed other weights") {
    const fs::path vocab = fixture_path("models/stories260K.gguf");
    const fs::path a = temp_path("a.gguf"), b = temp_path("b.gguf"), c = temp_path("c.gguf");
    const std::string options = fmt::format("--shape llama-tiny --vocab-from {}", shell_quote(vocab.string()));
    REQUIRE(synth(options + " --seed 5", a).exit_code == 0);
    REQUIRE(synth(options + " --seed 5", b).exit_code == 0);
    REQUIRE(synth(options + " --seed 6", c).exit_code == 0);
    CHECK(read_all(a) == read_all(b));
    CHECK(read_all(a) != read_all(c));
    CHECK(read_all(a).size() == read_all(c).size());
    for (const auto& p : {a, b, c}) fs::remove(p);
}

TEST_CASE("synth: bad options are named errors") {
    const fs::path out = temp_path("bad.gguf");
    const std::string vocab = shell_quote(fixture_path("models/stories260K.gguf").string());
    auto r = synth("--shape llama-70b --vocab-from " + vocab, out);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("llama-70b") != std::string::npos);
    r = synth("--type q4_k --vocab-from " + vocab, out);
    CHECK(r.exit_code == 2);
    r = synth("--shape llama-tiny", out);  // no --vocab-from
    CHECK(r.exit_code == 2);
    // a GGUF without a vocabulary
    const fs::path empty = temp_path("novocab.gguf");
    {
        gguf::Writer w;
        w.set_string("general.architecture", "llama");
        w.write_file(empty);
    }
    r = synth("--shape llama-tiny --vocab-from " + shell_quote(empty.string()), out);
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("tokenizer.ggml.tokens") != std::string::npos);
    CHECK_FALSE(fs::exists(out));
    fs::remove(empty);
}
