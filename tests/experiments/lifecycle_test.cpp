// ABI 1.1's lifecycle services through the CLI (`ember run` in its supervised worker):
// skip_inference (an experiment supplies the result: nothing is evaluated, no tensor
// stage fires for any experiment, every instance is told `skipped`, run.json and the
// manifest say who supplied it) and rewrite_prompt (the prompt text replaced before it is
// tokenized: both texts recorded, everything after before_prefill sees the new tokens),
// their refusals with exact messages, extraction runs refusing them, a crashed worker's
// record keeping what they changed, and a plugin built from the frozen 1.0 headers in a
// skipped run.
//
// Rungs: the skip tests are smoke (lifecycle policy: what runs, what is recorded); the
// rewrite's equivalence test is on the intervention rung (the rewritten run generates
// exactly what a run given the rewritten text generates, token for token).
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <boost/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "../run/ember_run.hpp"
#include "support/fixtures.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

const char* kPrompt = "Once upon a time";
const char* kLongerPrompt = "Once upon a time there was";

std::string stories(const std::string& more, int tokens = 6, const std::string& prompt = kPrompt) {
    return run_config(fixture_path("models/stories260K.gguf"), prompt, tokens, more);
}
std::string skip_result(const std::string& config = "") { return experiment(test_plugin("skip-result"), config); }
std::string rewrite_prompt(const std::string& config = "") { return experiment(test_plugin("rewrite-prompt"), config); }
std::string recorder() { return experiment(test_plugin("recorder")); }

std::string toml_ints(const std::vector<std::int64_t>& ids) {
    std::string out;
    for (std::int64_t id : ids) out += fmt::format("{}{}", out.empty() ? "" : ", ", id);
    return "[" + out + "]";
}
std::string joined(const std::vector<std::int64_t>& ids) {
    std::string out;
    for (std::int64_t id : ids) out += fmt::format("{}{}", out.empty() ? "" : ",", id);
    return out;
}

// The experiment of run.json named `name` (the first one).
const json::value& experiment_named(const EmberRun& run, const std::string& name) {
    const json::array& list = run.experiments();
    const auto it = std::find_if(list.begin(), list.end(), [&](const json::value& e) { return e.at("name") == name.c_str(); });
    REQUIRE_MESSAGE(it != list.end(), "no experiment " << name << " in run.json");
    return *it;
}

std::int64_t tensor_stage_calls(const json::value& experiment) {
    std::int64_t calls = 0;
    for (const char* stage : {"before_layer", "attention_pattern", "head_outputs", "after_attention", "mlp_activation",
                              "after_mlp", "after_layer", "before_logits", "after_logits"})
        calls += stage_calls(experiment, stage);
    return calls;
}

json::object manifest_of(const EmberRun& run) {
    return json::parse(read_text(run.output_dir / "manifest.json")).as_object();
}

bool verifies(const EmberRun& run) {
    return run_command(fmt::format("{} verify {}", shell_quote(EMBER_BINARY), shell_quote(run.output_dir.string())))
               .exit_code == 0;
}

// A run that must fail with exactly `message` (stderr's error line and run.json's error).
void check_refused(const EmberRun& run, const std::string& message) {
    CHECK(run.exit_code == 1);
    CHECK_MESSAGE(run.err.find("error: " + message + "\n") != std::string::npos, run.err);
    REQUIRE(run.has_report);
    CHECK(run.report.at("outcome") == "failed");
    CHECK(str(run.report.at("error")) == message);
}

}  // namespace

