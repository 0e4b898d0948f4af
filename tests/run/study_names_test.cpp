// The study without glue, continued (issue 29): --target with --chat, --special on a
// dataset, a patch source named by run name.
// Rungs:
//   activation-reference: a conversation's --target is the summed log-softmax of the
//     logits `ember extract --logits all` writes for the rendering + target (the same
//     tokens), and equals, bit for bit, the dataset conversation's targets.jsonl; generate
//     and run score the same;
//   smoke: a dataset's --special gives each sample the tokens `tokenize --special` gives,
//     recorded in the manifest's config;
//   interventions: a patch source named by run name patches what the same source named
//     by path patches (the same logits, bit for bit); missing and ambiguous names refused
//     by name.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <ember/npy.hpp>

#include <cmath>
#include <limits>
#include <sstream>

#include "ember_run.hpp"
#include "support/fixtures.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

struct Cli {
    int exit_code;
    std::string out;
    std::string err;
};

Cli ember(const TempDir& dir, const std::string& args) {
    const fs::path err = dir.path() / "stderr.txt";
    const auto r = run_command(fmt::format("cd {} && env -u EMBER_DEFAULTS XDG_CONFIG_HOME={} {} {} 2> {}",
                                           shell_quote(dir.path().string()), shell_quote((dir.path() / "xdg").string()),
                                           shell_quote(EMBER_BINARY), args, shell_quote(err.string())));
    return {r.exit_code, r.output, read_text(err)};
}

json::object parse(const std::string& text) { return json::parse(text).as_object(); }

double log_softmax_at(const float* row, std::size_t n, std::int32_t id) {
    double max = -std::numeric_limits<double>::infinity();
    for (std::size_t v = 0; v < n; ++v) max = std::max(max, static_cast<double>(row[v]));
    double sum = 0;
    for (std::size_t v = 0; v < n; ++v) sum += std::exp(static_cast<double>(row[v]) - max);
    return static_cast<double>(row[id]) - (max + std::log(sum));
}

}  // namespace

TEST_CASE("--target with --chat continues the rendered conversation: the dataset's score, recomputed from the logits") {
    TempDir dir;
    const std::string m = "--model " + shell_quote(fixture_path("models/synth-qwen3-q8_0.gguf").string()) + " --threads 1";
    const std::string target = " كتب الطالب الدرس";
    const json::array messages{json::object{{"role", "user"}, {"content", "ما جذر كلمة مكتبة؟"}}};
    write_text(dir.path() / "conv.json", json::serialize(json::object{{"add_generation_prompt", true}, {"messages", messages}}));
    const std::string t = shell_quote(target);
    const Cli with = ember(dir, "extract " + m + " --chat conv.json --target " + t + " --out with --logits all --json");
    REQUIRE_MESSAGE(with.exit_code == 0, with.err);
    const Cli without = ember(dir, "extract " + m + " --chat conv.json --out without --logits all");
    REQUIRE_MESSAGE(without.exit_code == 0, without.err);
    for (const char* file : {"after_layer.layer0.npy", "logits.npy"})  // the arrays are the prompt's alone
        CHECK(read_text(dir.path() / "with" / file) == read_text(dir.path() / "without" / file));

    // The dataset conversation with the same target: the same line of targets.jsonl.
    write_text(dir.path() / "d.jsonl",
               json::serialize(json::object{{"messages", messages}, {"add_generation_prompt", true}, {"target", target}}) + "\n");
    const Cli dataset = ember(dir, "extract " + m + " --dataset d.jsonl --out dataset");
    REQUIRE_MESSAGE(dataset.exit_code == 0, dataset.err);
    json::object single = parse(read_text(dir.path() / "with/targets.jsonl"));
    json::object from_dataset = parse(read_text(dir.path() / "dataset/targets.jsonl"));
    single.erase("id");
    from_dataset.erase("id");
    CHECK(single == from_dataset);
    CHECK(read_text(dir.path() / "with/targets.npy") == read_text(dir.path() / "dataset/targets.npy"));

    // Recomputed: the rendering (ember template) + target as one text, its special tokens
    // parsed, every row's logits; the target's tokens follow the conversation's own.
    const Cli rendered = ember(dir, "template " + m.substr(0, m.find(" --threads")) + " --vars conv.json");
    REQUIRE_MESSAGE(rendered.exit_code == 0, rendered.err);
    write_text(dir.path() / "joined.txt", rendered.out + target);
    const Cli whole = ember(dir, "extract " + m + " --file joined.txt --special --out whole --logits all --layers 0");
    REQUIRE_MESSAGE(whole.exit_code == 0, whole.err);
    const json::object manifest = parse(read_text(dir.path() / "whole/manifest.json"));
    const auto& ids = manifest.at("tokenizer").at("token_ids").as_array();
    const json::object with_manifest = parse(read_text(dir.path() / "with/manifest.json"));
    const auto& prompt_ids = with_manifest.at("tokenizer").at("token_ids").as_array();
    const auto& tokens = single.at("tokens").as_array();
    REQUIRE(!tokens.empty());
    REQUIRE(ids.size() == prompt_ids.size() + tokens.size());
    for (std::size_t i = 0; i < prompt_ids.size(); ++i) CHECK(ids.at(i) == prompt_ids.at(i));
    const npy::Array logits = npy::read(dir.path() / "whole/logits.npy");
    const std::size_t n_vocab = logits.shape.at(1);
    double sum = 0;
    for (const auto& token : tokens) {
        const std::size_t j = token.at("position").to_number<std::size_t>();
        REQUIRE(j == prompt_ids.size() + static_cast<std::size_t>(&token - tokens.data()));
        CHECK(token.at("id") == ids.at(j));
        const double expected = log_softmax_at(logits.values.data() + (j - 1) * n_vocab, n_vocab, ids.at(j).to_number<std::int32_t>());
        CHECK(token.at("logprob").as_double() == doctest::Approx(expected).epsilon(1e-12));
        sum += token.at("logprob").as_double();
    }
    CHECK(single.at("logprob").as_double() == doctest::Approx(sum).epsilon(1e-15));

    // generate and run: the same score.
    const Cli generated = ember(dir, "generate " + m + " --chat conv.json --target " + t + " --max-tokens 2 --json");
    REQUIRE_MESSAGE(generated.exit_code == 0, generated.err);
    CHECK(parse(generated.out).at("target").at("logprob") == single.at("logprob"));
    const auto run = ember_run(dir, run_config(fixture_path("models/synth-qwen3-q8_0.gguf"), "replaced", 2, "", "fast"),
                               "--chat conv.json --target " + t);
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    CHECK(run.report.at("target").at("logprob") == single.at("logprob"));
    CHECK(str(run.report.at("config").at("prompt").at("target")) == target);
    CHECK(ember(dir, "verify with").exit_code == 0);
}

