// Rung: interventions (refusals). patch refuses, by name, before the run starts, a source
// that does not hold a layer or a prompt position the config asks to patch (a list, or
// "last"), and a source whose arrays or manifest changed after capture sealed them; it
// never silently does nothing.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include "ember_run.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;

const fs::path kModel = fixture_path("models/stories260K.gguf");
constexpr const char* kPrompt = "Once upon a time";  // 5 tokens with BOS

// A source capturing after_layer at layers 0 and 1, prompt positions 0 and 1, in DIR/source.
fs::path capture_source(const TempDir& dir) {
    const auto r = ember_run(dir, run_config(kModel, kPrompt, 2,
                                             experiment(builtin_plugin("capture"),
                                                        "layers = [0, 1]\npositions = [0, 1]\nphase = \"prefill\"")));
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    fs::rename(dir.path() / "out", dir.path() / "source");
    return dir.path() / "source" / "capture";
}

EmberRun patch_with(const TempDir& dir, const std::string& settings) {
    return ember_run(dir, run_config(kModel, kPrompt, 2,
                                     experiment(builtin_plugin("patch"), "source = 'source/capture'\n" + settings)),
                     "--overwrite");
}

}  // namespace

TEST_CASE("patch refuses a layer or a position its source does not hold, naming it") {
    TempDir dir;
    capture_source(dir);
    const auto layer = patch_with(dir, "layers = [3]");
    CHECK(layer.exit_code == 1);
    CHECK(layer.err.find("holds no array for layer 3 at the selected stages and phase (it holds layers 0, 1)") !=
          std::string::npos);

    const auto position = patch_with(dir, "layers = [1]\npositions = [1, 3]");
    CHECK(position.exit_code == 1);
    CHECK(position.err.find("after_layer.layer1.prefill.npy holds no row for prompt position 3 (it holds positions 0, 1)") !=
          std::string::npos);

    const auto last = patch_with(dir, "positions = \"last\"");
    CHECK(last.exit_code == 1);
    CHECK(last.err.find("holds no row for prompt position 4") != std::string::npos);

    // What the source holds is patched, and the record says how much.
    const auto ok = patch_with(dir, "layers = [0, 1]\npositions = [0, 1]\nphase = \"prefill\"");
    REQUIRE_MESSAGE(ok.exit_code == 0, ok.err);
    const auto record = boost::json::parse(read_text(ok.output_dir / "patch.json")).as_object();
    std::int64_t rows = 0;
    for (const auto& r : record.at("rows_written").as_array()) rows += r.at("rows").to_number<std::int64_t>();
    CHECK(rows == 4);  // 2 layers x 2 positions
}

TEST_CASE("patch refuses a source changed after capture sealed it") {
    TempDir dir;
    const fs::path source = capture_source(dir);
    const fs::path array = source / "after_layer.layer0.prefill.npy";
    std::string bytes = read_text(array);
    bytes[bytes.size() - 2] ^= 0x01;
    write_text(array, bytes);
    const auto changed = patch_with(dir, "layers = [0]");
    CHECK(changed.exit_code == 1);
    CHECK(changed.err.find("after_layer.layer0.prefill.npy does not match the SHA-256 its manifest records") !=
          std::string::npos);

    std::string manifest = read_text(source / "manifest.json");
    manifest.replace(manifest.find("\"complete\": true"), 16, "\"complete\": true ");
    write_text(source / "manifest.json", manifest);
    const auto resealed = patch_with(dir, "layers = [0]");
    CHECK(resealed.exit_code == 1);
    CHECK(resealed.err.find("its manifest's seal does not match its bytes") != std::string::npos);
}

}  // namespace ember::test