TEST_CASE("skip: the supplied ids are the result, nothing is evaluated, every instance is told 'skipped'") {
    TempDir base_dir;
    const EmberRun base = ember_run(base_dir, stories(""));
    REQUIRE_MESSAGE(base.exit_code == 0, base.err);
    const std::vector<std::int64_t> computed = int_list(base.report.at("generated").at("tokens"));
    REQUIRE(computed.size() >= 2);

    TempDir dir;
    const EmberRun run = ember_run(dir, stories(skip_result("ids = " + toml_ints(computed)) + recorder()));
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    // The printed continuation is the supplied ids' text, as the computed run printed it.
    CHECK(run.out == base.out);
    const json::value& generated = run.report.at("generated");
    CHECK(int_list(generated.at("tokens")) == computed);
    CHECK(generated.at("text") == base.report.at("generated").at("text"));
    CHECK(generated.at("stop_reason") == "skipped");
    CHECK(generated.at("steps").as_array().empty());  // no logits: nothing was evaluated
    CHECK(run.report.at("timings").at("decode_evaluations").to_number<std::int64_t>() == 0);
    CHECK(run.report.at("prompt").at("tokens") == base.report.at("prompt").at("tokens"));
    const json::value& lifecycle = run.report.at("lifecycle");
    CHECK(lifecycle.at("result") == "supplied");
    CHECK(lifecycle.at("skipped_by") == "skip-result");
    CHECK(lifecycle.at("prompt_rewrite").is_null());
    // A run without experiments records its result as computed.
    CHECK(base.report.at("lifecycle").at("result") == "computed");
    CHECK(base.report.at("lifecycle").at("skipped_by").is_null());

    // No tensor stage fired, for the skipping experiment or any other; both saw before_prefill
    // and on_generation_complete with stop reason skipped (EMBER_STOP_SKIPPED = 4).
    const json::value& rec = experiment_named(run, "recorder");
    CHECK(tensor_stage_calls(rec) == 0);
    CHECK(tensor_stage_calls(experiment_named(run, "skip-result")) == 0);
    CHECK(stage_calls(rec, "before_prefill") == 1);
    CHECK(stage_calls(rec, "on_generation_complete") == 1);
    const auto completions = run.err_lines("[recorder] info: recorder on_generation_complete ");
    REQUIRE(completions.size() == 1);
    CHECK_MESSAGE(completions[0].find(fmt::format(" generated={} prompt={} stop=4 ", computed.size(),
                                                  base.report.at("prompt").at("tokens").as_array().size())) !=
                      std::string::npos,
                  completions[0]);
    // The generated ids the host service shows at the end are the supplied ones.
    CHECK(run.err_lines("[skip-result] info: skip-result complete stop=4 generated=" + joined(computed) + " ").size() == 1);
    CHECK(run.err_lines("[skip-result] info: skip-result answer=accepted").size() == 1);

    // The manifest says so too, and the directory verifies.
    const json::object manifest = manifest_of(run);
    REQUIRE(manifest.contains("lifecycle"));
    CHECK(manifest.at("lifecycle").at("skipped_by") == "skip-result");
    CHECK(!manifest_of(base).contains("lifecycle"));
    CHECK(verifies(run));

    // Ids the model would not have produced (the computed ones reversed) are the result as given.
    std::vector<std::int64_t> reversed(computed.rbegin(), computed.rend());
    REQUIRE(reversed != computed);
    std::string expected_text;
    for (auto it = base.report.at("generated").at("steps").as_array().rbegin();
         it != base.report.at("generated").at("steps").as_array().rend(); ++it)
        expected_text += str(it->at("piece"));
    TempDir other;
    const EmberRun supplied = ember_run(other, stories(skip_result("ids = " + toml_ints(reversed))));
    REQUIRE_MESSAGE(supplied.exit_code == 0, supplied.err);
    CHECK(int_list(supplied.report.at("generated").at("tokens")) == reversed);
    CHECK(supplied.out == expected_text + "\n");
}

TEST_CASE("two experiments asking to skip: the first in composition order wins, the second is refused") {
    TempDir dir;
    const EmberRun run = ember_run(
        dir, stories(skip_result("ids = [5, 6]") + skip_result("ids = [7]\non_refusal = \"continue\"")));
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    CHECK(int_list(run.report.at("generated").at("tokens")) == std::vector<std::int64_t>{5, 6});
    CHECK(run.err_lines("[skip-result] info: skip-result answer=accepted").size() == 1);
    const std::string taken =
        "skip_inference refused: experiment 'skip-result' already asked for it (the first request in composition "
        "order wins)";
    CHECK(run.err_lines("[skip-result] info: skip-result answer=refused refusal=2 reason=" + taken).size() == 1);
    CHECK(run.err_lines("[skip-result] warning: " + taken).size() == 1);  // the host says so itself too
}

