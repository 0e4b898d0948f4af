// Rung: smoke (artifact integrity). `ember verify` on a real extraction: a clean directory
// passes; a flipped byte anywhere in the manifest (every byte is tried), in a shard's data
// or header, a truncated or missing file, and an array whose header disagrees with a
// (re-sealed) manifest are each reported by file name with exit status 1; so are files
// the manifest does not list (the seal covers the whole directory), and hostile sizes
// and shapes in a correctly sealed manifest are named by key.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <boost/json.hpp>

#include <fstream>
#include <functional>
#include <sstream>

#include "record/run_directory.hpp"
#include "record/verify.hpp"
#include "support/files.hpp"
#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

void flip(const fs::path& path, std::size_t offset) {
    std::string bytes = read_all(path);
    REQUIRE(offset < bytes.size());
    bytes[offset] = static_cast<char>(bytes[offset] ^ 0x01);
    write_all(path, bytes);
}

// An extraction of stories260K with several kinds of arrays and a trace.
fs::path extraction(const TempDir& dir) {
    const fs::path out = dir.path() / "run";
    const CommandResult r = run_command(
        fmt::format("{} extract --model {} --prompt {} --out {} --stages after_layer,after_mlp --layers 0,3 "
                    "--logits last --logit-lens 3 --trace {} --threads 2",
                    EMBER_BINARY, shell_quote(fixture_path("models/stories260K.gguf").string()),
                    shell_quote("Once upon a time"), shell_quote(out.string()), shell_quote((out / "trace.jsonl").string())),
        true);
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    return out;
}

CommandResult verify_cli(const fs::path& dir) {
    return run_command(fmt::format("{} verify {}", EMBER_BINARY, shell_quote(dir.string())), true);
}

}  // namespace

TEST_CASE("ember verify accepts an untouched run directory") {
    TempDir dir;
    const fs::path out = extraction(dir);
    const CommandResult r = verify_cli(out);
    CHECK_MESSAGE(r.exit_code == 0, r.output);
    // 4 hidden-state arrays, logits, 2 x 2 lens arrays and 2 lens pieces files, the trace.
    CHECK(r.output.find("ok: 12 files match") != std::string::npos);
    const record::VerifyReport report = record::verify_run_directory(out);
    CHECK(report.ok());
    CHECK(report.warnings.empty());
    CHECK(report.config_hash.size() == 64);
}

TEST_CASE("ember verify names a shard with a flipped byte in its data or its header") {
    TempDir dir;
    const fs::path out = extraction(dir);
    const fs::path shard = out / "after_mlp.layer3.npy";
    const std::size_t size = fs::file_size(shard);
    for (std::size_t offset : {std::size_t{20}, size / 2, size - 1}) {
        CAPTURE(offset);
        flip(shard, offset);
        const CommandResult r = verify_cli(out);
        CHECK(r.exit_code == 1);
        CHECK(r.output.find("after_mlp.layer3.npy: SHA-256 ") != std::string::npos);
        flip(shard, offset);
        CHECK(verify_cli(out).exit_code == 0);
    }
}

TEST_CASE("a flipped byte anywhere in the manifest is caught and blamed on manifest.json") {
    TempDir dir;
    const fs::path out = extraction(dir);
    const fs::path manifest = out / "manifest.json";
    const std::string original = read_all(manifest);
    for (std::size_t offset = 0; offset < original.size(); ++offset) {
        std::string bytes = original;
        bytes[offset] = static_cast<char>(bytes[offset] ^ 0x01);
        write_all(manifest, bytes);
        const record::VerifyReport report = record::verify_run_directory(out);
        REQUIRE_MESSAGE(report.problems.size() == 1, "offset " << offset);
        CHECK(report.problems[0].file == "manifest.json");
    }
    // And through the command line, once in a value and once in the seal.
    for (std::size_t offset : {original.find("reference") + 2, original.rfind('"') - 3}) {
        std::string bytes = original;
        bytes[offset] = static_cast<char>(bytes[offset] ^ 0x01);
        write_all(manifest, bytes);
        const CommandResult r = verify_cli(out);
        CHECK(r.exit_code == 1);
        CHECK(r.output.find("manifest.json: ") != std::string::npos);
    }
    write_all(manifest, original);
    CHECK(verify_cli(out).exit_code == 0);
}

