// Rungs: smoke and interventions. Provenance in `ember run`: [tracing] writes the journal
// into the output directory and run.json reports its fingerprint; --trace FILE moves it;
// [output] extract = true extracts during the run, after the experiments at every stage
// site (an ablated MLP output is extracted as zeros); manifest.json lists run.json, the
// journal and the arrays, and `ember verify` accepts the directory. A failed run leaves
// run.json but no manifest and no journal.
#include <doctest/doctest.h>
#include <ember/npy.hpp>
#include <fmt/format.h>

#include <algorithm>

#include "record/verify.hpp"
#include "run/ember_run.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPrompt = "Once upon a time, there was a little girl";

}  // namespace

TEST_CASE("ember run: [tracing] and [output] extract with an experiment, one verified directory") {
    const std::string config = fmt::format(
        "[model]\npath = {}\nthreads = 1\n[prompt]\ntext = {}\n[generation]\nmax_tokens = 4\n[tracing]\nenabled = true\n"
        "[output]\ndir = \"out\"\nextract = true\nstages = [\"after_mlp\", \"after_layer\"]\nlogits = \"all\"\n"
        "logit_lens = 2\n\n{}",
        toml_literal(fixture_path("models/stories260K.gguf").string()), toml_literal(kPrompt),
        experiment(builtin_plugin("ablate"), "stage = \"after_mlp\"\nlayers = [1]"));
    TempDir dir;
    const auto ok = ember_run(dir, config);
    REQUIRE_MESSAGE(ok.exit_code == 0, ok.err);
    const fs::path out = ok.output_dir;
    const auto& trace = ok.report.at("trace").as_object();
    CHECK(str(trace.at("path")) == (out / "trace.jsonl").string());
    CHECK(trace.at("evaluations").to_number<int>() == 4);

    const boost::json::object manifest = boost::json::parse(read_text(out / "manifest.json")).as_object();
    CHECK(manifest.at("kind") == "ember.run");
    CHECK(manifest.at("run_id") == ok.report.at("run_id"));
    CHECK(manifest.at("config_hash") == ok.report.at("config_hash"));
    CHECK(manifest.at("trace").at("fingerprint") == trace.at("fingerprint"));
    const auto& files = manifest.at("files").as_object();
    CHECK(files.contains("run.json"));
    CHECK(files.contains("trace.jsonl"));
    CHECK(files.contains("after_mlp.layer1.npy"));
    CHECK(files.contains("logit_lens.layer4.ids.npy"));
    const record::VerifyReport report = record::verify_run_directory(out);
    CHECK(report.ok());
    CHECK(report.files_checked == files.size());

    // The extraction saw what ablate left: layer 1's MLP output is zero, layer 0's is not.
    const npy::Array ablated = npy::read(out / "after_mlp.layer1.npy");
    const npy::Array kept = npy::read(out / "after_mlp.layer0.npy");
    CHECK(std::all_of(ablated.values.begin(), ablated.values.end(), [](float v) { return v == 0.0f; }));
    CHECK(std::any_of(kept.values.begin(), kept.values.end(), [](float v) { return v != 0.0f; }));
    // Prompt positions only: the decode steps are not extracted.
    CHECK(ablated.shape[0] == manifest.at("tokenizer").at("token_ids").as_array().size());
}

TEST_CASE("ember run --trace FILE writes the journal there, a failed run leaves no manifest and no journal") {
    TempDir dir;
    const fs::path trace = dir.path() / "elsewhere.jsonl";
    const auto run = ember_run(dir, run_config(fixture_path("models/stories260K.gguf"), kPrompt, 3),
                               "--trace " + shell_quote(trace.string()));
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    CHECK(fs::exists(trace));
    CHECK(str(run.report.at("trace").at("path")) == trace.string());
    const boost::json::object manifest = boost::json::parse(read_text(run.output_dir / "manifest.json")).as_object();
    CHECK(manifest.at("trace").at("file").is_null());
    CHECK(manifest.at("tensors").as_array().empty());
    CHECK(manifest.at("tensor_contract").is_null());
    CHECK(record::verify_run_directory(run.output_dir).ok());

    // A strict experiment failure replacing an earlier run (--overwrite): run.json says
    // failed; the earlier manifest is gone.
    TempDir failing;
    fs::create_directories(failing.path() / "out");
    fs::copy_file(run.output_dir / "manifest.json", failing.path() / "out" / "manifest.json");
    const auto failed = ember_run(failing, run_config(fixture_path("models/stories260K.gguf"), kPrompt, 3,
                                                      "[tracing]\nenabled = true\n") +
                                               experiment(test_plugin("failing"), "stage = \"after_layer\""),
                               "--overwrite");
    CHECK(failed.exit_code == 1);
    REQUIRE(failed.has_report);
    CHECK(failed.report.at("outcome") == "failed");
    CHECK(!fs::exists(failed.output_dir / "manifest.json"));
    CHECK(!fs::exists(failed.output_dir / "trace.jsonl"));
    for (const auto& e : fs::directory_iterator(failed.output_dir))
        CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
}

}  // namespace ember::test