TEST_CASE("skip refusals: ids outside the vocabulary, too many ids, outside before_prefill: exact errors") {
    const std::string where = "experiment 'skip-result' failed in before_prefill (phase=prefill): skip_inference refused: ";
    {
        TempDir dir;
        const EmberRun run = ember_run(dir, stories(skip_result("ids = [1, 100000]")));
        REQUIRE(run.has_report);
        const auto n_vocab = run.report.at("model").at("n_vocab").to_number<std::int64_t>();
        check_refused(run, where + fmt::format("token id 100000 (index 1) is outside the vocabulary (n_vocab = {})", n_vocab));
        CHECK(run.report.at("lifecycle").at("result") == "computed");
    }
    {
        TempDir dir;
        check_refused(ember_run(dir, stories(skip_result("ids = [1, 2, 3]"), 2)),
                      where + "3 ids, more than the run may generate (generation.max_tokens = 2)");
    }
    const std::string outside = "skip_inference refused: it is accepted only during before_prefill";
    for (const auto& entry : std::vector<std::pair<std::string, std::string>>{
             {"on_model_loaded", "on_model_loaded"},
             {"after_layer", "after_layer (phase=prefill, layer=0)"},
             {"on_generation_complete", "on_generation_complete"}}) {
        const std::string& when = entry.first;  // not structured bindings: clang 14 cannot capture those (CAPTURE)
        const std::string& site = entry.second;
        CAPTURE(when);
        TempDir dir;
        check_refused(ember_run(dir, stories(skip_result(fmt::format("when = \"{}\"", when)))),
                      fmt::format("experiment 'skip-result' failed in {}: {}", site, outside));
    }
}

TEST_CASE("an extraction refuses skip and rewrite: by name when the plugin fails, computed as asked when it goes on") {
    const std::string extract = "extract = true\nlayers = [0]\n\n";
    const std::string why = "an extraction ([output] extract = true) needs the evaluated prompt's activations";
    {
        TempDir dir;
        check_refused(ember_run(dir, stories(extract + skip_result())),
                      "experiment 'skip-result' failed in before_prefill (phase=prefill): skip_inference refused: " + why);
    }
    {
        TempDir dir;
        check_refused(ember_run(dir, stories(extract + rewrite_prompt())),
                      "experiment 'rewrite-prompt' failed in before_prefill (phase=prefill): rewrite_prompt refused: " +
                          why);
    }
    TempDir dir;
    const EmberRun run = ember_run(
        dir, stories(extract + skip_result("on_refusal = \"continue\"") + rewrite_prompt("on_refusal = \"continue\"")));
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    CHECK(run.report.at("lifecycle").at("result") == "computed");
    CHECK(run.report.at("lifecycle").at("prompt_rewrite").is_null());
    CHECK(run.report.at("prompt").at("text") == kPrompt);
    CHECK(run.report.at("generated").at("stop_reason") != "skipped");
    CHECK(fs::exists(run.output_dir / "after_layer.layer0.npy"));
    CHECK(!manifest_of(run).contains("lifecycle"));
    CHECK(run.err_lines("[skip-result] info: skip-result answer=refused refusal=4 reason=skip_inference refused: " + why)
              .size() == 1);
}

TEST_CASE("a dataset extraction refuses skip and rewrite, naming the sample and the experiment") {
    TempDir dir;
    const fs::path data = dir.path() / "d.jsonl";
    write_text(data, "{\"text\": \"Once upon a time\", \"id\": \"a\"}\n");
    for (const char* plugin : {"skip-result", "rewrite-prompt"}) {
        CAPTURE(plugin);
        const auto r = run_command(
            fmt::format("{} extract --model {} --dataset {} --out {} --threads 1 --experiment {} 2>&1",
                        shell_quote(EMBER_BINARY), shell_quote(fixture_path("models/stories260K.gguf").string()),
                        shell_quote(data.string()), shell_quote((dir.path() / plugin).string()),
                        shell_quote(test_plugin(plugin).string())));
        CHECK(r.exit_code == 1);
        const std::string service = std::string(plugin) == "skip-result" ? "skip_inference" : "rewrite_prompt";
        CHECK_MESSAGE(r.output.find(fmt::format("error: {}:1: sample a: experiment '{}' failed in before_prefill "
                                                "(phase=prefill): {} refused: this run cannot honour it (an "
                                                "extraction needs the evaluation's activations)\n",
                                                data.string(), plugin, service)) != std::string::npos,
                      r.output);
        CHECK(!fs::exists(dir.path() / plugin / "manifest.json"));
    }
}

