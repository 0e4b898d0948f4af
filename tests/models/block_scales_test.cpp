// Rung: smoke (validation of damaged files). Every block format of the weight-format
// table (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K ... Q6_K) with a NaN or an infinity patched
// into each of its F16 scales (d, and dmin or m) of one block of one tensor of a fixture
// is refused when the model loads, naming the tensor and the block: by load_model, and by
// `ember generate` on both routes (exit 1). Before the check the fast route gave
// plausible tokens for such a file and the reference route NaN logits. A file that
// passed is remembered in the digest cache, and a second load skips the pass.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <stdlib.h>

#include <cstring>
#include <fstream>
#include <vector>

#include "../gguf/file_patcher.hpp"
#include "common/digest_cache.hpp"
#include "common/error.hpp"
#include "kernels/scale_check.hpp"
#include "kernels/weight_format.hpp"
#include "models/block_scales.hpp"
#include "models/model.hpp"
#include "support/files.hpp"
#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace ember::test {
namespace {

// Fixtures holding, between them, a tensor of every block format of the table.
constexpr const char* kQuantFixtures[] = {
    "stories260K-q8_0",       "synth-llama3-k-q4_0",     "synth-gemma4-k-q4_1", "synth-gemma4-k-q5_0",
    "synth-qwen3-k-q5_1",     "synth-gemma4-k-q2_k",     "synth-qwen3-k-q3_k_m", "synth-llama3-k-q4_k_m",
    "synth-qwen3-k-q5_k_m",   "synth-llama3-k-q6_k",
};

std::vector<std::byte> bytes_of(const std::filesystem::path& path) {
    const std::string text = read_all(path);
    std::vector<std::byte> bytes(text.size());
    std::memcpy(bytes.data(), text.data(), text.size());
    return bytes;
}

// A tensor of `format` in one of the fixtures: which fixture, and its name.
struct Target {
    std::string fixture;
    std::string tensor;
};
Target target_for(const kernels::WeightFormat& format) {
    for (const char* fixture : kQuantFixtures) {
        const gguf::File file = gguf::File::open(fixture_path(fmt::format("models/{}.gguf", fixture)));
        for (const gguf::TensorInfo& t : file.tensors())
            if (t.type == format.type && t.nbytes / format.block_bytes >= 3) return {fixture, std::string(t.name)};
    }
    FAIL("no fixture has a tensor of " << format.name);
    return {};
}

struct Poison {
    const char* name;  // as the error prints it
    std::uint16_t bits;
};
constexpr Poison kPoisons[] = {{"NaN", 0x7E00}, {"+inf", 0x7C00}, {"-inf", 0xFC00}, {"NaN", 0xFFFF}};

// The fixture with scale `scale` of block `block` of the tensor set to `bits`.
std::vector<std::byte> patched(const Target& target, const kernels::WeightFormat& format, std::size_t block,
                               std::size_t scale, std::uint16_t bits) {
    const FilePatcher patcher(bytes_of(fixture_path(fmt::format("models/{}.gguf", target.fixture))));
    std::vector<std::byte> bytes = patcher.copy();
    const std::uint64_t at = patcher.tensor(target.tensor).file_offset + block * format.block_bytes + format.scales.offsets[scale];
    FilePatcher::poke(bytes, at, bits);
    return bytes;
}

void write_bytes(const std::filesystem::path& path, const std::vector<std::byte>& bytes) {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

TEST_CASE("block scales: the table lists the F16 scales of every block format where ggml's layouts keep them") {
    // Offsets as ggml-common.h lays the blocks out (model-math §2.2-§2.8), written here
    // independently of quant_blocks.hpp.
    struct Expected {
        const char* name;
        std::vector<std::uint8_t> offsets;
    };
    const Expected expected[] = {{"F32", {}},        {"F16", {}},        {"BF16", {}},      {"Q8_0", {0}},
                                 {"Q4_0", {0}},      {"Q4_1", {0, 2}},   {"Q5_0", {0}},     {"Q5_1", {0, 2}},
                                 {"Q2_K", {80, 82}}, {"Q3_K", {108}},    {"Q4_K", {0, 2}},  {"Q5_K", {0, 2}},
                                 {"Q6_K", {208}}};
    REQUIRE(std::size(expected) == kernels::kWeightFormatCount);
    for (std::size_t i = 0; i < kernels::kWeightFormatCount; ++i) {
        const kernels::WeightFormat& f = kernels::weight_formats()[i];
        CAPTURE(f.name);
        CHECK(f.name == expected[i].name);
        REQUIRE(f.scales.count == expected[i].offsets.size());
        for (std::size_t s = 0; s < f.scales.count; ++s) CHECK(f.scales.offsets[s] == expected[i].offsets[s]);
    }
}

TEST_CASE("block scales: a NaN or inf in any scale of any block format is refused by load_model, naming tensor and block") {
    for (const kernels::WeightFormat& format : kernels::weight_formats()) {
        if (format.scales.count == 0) continue;
        const Target target = target_for(format);
        const gguf::File intact = gguf::File::open(fixture_path(fmt::format("models/{}.gguf", target.fixture)));
        const std::size_t n_blocks = intact.find_tensor(target.tensor)->nbytes / format.block_bytes;
        for (std::size_t scale = 0; scale < format.scales.count; ++scale) {
            for (const Poison& poison : kPoisons) {
                for (const std::size_t block : {std::size_t{0}, n_blocks / 2, n_blocks - 1}) {
                    CAPTURE(format.name);
                    CAPTURE(target.tensor);
                    CAPTURE(scale);
                    CAPTURE(block);
                    CAPTURE(poison.bits);
                    const gguf::File file = gguf::File::from_bytes(patched(target, format, block, scale, poison.bits), "m.gguf");
                    CHECK_THROWS_WITH_AS(models::load_model(file),
                                         fmt::format("m.gguf: tensor '{}' ({}): block {} has a non-finite scale ({} = "
                                                     "{}); the file is damaged",
                                                     target.tensor, format.name, block, format.scales.names[scale],
                                                     poison.name)
                                             .c_str(),
                                         Error);
                }
            }
        }
        // the intact file loads
        CHECK_NOTHROW(models::load_model(gguf::File::from_bytes(bytes_of(fixture_path(
                                                                    fmt::format("models/{}.gguf", target.fixture))),
                                                                "m.gguf")));
    }
}

TEST_CASE("block scales: ember generate refuses a non-finite scale on both routes, exit 1") {
    TempDir dir;
    for (const kernels::WeightFormat& format : kernels::weight_formats()) {
        if (format.scales.count == 0) continue;
        const Target target = target_for(format);
        const gguf::File intact = gguf::File::open(fixture_path(fmt::format("models/{}.gguf", target.fixture)));
        const std::size_t block = intact.find_tensor(target.tensor)->nbytes / format.block_bytes / 2;
        // NaN in d; +inf in the last scale (dmin or m where the format has one)
        const std::pair<std::size_t, Poison> cases[] = {{0, kPoisons[0]}, {format.scales.count - 1u, kPoisons[1]}};
        for (const auto& [scale, poison] : cases) {
            const std::filesystem::path model = dir.path() / fmt::format("{}-{}.gguf", format.name, scale);
            write_bytes(model, patched(target, format, block, scale, poison.bits));
            for (const char* route : built_routes()) {
                CAPTURE(format.name);
                CAPTURE(route);
                const CommandResult r = run_command(
                    fmt::format("EMBER_DIGEST_CACHE={} {} generate --route {} --model {} --prompt hello --max-tokens 1 2>&1",
                                shell_quote((dir.path() / "digests.tsv").string()), EMBER_BINARY, route,
                                shell_quote(model.string())));
                CHECK(r.exit_code == 1);
                CHECK_MESSAGE(r.output.find(fmt::format("tensor '{}' ({}): block {} has a non-finite scale ({} = {})",
                                                        target.tensor, format.name, block, format.scales.names[scale],
                                                        poison.name)) != std::string::npos,
                              r.output);
            }
        }
    }
}

TEST_CASE("block scales: a file that passed is remembered in the digest cache, a changed file is checked again") {
    TempDir dir;
    const std::filesystem::path cache = dir.path() / "digests.tsv";
    REQUIRE(::setenv("EMBER_DIGEST_CACHE", cache.c_str(), 1) == 0);
    const kernels::WeightFormat& q4_k = kernels::weight_format(gguf::GgmlType::Q4_K);
    const Target target = target_for(q4_k);
    const std::filesystem::path model = dir.path() / "m.gguf";
    const std::vector<std::byte> intact = bytes_of(fixture_path(fmt::format("models/{}.gguf", target.fixture)));
    write_bytes(model, intact);

    const gguf::File file = gguf::File::open(model);
    CHECK_FALSE(check_passed_before(file.mapping()->state(), "block-scales-finite-v1"));
    models::check_block_scales(file);
    CHECK(check_passed_before(file.mapping()->state(), "block-scales-finite-v1"));
    CHECK(read_all(cache).find("c1 " + file.mapping()->state().key() + " block-scales-finite-v1\n") != std::string::npos);

    // What the cache remembers is trusted for that state: a record made for a damaged
    // file's state (as if it had passed) skips the pass, so the second load reads no scale.
    const std::filesystem::path damaged = dir.path() / "damaged.gguf";
    write_bytes(damaged, patched(target, q4_k, 1, 1, 0x7E00));
    {
        const gguf::File d = gguf::File::open(damaged);
        CHECK_THROWS_AS(models::check_block_scales(d), Error);
        record_check_passed(d.mapping()->state(), "block-scales-finite-v1");
        CHECK_NOTHROW(models::check_block_scales(d));
    }
    // ... and any write to the file changes its state: it is checked again.
    write_bytes(damaged, patched(target, q4_k, 1, 1, 0x7C00));
    CHECK_THROWS_WITH_AS(models::check_block_scales(gguf::File::open(damaged)),
                         doctest::Contains("block 1 has a non-finite scale (dmin = +inf)"), Error);
    // with the cache off the check always runs
    REQUIRE(::setenv("EMBER_DIGEST_CACHE", "off", 1) == 0);
    CHECK_THROWS_AS(models::check_block_scales(gguf::File::open(damaged)), Error);
    ::unsetenv("EMBER_DIGEST_CACHE");
}

}  // namespace ember::test
