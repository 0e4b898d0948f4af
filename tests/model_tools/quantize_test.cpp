// Rung: golden file (against llama.cpp's own output). `ember quantize` on stories260K.gguf
// writes exactly the bytes of stories260K-q8_0.gguf, which llama-quantize produced: every
// tensor, its order and offsets, and the metadata (general.file_type = 7,
// general.quantization_version = 2). From the F16 / BF16 copies of the same model the
// output has the same structure and values within one quantization step. Plus the file
// rule itself (ties away from zero), llama.cpp's tensor order, and the errors.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "gguf/gguf_file.hpp"
#include "gguf/gguf_writer.hpp"
#include "kernels/float16.hpp"
#include "kernels/quantize_row.hpp"
#include "model_tools/quantize.hpp"
#include "support/fixtures.hpp"

using namespace ember;
using ember::test::fixture_path;
using ember::test::run_command;
using ember::test::shell_quote;
namespace fs = std::filesystem;

namespace {

fs::path temp_path(const std::string& name) {
    return fs::temp_directory_path() / fmt::format("ember-quantize-test-{}-{}", ::getpid(), name);
}

test::CommandResult quantize(const fs::path& in, const fs::path& out, const std::string& type = "q8_0") {
    return run_command(fmt::format("{} quantize {} {} {}", EMBER_BINARY, shell_quote(in.string()), shell_quote(out.string()), type),
                       true);
}

std::vector<char> read_all(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Element i of a Q8_0 / F16 / F32 tensor, and the quantization step of its block.
float element(const gguf::File& f, const gguf::TensorInfo& t, std::size_t i, float* step = nullptr) {
    const auto data = f.tensor_data(t);
    if (t.type == gguf::GgmlType::Q8_0) {
        kernels::BlockQ8_0 b;
        std::memcpy(&b, data.data() + (i / 32) * sizeof(b), sizeof(b));
        const float d = kernels::fp16_to_fp32(b.d);
        if (step) *step = d;
        return b.qs[i % 32] * d;
    }
    if (step) *step = 0;
    if (t.type == gguf::GgmlType::F16) {
        std::uint16_t h;
        std::memcpy(&h, data.data() + 2 * i, 2);
        return kernels::fp16_to_fp32(h);
    }
    float v;
    std::memcpy(&v, data.data() + 4 * i, 4);
    return v;
}

}  // namespace

TEST_CASE("quantize: the file rule rounds ties away from zero and uses id = 1/d") {
    std::vector<float> x(32, 0.0f);
    x[0] = 127.0f;  // d = 1, id = 1: x.5 values are exact ties
    x[1] = 14.5f;
    x[2] = -12.5f;
    x[3] = 0.5f;
    x[4] = -0.5f;
    x[5] = 2.5f;
    kernels::BlockQ8_0 b;
    kernels::quantize_row_q8_0_file_rule(x.data(), &b, 32);
    CHECK(b.d == 0x3C00);
    CHECK(b.qs[0] == 127);
    CHECK(b.qs[1] == 15);   // the x86 runtime rule would give 14
    CHECK(b.qs[2] == -13);
    CHECK(b.qs[3] == 1);
    CHECK(b.qs[4] == -1);
    CHECK(b.qs[5] == 3);
    std::vector<float> zeros(32, 0.0f);
    kernels::quantize_row_q8_0_file_rule(zeros.data(), &b, 32);
    CHECK(b.d == 0);
    for (auto q : b.qs) CHECK(q == 0);
}

TEST_CASE("quantize: llama.cpp's tensor order (non-layer tensors, then by layer number, then name)") {
    CHECK(model_tools::tensor_layer("blk.10.attn_q.weight") == 10);
    CHECK(model_tools::tensor_layer("blk.2.ffn_up.weight") == 2);
    CHECK(model_tools::tensor_layer("output.weight") == -1);
    CHECK(model_tools::tensor_layer("blk.x.weight") == -1);
    CHECK(model_tools::is_quantizable_weight("blk.0.attn_q.weight", 2));
    CHECK_FALSE(model_tools::is_quantizable_weight("blk.0.attn_norm.weight", 1));
    CHECK_FALSE(model_tools::is_quantizable_weight("rope_freqs.weight", 1));
    CHECK_FALSE(model_tools::is_quantizable_weight("blk.0.ffn_gate_inp.weight", 2));
    CHECK_FALSE(model_tools::is_quantizable_weight("blk.0.attn_q.bias", 2));
}

TEST_CASE("quantize: stories260K F32 -> Q8_0 is byte-identical to llama-quantize's file") {
    const fs::path out = temp_path("stories-q8_0.gguf");
    const auto r = quantize(fixture_path("models/stories260K.gguf"), out);
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    const gguf::File got = gguf::File::open(out);
    const gguf::File want = gguf::File::open(fixture_path("models/stories260K-q8_0.gguf"));
    CHECK(got.get_u32("general.file_type") == 7u);
    CHECK(got.get_u32("general.quantization_version") == 2u);
    REQUIRE(got.tensors().size() == want.tensors().size());
    for (std::size_t i = 0; i < got.tensors().size(); ++i) {
        const auto& g = got.tensors()[i];
        const auto& w = want.tensors()[i];
        CAPTURE(w.name);
        CHECK(g.name == w.name);
        CHECK(g.type == w.type);
        CHECK(g.ne == w.ne);
        CHECK(g.offset == w.offset);
        const auto gd = got.tensor_data(g), wd = want.tensor_data(w);
        CHECK((gd.size() == wd.size() && std::memcmp(gd.data(), wd.data(), gd.size()) == 0));
    }
    REQUIRE(got.metadata().size() == want.metadata().size());
    for (std::size_t i = 0; i < got.metadata().size(); ++i) CHECK(got.metadata()[i].key == want.metadata()[i].key);
    CHECK(read_all(out) == read_all(fixture_path("models/stories260K-q8_0.gguf")));  // the whole file
    fs::remove(out);
}

TEST_CASE("quantize: from F16 and BF16 the structure matches and values are within one step") {
    const gguf::File want = gguf::File::open(fixture_path("models/stories260K-q8_0.gguf"));
    for (const char* source : {"stories260K-f16", "stories260K-bf16"}) {
        CAPTURE(source);
        const fs::path out = temp_path(std::string(source) + "-q8_0.gguf");
        const auto r = quantize(fixture_path(std::string("models/") + source + ".gguf"), out);
        REQUIRE_MESSAGE(r.exit_code == 0, r.output);
        const gguf::File got = gguf::File::open(out);
        CHECK(got.get_u32("general.file_type") == 7u);
        REQUIRE(got.tensors().size() == want.tensors().size());
        for (std::size_t i = 0; i < got.tensors().size(); ++i) {
            const auto& g = got.tensors()[i];
            const auto& w = want.tensors()[i];
            CAPTURE(w.name);
            REQUIRE(g.name == w.name);
            CHECK(g.ne == w.ne);
            CHECK(g.type == (g.n_dims == 1 ? gguf::GgmlType::F32 : w.type));
            // the source values differ from the F32 original by F16 / BF16 rounding, so a
            // quantized value may land one step away, never more
            for (std::size_t e = 0; e < g.n_elements; ++e) {
                float step_g = 0, step_w = 0;
                const float a = element(got, g, e, &step_g), b = element(want, w, e, &step_w);
                const float tol = 1.01f * std::max(step_g, step_w) + 0.01f * std::fabs(b);
                if (!(std::fabs(a - b) <= tol)) FAIL("element " << e << ": " << a << " vs " << b);
            }
        }
        fs::remove(out);
    }
}

TEST_CASE("quantize: bad arguments and inputs are named errors") {
    const fs::path out = temp_path("bad.gguf");
    auto r = quantize(fixture_path("models/stories260K.gguf"), out, "q3_k_s");
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("q3_k_s") != std::string::npos);
    r = quantize("/nonexistent/model.gguf", out);
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("/nonexistent/model.gguf") != std::string::npos);
    CHECK_FALSE(fs::exists(out));

    // a matrix in a type ember cannot convert
    const fs::path q4 = temp_path("q4.gguf");
    {
        gguf::Writer w;
        w.set_string("general.architecture", "llama");
        const std::uint64_t ne[2] = {32, 2};
        w.add_tensor("blk.0.attn_q.weight", gguf::GgmlType::Q4_0, ne, std::vector<std::byte>(2 * 18));
        w.write_file(q4);
    }
    r = quantize(q4, out);
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("is Q4_0") != std::string::npos);
    CHECK(r.output.find(q4.string()) != std::string::npos);
    CHECK_FALSE(fs::exists(out));

    const fs::path copy = temp_path("same.gguf");
    fs::copy_file(fixture_path("models/stories260K.gguf"), copy, fs::copy_options::overwrite_existing);
    r = quantize(copy, copy);
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("overwrite the input") != std::string::npos);
    fs::remove(copy);
    fs::remove(q4);
}