TEST_CASE("rewrite: the run is the run of the new text, both texts recorded, what follows sees the new tokens") {
    // Intervention rung: "Once" rewritten into a longer prompt generates exactly what that
    // prompt generates given directly; and "Once upon a time" rewritten into Arabic likewise.
    for (const auto& entry : std::vector<std::pair<std::string, std::string>>{
             {"Once", kLongerPrompt}, {kPrompt, "مرحبا بكم في القصة"}}) {
        const std::string& original = entry.first;  // not structured bindings: clang 14 cannot capture those (CAPTURE)
        const std::string& rewritten = entry.second;
        CAPTURE(rewritten);
        TempDir base_dir;
        const EmberRun direct = ember_run(base_dir, stories("", 6, rewritten));
        REQUIRE_MESSAGE(direct.exit_code == 0, direct.err);
        TempDir original_dir;
        const EmberRun plain = ember_run(original_dir, stories("", 6, original));
        REQUIRE_MESSAGE(plain.exit_code == 0, plain.err);
        const std::size_t original_tokens = plain.report.at("prompt").at("tokens").as_array().size();
        const std::size_t new_tokens = direct.report.at("prompt").at("tokens").as_array().size();
        REQUIRE(original_tokens != new_tokens);

        TempDir dir;
        const EmberRun run =
            ember_run(dir, stories(rewrite_prompt("text = " + toml_literal(rewritten)) + recorder(), 6, original));
        REQUIRE_MESSAGE(run.exit_code == 0, run.err);
        CHECK(run.out == direct.out);
        CHECK(run.report.at("generated").at("tokens") == direct.report.at("generated").at("tokens"));
        CHECK(run.report.at("generated").at("steps") == direct.report.at("generated").at("steps"));
        CHECK(run.report.at("prompt").at("text") == rewritten.c_str());
        CHECK(run.report.at("prompt").at("tokens") == direct.report.at("prompt").at("tokens"));
        const json::value& lifecycle = run.report.at("lifecycle");
        CHECK(lifecycle.at("result") == "computed");
        CHECK(lifecycle.at("skipped_by").is_null());
        CHECK(lifecycle.at("prompt_rewrite") ==
              json::value{{"experiment", "rewrite-prompt"}, {"original_text", original}, {"text", rewritten}});

        // create and the before_prefill round saw the original tokens; everything after, the new ones.
        const auto created = run.err_lines("[recorder] info: recorder create ");
        REQUIRE(created.size() == 1);
        CHECK(created[0].find(fmt::format(" prompt_tokens={} ", original_tokens)) != std::string::npos);
        const auto prefill = run.err_lines("[recorder] info: recorder before_prefill ");
        REQUIRE(prefill.size() == 1);
        CHECK(prefill[0].find(fmt::format(" count={} ", original_tokens)) != std::string::npos);
        const auto first_layer = run.err_lines("[recorder] info: recorder before_layer phase=prefill ");
        REQUIRE(!first_layer.empty());
        CHECK(first_layer[0].find(fmt::format(" count={} ", new_tokens)) != std::string::npos);
        const auto completion = run.err_lines("[recorder] info: recorder on_generation_complete ");
        REQUIRE(completion.size() == 1);
        CHECK(completion[0].find(fmt::format(" prompt={} stop=", new_tokens)) != std::string::npos);
        const auto told = run.err_lines("[rewrite-prompt] info: rewrite-prompt complete stop=");
        REQUIRE(told.size() == 1);
        CHECK(told[0].ends_with(fmt::format(" prompt_tokens={}", new_tokens)));

        // The manifest: the tokens that ran, and the rewrite with both texts.
        const json::object manifest = manifest_of(run);
        CHECK(manifest.at("tokenizer").at("token_ids") == direct.report.at("prompt").at("tokens"));
        CHECK(manifest.at("lifecycle").at("prompt_rewrite").at("original_text") == original.c_str());
        CHECK(verifies(run));
    }
}

