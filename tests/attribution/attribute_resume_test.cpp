// Rung: smoke (run records). A dataset attribution run ([attribute] with [dataset]) that is
// interrupted goes on, run again, after its last finished sample, and its directory is then
// what an uninterrupted run writes: every file byte for byte, the manifest too but for its
// timing and seal (and, from the command line, the run id, which is the interrupted run's);
// a stop after any sample, a half-written line past the resume point, kill -9 of the
// command at several points; an unfinished run of another config in the directory is
// started over. A configured run's manifest carries its run id.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <boost/json.hpp>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>

#include "attribution/configured_run.hpp"
#include "common/error.hpp"
#include "config/run_config.hpp"
#include "runtime/loaded_model.hpp"
#include "support/files.hpp"
#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace ember {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

const char* const kPrompts[] = {
    "Once upon a time, there was a little girl named Lily",  "Once upon a time, there was a little boy named Tom",
    "One day, a girl went to the park with her mom",           "The cat sat on the mat and looked at the bird",
    "Lily had a red ball and she liked to play",               "Tom was sad because his toy was broken",
    "The sun was warm and the sky was blue",                   "She smiled at her friend and said hello",
};

std::string dataset_lines(std::size_t copies) {
    std::string lines;
    for (std::size_t c = 0; c < copies; ++c)
        for (const char* p : kPrompts) lines += json::serialize(json::object{{"text", p}, {"select", "last"}}) + "\n";
    return lines;
}

// Every file of a run directory by name; the manifest without what differs between two
// runs of one config (its timing, its seal, and unless `keep_run_id` its run id).
std::map<std::string, std::string> run_files(const fs::path& dir, bool keep_run_id) {
    std::map<std::string, std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
        if (!e.is_regular_file()) continue;
        const std::string name = e.path().lexically_relative(dir).generic_string();
        if (name.starts_with(".ember-lock")) continue;
        std::string bytes = test::read_all(e.path());
        if (name == "manifest.json") {
            json::object m = json::parse(bytes).as_object();
            CHECK(m.at("timing").is_object());
            m.erase("timing");
            m.erase("manifest_sha256");
            if (!keep_run_id) m.erase("run_id");
            bytes = json::serialize(m);
        }
        files[name] = std::move(bytes);
    }
    return files;
}

std::string config_text(const std::string& target) {
    return fmt::format("[model]\npath = {}\nthreads = 1\n[dataset]\npath = \"d.jsonl\"\n[attribute]\ntarget = \"{}\"\n"
                       "[output]\ndir = \"out\"\nstages = [\"after_layer\", \"head_outputs\"]\nlayers = [0, 3]\n",
                       test::shell_quote(test::fixture_path("models/stories260K.gguf").string()), target);
}

TEST_CASE("an interrupted dataset attribution run resumes after its last finished sample, byte-identical") {
    const test::TempDir tmp;
    test::write_all(tmp.path() / "d.jsonl", dataset_lines(1));
    test::write_all(tmp.path() / "a.toml", config_text(". She"));
    test::write_all(tmp.path() / "b.toml", config_text(" and"));
    const config::RunConfig a = config::load_run_config(tmp.path() / "a.toml");
    const config::RunConfig b = config::load_run_config(tmp.path() / "b.toml");
    const runtime::LoadedModel model(a.model.path, std::nullopt);
    const fs::path out = tmp.path() / "out";

    attribution::ConfiguredOptions options;
    options.run_id = "20261202T000000Z-00000001";
    const attribution::ConfiguredAttribution whole = attribution::run_configured_attribution(model, a, options);
    CHECK(whole.samples == 8);
    CHECK(whole.resumed_samples == 0);
    const std::map<std::string, std::string> expected = run_files(out, true);
    CHECK(expected.count("samples.jsonl") == 1);
    CHECK(json::parse(expected.at("manifest.json")).at("run_id").as_string() == options.run_id);
    fs::rename(out, tmp.path() / "whole-a");
    attribution::run_configured_attribution(model, b, options);
    const std::map<std::string, std::string> expected_b = run_files(out, true);
    fs::remove_all(out);

    for (const std::size_t stop_after : {1, 4, 7}) {
        CAPTURE(stop_after);
        attribution::ConfiguredOptions stopping = options;
        stopping.on_sample = [&](std::size_t done) {
            if (done == stop_after) throw Error("simulated kill");
        };
        CHECK_THROWS_WITH_AS(attribution::run_configured_attribution(model, a, stopping), "simulated kill", Error);
        CHECK(!fs::exists(out / "manifest.json"));
        CHECK(fs::exists(out / "progress.json"));
        // A killed process may have written part of the next sample's line past the resume point.
        std::ofstream(out / "samples.jsonl.partial", std::ios::app | std::ios::binary) << "{\"index\": 9, \"junk";
        attribution::ConfiguredOptions again;
        again.run_id = "20261202T000001Z-00000002";  // not used: the run continued is the interrupted one
        const attribution::ConfiguredAttribution r = attribution::run_configured_attribution(model, a, again);
        CHECK(r.resumed_samples == stop_after);
        CHECK(r.samples == 8);
        CHECK(r.run_id == options.run_id);
        CHECK(r.prompt_tokens == whole.prompt_tokens);
        CHECK(run_files(out, true) == expected);
        const auto v = test::run_command(std::string(EMBER_BINARY) + " verify " + test::shell_quote(out.string()) + " 2>&1");
        CHECK_MESSAGE(v.exit_code == 0, v.output);
        fs::remove_all(out);
    }

    // An unfinished run of another config in the directory: started over, nothing of it kept.
    attribution::ConfiguredOptions stopping = options;
    stopping.on_sample = [](std::size_t done) {
        if (done == 5) throw Error("simulated kill");
    };
    CHECK_THROWS_AS(attribution::run_configured_attribution(model, a, stopping), Error);
    const attribution::ConfiguredAttribution r = attribution::run_configured_attribution(model, b, options);
    CHECK(r.resumed_samples == 0);
    CHECK(run_files(out, true) == expected_b);
}