TEST_CASE("missing, truncated and unlisted files") {
    TempDir dir;
    const fs::path out = extraction(dir);
    fs::remove(out / "logits.npy");
    std::string lens = read_all(out / "logit_lens.layer0.ids.npy");
    write_all(out / "logit_lens.layer0.ids.npy", lens.substr(0, lens.size() - 4));
    write_all(out / "notes.txt", "mine\n");
    const CommandResult r = verify_cli(out);
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("logits.npy: missing (listed in the manifest)") != std::string::npos);
    CHECK(r.output.find(fmt::format("logit_lens.layer0.ids.npy: is {} bytes, the manifest says {}", lens.size() - 4,
                                    lens.size())) != std::string::npos);
    CHECK(r.output.find("notes.txt: is not listed in the manifest") != std::string::npos);
    CHECK(r.output.find("warning:") == std::string::npos);

    TempDir empty;
    const CommandResult none = verify_cli(empty.path());
    CHECK(none.exit_code == 1);
    CHECK(none.output.find("manifest.json: missing") != std::string::npos);
    CHECK(run_command(fmt::format("{} verify", EMBER_BINARY), true).exit_code == 2);
}

TEST_CASE("an array whose header disagrees with a correctly sealed manifest is named") {
    TempDir dir;
    const fs::path out = extraction(dir);
    json::object manifest = json::parse(read_all(out / "manifest.json")).as_object();
    for (auto& t : manifest.at("tensors").as_array()) {
        json::object& entry = t.as_object();
        if (entry.at("file") == "after_layer.layer3.npy") entry["shape"] = {3, 64};
    }
    write_all(out / "manifest.json", record::seal_manifest(std::move(manifest)));
    const record::VerifyReport report = record::verify_run_directory(out);
    REQUIRE(!report.ok());
    bool named = false;
    for (const auto& p : report.problems) {
        if (p.file == "after_layer.layer3.npy" && p.message.find("has shape (5, 64), the manifest says (3, 64)") != std::string::npos)
            named = true;
    }
    CHECK(named);
}

TEST_CASE("negative, huge and non-integer sizes and shapes are named by file and key") {
    TempDir dir;
    const fs::path out = extraction(dir);
    const json::object original = json::parse(read_all(out / "manifest.json")).as_object();
    struct Case {
        const char* what;
        std::function<void(json::object&)> edit;
        const char* message;
    };
    const std::vector<Case> cases = {
        {"negative size", [](json::object& m) { m["files"].as_object()["logits.npy"].as_object()["bytes"] = -3; },
         "files.logits.npy.bytes is -3, a negative count"},
        {"huge size",
         [](json::object& m) { m["files"].as_object()["logits.npy"].as_object()["bytes"] = std::uint64_t{1} << 63; },
         "files.logits.npy.bytes is 9223372036854775808, too large to be believed"},
        {"fractional size", [](json::object& m) { m["files"].as_object()["logits.npy"].as_object()["bytes"] = 1.5; },
         "files.logits.npy.bytes is 1.5E0, not a whole number"},
        {"string size", [](json::object& m) { m["files"].as_object()["logits.npy"].as_object()["bytes"] = "big"; },
         "files.logits.npy.bytes is \"big\", not a number"},
        {"negative dimension", [](json::object& m) { m["tensors"].as_array()[0].as_object()["shape"] = {-1, 64}; },
         "tensors[0].shape[0] is -1, a negative count"},
        {"fractional dimension", [](json::object& m) { m["logits"].as_object()["shape"] = {1, 0.5}; },
         "logits.shape[1] is 5E-1, not a whole number"},
        {"overflowing shape",
         [](json::object& m) { m["tensors"].as_array()[1].as_object()["shape"] = {std::uint64_t{1} << 40, std::uint64_t{1} << 40}; },
         "tensors[1].shape holds more elements than any file could"},
        {"escaping name", [](json::object& m) { m["files"].as_object()["../outside"] = {{"bytes", 1}, {"sha256", "x"}}; },
         "files: '../outside' is not a path inside the directory"},
    };
    for (const Case& c : cases) {
        CAPTURE(c.what);
        json::object manifest = original;
        c.edit(manifest);
        write_all(out / "manifest.json", record::seal_manifest(std::move(manifest)));
        const CommandResult r = verify_cli(out);
        CHECK(r.exit_code == 1);
        CHECK_MESSAGE(r.output.find(std::string("manifest.json: ") + c.message) != std::string::npos, r.output);
    }
}

TEST_CASE("ember verify prints the control bytes of a file's name escaped, never as terminal input") {
    // Issue 24: a file named with an escape sequence and a newline printed them raw, so a
    // directory could paint the terminal or fake an "ok:" line.
    TempDir dir;
    const fs::path out = extraction(dir);
    write_all(out / "x\x1b[2J\nok: 99 files match", "mine\n");
    const CommandResult r = verify_cli(out);
    CHECK(r.exit_code == 1);
    CHECK_MESSAGE(r.output.find("x\\x1b[2J\\x0aok: 99 files match: is not listed in the manifest") != std::string::npos,
                  r.output);
    CHECK(r.output.find('\x1b') == std::string::npos);
    CHECK(r.output.find("\nok: 99") == std::string::npos);
}

}  // namespace ember::test