TEST_CASE("rewrite refusals: invalid UTF-8, over the input limit, a second rewrite, outside before_prefill") {
    const std::string where = "experiment 'rewrite-prompt' failed in before_prefill (phase=prefill): rewrite_prompt refused: ";
    {
        TempDir dir;
        check_refused(ember_run(dir, stories(rewrite_prompt("text_hex = \"4142ff43\""))),
                      where + "the text is not valid UTF-8 (byte 2)");
    }
    {
        TempDir dir;
        check_refused(ember_run(dir, stories(rewrite_prompt()), "",
                                fmt::format("-u EMBER_DEFAULTS XDG_CONFIG_HOME={} EMBER_MAX_INPUT_BYTES=8",
                                            shell_quote((dir.path() / "xdg").string()))),
                      where + "the text is 26 bytes, more than the limit of 8 bytes (set EMBER_MAX_INPUT_BYTES to raise it)");
    }
    {
        TempDir dir;
        check_refused(ember_run(dir, stories(rewrite_prompt("when = \"after_layer\""))),
                      "experiment 'rewrite-prompt' failed in after_layer (phase=prefill, layer=0): rewrite_prompt "
                      "refused: it is accepted only during before_prefill");
    }
    TempDir dir;
    const EmberRun run = ember_run(dir, stories(rewrite_prompt("text = \"Lily was\"") +
                                                rewrite_prompt("text = \"Tom was\"\non_refusal = \"continue\"")));
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    CHECK(run.report.at("prompt").at("text") == "Lily was");
    CHECK(run.err_lines("[rewrite-prompt] info: rewrite-prompt answer=refused refusal=2 reason=rewrite_prompt refused: "
                        "experiment 'rewrite-prompt' already asked for it (the first request in composition order wins)")
              .size() == 1);
}

TEST_CASE("skip and rewrite in one run, and a crashed worker's run.json still says who skipped and rewrote") {
    const std::string both = rewrite_prompt("text = " + toml_literal(kLongerPrompt)) + skip_result("ids = [5, 6]");
    {
        TempDir dir;
        const EmberRun run = ember_run(dir, stories(both));
        REQUIRE_MESSAGE(run.exit_code == 0, run.err);
        CHECK(run.report.at("prompt").at("text") == kLongerPrompt);
        CHECK(int_list(run.report.at("generated").at("tokens")) == std::vector<std::int64_t>{5, 6});
        CHECK(run.report.at("lifecycle").at("skipped_by") == "skip-result");
        CHECK(run.report.at("lifecycle").at("prompt_rewrite").at("experiment") == "rewrite-prompt");
    }
    TempDir dir;
    const EmberRun run = ember_run(dir, stories(both + skip_result("on_refusal = \"continue\"\nabort_at_end = true")));
    CHECK(run.exit_code == 1);
    REQUIRE(run.has_report);
    CHECK(run.report.at("outcome") == "crashed");
    CHECK(str(run.report.at("error")) == "experiment 'skip-result' crashed (SIGABRT) in on_generation_complete");
    CHECK(int_list(run.report.at("generated").at("tokens")) == std::vector<std::int64_t>{5, 6});
    const json::value& lifecycle = run.report.at("lifecycle");
    CHECK(lifecycle.at("result") == "supplied");
    CHECK(lifecycle.at("skipped_by") == "skip-result");
    CHECK(lifecycle.at("prompt_rewrite") ==
          json::value{{"experiment", "rewrite-prompt"}, {"original_text", kPrompt}, {"text", kLongerPrompt}});
}

}  // namespace ember::test

namespace ember::test {

TEST_CASE("a plugin built from the frozen 1.0 headers in a run another experiment skips: no tensor stage, completion told") {
    TempDir dir;
    const fs::path counter = dir.path() / "libcounter-1.0.so";
    const auto build = run_command(fmt::format("{} -std=c++20 -shared -fPIC -I{} {} -o {}", EMBER_CXX_COMPILER,
                                               shell_quote(std::string(EMBER_TEST_SOURCE_DIR) + "/abi_1_0/include"),
                                               shell_quote(std::string(EMBER_TEST_SOURCE_DIR) + "/outside/counter.cpp"),
                                               shell_quote(counter.string())),
                                   true);
    REQUIRE_MESSAGE(build.exit_code == 0, build.output);
    const EmberRun run = ember_run(dir, stories(skip_result("ids = [5, 6]") + experiment(counter)));
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    CHECK(experiment_named(run, "counter").at("abi") == "1.0");
    // on_model_loaded, before_prefill, no tensor stage, on_generation_complete, no on_error.
    CHECK(run.err_lines("[counter] info: counts 1 1 0 0 0 0 0 0 1 0").size() == 1);
    CHECK(run.err_lines("[counter] info: checks prefill=0 decode=0 order=0 chain=0 residual=0").size() == 1);
    CHECK(int_list(run.report.at("generated").at("tokens")) == std::vector<std::int64_t>{5, 6});
}

}  // namespace ember::test