TEST_CASE("extract --dataset --special: special-token texts in the samples are those tokens, recorded in the config") {
    TempDir dir;
    const fs::path model = fixture_path("models/stories260K.gguf");
    const std::string m = "--model " + shell_quote(model.string()) + " --threads 1";
    write_text(dir.path() / "d.jsonl", "{\"text\": \"a<s>b\", \"target\": \" c</s>\"}\n{\"text\": \"Once upon a time\"}\n");
    const Cli plain = ember(dir, "extract " + m + " --dataset d.jsonl --select all --out plain");
    REQUIRE_MESSAGE(plain.exit_code == 0, plain.err);
    const Cli special = ember(dir, "extract " + m + " --dataset d.jsonl --select all --special --out special");
    REQUIRE_MESSAGE(special.exit_code == 0, special.err);
    const auto sample_ids = [&](const char* run) {
        std::vector<std::string> out;
        std::istringstream in(read_text(dir.path() / run / "samples.jsonl"));
        for (std::string line; std::getline(in, line);) out.push_back(json::serialize(parse(line).at("token_ids")));
        return out;
    };
    const auto tokenized = [&](const std::string& text) {
        const Cli r = ember(dir, "tokenize --model " + shell_quote(model.string()) + " --prompt " + shell_quote(text) +
                                     " --special --ids");
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        std::string ids = "[" + r.out.substr(0, r.out.size() - 1) + "]";
        std::replace(ids.begin(), ids.end(), ' ', ',');
        return ids;
    };
    const std::vector<std::string> with = sample_ids("special"), without = sample_ids("plain");
    REQUIRE(with.size() == 2);
    // The prompt and the target tokenized together: the sample's ids, then the target's.
    std::string joined = with[0].substr(0, with[0].size() - 1);
    const json::object targets = parse(read_text(dir.path() / "special/targets.jsonl"));
    for (const auto& token : targets.at("tokens").as_array())
        joined += "," + json::serialize(token.at("id"));
    CHECK(joined + "]" == tokenized("a<s>b c</s>"));
    CHECK(with[0] == tokenized("a<s>b"));
    CHECK(with[0] != without[0]);
    CHECK(with[1] == without[1]);  // no special text: the same tokens
    const json::object manifest = parse(read_text(dir.path() / "special/manifest.json"));
    CHECK(manifest.at("config").at("dataset").at("special") == true);
    CHECK(!manifest.at("config").at("prompt").as_object().contains("special"));
    CHECK(!parse(read_text(dir.path() / "plain/manifest.json")).at("config").at("dataset").as_object().contains("special"));
    CHECK(ember(dir, "verify special").exit_code == 0);
}