TEST_CASE("kill -9 of ember run at several points: the same command again finishes the run, byte-identical") {
    const test::TempDir tmp;
    test::write_all(tmp.path() / "d.jsonl", dataset_lines(4));
    test::write_all(tmp.path() / "a.toml", config_text(". She"));
    const std::string command = fmt::format("cd {} && {} run --no-defaults a.toml", test::shell_quote(tmp.path().string()),
                                            EMBER_BINARY);
    const auto start = std::chrono::steady_clock::now();
    const auto first = test::run_command(command + " 2>&1");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    REQUIRE_MESSAGE(first.exit_code == 0, first.output);
    const fs::path out = tmp.path() / "out";
    const std::map<std::string, std::string> expected = run_files(out, false);
    fs::rename(out, tmp.path() / "whole");
    std::size_t tested = 0;
    for (const double fraction : {0.2, 0.5, 0.8}) {
        const std::string delay = fmt::format("{:.3f}", fraction * seconds);
        CAPTURE(delay);
        test::run_command(fmt::format("({}) >/dev/null 2>&1 & pid=$!; sleep {}; kill -9 $pid; wait $pid", command, delay));
        if (fs::exists(out / "manifest.json") || !fs::exists(out / "progress.json")) {
            MESSAGE("the run had finished, or not started a sample, at kill -9 after " << delay << " s: this point tested nothing");
            fs::remove_all(out);
            continue;
        }
        const auto again = test::run_command(command + " 2>&1");
        REQUIRE_MESSAGE(again.exit_code == 0, again.output);
        CHECK_MESSAGE(again.output.find("resumed run") != std::string::npos, again.output);
        CHECK(run_files(out, false) == expected);
        fs::remove_all(out);
        ++tested;
    }
    CHECK_MESSAGE(tested > 0, "kill -9 never met the run mid-way");
}

TEST_CASE("a configured attribution run's manifest carries its run id, ember attribute's is null") {
    const test::TempDir tmp;
    const std::string model = test::shell_quote(test::fixture_path("models/stories260K.gguf").string());
    test::write_all(tmp.path() / "one.toml",
                    fmt::format("[model]\npath = {}\n[prompt]\ntext = \"Once upon a time\"\n[attribute]\ntarget = \" there\"\n"
                                "[output]\ndir = \"one\"\nstages = [\"after_layer\"]\n",
                                model));
    const auto r = test::run_command(fmt::format("cd {} && {} run --no-defaults one.toml 2>&1",
                                                 test::shell_quote(tmp.path().string()), EMBER_BINARY));
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    const json::value m = json::parse(test::read_all(tmp.path() / "one" / "manifest.json"));
    REQUIRE(m.at("run_id").is_string());
    const std::string id(m.at("run_id").as_string());
    CHECK(id.size() == std::string("20261202T000000Z-00000001").size());
    CHECK_MESSAGE(r.output.find("run " + id + " written to") != std::string::npos, r.output);
    const auto verify = test::run_command(std::string(EMBER_BINARY) + " verify " + test::shell_quote((tmp.path() / "one").string()) + " 2>&1");
    CHECK_MESSAGE(verify.exit_code == 0, verify.output);

    const auto a = test::run_command(fmt::format("{} attribute --model {} --prompt 'Once upon a time' --target ' there' "
                                                 "--stages after_layer --out {} 2>&1",
                                                 EMBER_BINARY, model, test::shell_quote((tmp.path() / "cli").string())));
    REQUIRE_MESSAGE(a.exit_code == 0, a.output);
    CHECK(json::parse(test::read_all(tmp.path() / "cli" / "manifest.json")).at("run_id").is_null());
}

}  // namespace
}  // namespace ember