TEST_CASE("patch source_run: the run beside this one by name, as by path, missing and ambiguous names refused") {
    TempDir dir;
    const fs::path model = fixture_path("models/stories260K.gguf");
    const std::string prompt = "Once upon a time there was a girl";
    const auto config = [&](const std::string& out, const std::string& more) {
        return fmt::format("[model]\npath = {}\nroute = \"reference\"\nthreads = 1\n\n[prompt]\ntext = {}\n\n"
                           "[generation]\nmax_tokens = 2\n\n[output]\ndir = {}\nextract = true\nstages = [\"after_layer\"]\n"
                           "layers = [0]\nlogits = \"last\"\n\n{}\n",
                           toml_literal(model.string()), toml_literal(prompt), toml_literal(out), more);
    };
    const auto run = [&](const std::string& name, const std::string& toml) {
        write_text(dir.path() / (name + ".toml"), toml);
        return ember(dir, "run " + name + ".toml");
    };
    const std::string capture = experiment(builtin_plugin("capture"), "stages = [\"after_layer\"]");
    const Cli clean = run("clean", config("runs/clean", capture));
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    const std::string patch_body = "stages = [\"after_layer\"]\nlayers = [1]\nphase = \"prefill\"\n";
    const auto patch = [&](const std::string& source) { return experiment(builtin_plugin("patch"), source + "\n" + patch_body); };

    const Cli by_path = run("by_path", config("runs/by_path", patch("source = 'runs/clean/capture'")));
    REQUIRE_MESSAGE(by_path.exit_code == 0, by_path.err);
    const Cli by_name = run("by_name", config("runs/by_name", patch("source_run = 'clean'")));
    REQUIRE_MESSAGE(by_name.exit_code == 0, by_name.err);
    const fs::path runs = dir.path() / "runs";
    CHECK(read_text(runs / "by_name/logits.npy") == read_text(runs / "by_path/logits.npy"));
    const json::object record = parse(read_text(runs / "by_name/patch.json"));
    CHECK(str(record.at("source").at("dir")) == (runs / "clean/capture").string());
    CHECK(record.at("source").at("run_name") == "clean");
    CHECK(record.at("source").at("named_by").at("source_run") == "clean");
    CHECK(str(record.at("source").at("named_by").at("runs_root")) == runs.string());
    CHECK(record.at("rows_written") == parse(read_text(runs / "by_path/patch.json")).at("rows_written"));

    // A sweep's name without its hash suffix, when one run has it; two are ambiguous.
    fs::copy(runs / "clean", runs / "label=كتب~1a2b3c4d", fs::copy_options::recursive);
    const Cli short_name = run("short", config("runs/short", patch("source_run = 'label=كتب'")));
    REQUIRE_MESSAGE(short_name.exit_code == 0, short_name.err);
    CHECK(parse(read_text(runs / "short/patch.json")).at("source").at("run_name") == "label=كتب~1a2b3c4d");
    fs::copy(runs / "clean", runs / "label=كتب~99999999", fs::copy_options::recursive);
    const Cli ambiguous = run("ambiguous", config("runs/ambiguous", patch("source_run = 'label=كتب'")));
    CHECK(ambiguous.exit_code == 1);
    CHECK(ambiguous.err.find("config key 'source_run' = 'label=كتب' is ambiguous in " + runs.string() +
                             ": it names 'label=كتب~1a2b3c4d', 'label=كتب~99999999'") != std::string::npos);
    const Cli missing = run("missing", config("runs/missing", patch("source_run = 'nope'")));
    CHECK(missing.exit_code == 1);
    CHECK(missing.err.find("config key 'source_run' = 'nope': no run of that name in " + runs.string()) != std::string::npos);
    CHECK(missing.err.find("'clean'") != std::string::npos);
    CHECK(!fs::exists(runs / "missing/manifest.json"));

    // Another runs root (relative to the TOML file); two captures in one run need source_capture.
    const Cli elsewhere = run("elsewhere", config("other/elsewhere", patch("source_run = 'clean'\nsource_runs = 'runs'")));
    REQUIRE_MESSAGE(elsewhere.exit_code == 0, elsewhere.err);
    CHECK(read_text(dir.path() / "other/elsewhere/logits.npy") == read_text(runs / "by_path/logits.npy"));
    const std::string two = capture + experiment(builtin_plugin("capture"), "dir = \"second\"\nstages = [\"after_layer\"]");
    REQUIRE(run("twice", config("runs/twice", two)).exit_code == 0);
    const Cli several = run("several", config("runs/several", patch("source_run = 'twice'")));
    CHECK(several.exit_code == 1);
    CHECK(several.err.find("holds 2 captures ('capture', 'second'): choose one with source_capture") != std::string::npos);
    const Cli chosen = run("chosen", config("runs/chosen", patch("source_run = 'twice'\nsource_capture = 'second'")));
    REQUIRE_MESSAGE(chosen.exit_code == 0, chosen.err);
    CHECK(str(parse(read_text(runs / "chosen/patch.json")).at("source").at("dir")) == (runs / "twice/second").string());
    const Cli both = run("both", config("runs/both", patch("source_run = 'clean'\nsource = 'runs/clean/capture'")));
    CHECK(both.exit_code == 1);
    CHECK(both.err.find("not both") != std::string::npos);
}

}  // namespace ember::test
