// The study without glue on the CLI (issue 29): --target on extract, run and generate;
// prompts as token ids (--ids); --special on every prompt option; --experiment-config.
// Rungs:
//   activation-reference: a single prompt's --target is the summed log-softmax of the
//     logits `ember extract --logits all` writes for prompt + target, recomputed here, and
//     equals, bit for bit, the dataset run's targets.jsonl for the same sample;
//   interventions: run --target through an experiment scores the edited model (ablate
//     changes it); a command-line experiment config is the TOML one (same config hash,
//     same tokens);
//   interventions (activation-reference): a patch run's effect record (KL, the logit
//     difference, the target's delta) recomputed from its logits and the unpatched run's;
//     an experiment that changes nothing has KL 0 and delta 0;
//   smoke: --ids equals the text it tokenizes to; bad ids, keys and combinations are
//     refused by name with their exit codes.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <ember/npy.hpp>

#include <cmath>
#include <limits>

#include "ember_run.hpp"
#include "support/fixtures.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

constexpr const char* kPrompt = "Once upon a time";
constexpr const char* kTarget = " there was";

fs::path model() { return fixture_path("models/stories260K.gguf").lexically_normal(); }

struct Cli {
    int exit_code;
    std::string out;
    std::string err;
};

// `ember ARGS` in DIR: exit status, stdout, stderr.
Cli ember(const TempDir& dir, const std::string& args) {
    const fs::path err = dir.path() / "stderr.txt";
    const auto r = run_command(fmt::format("cd {} && env -u EMBER_DEFAULTS {} {} 2> {}", shell_quote(dir.path().string()),
                                           shell_quote(EMBER_BINARY), args, shell_quote(err.string())));
    return {r.exit_code, r.output, read_text(err)};
}

json::object parse(const std::string& text) { return json::parse(text).as_object(); }

std::string m() { return "--model " + shell_quote(model().string()) + " --threads 1"; }

// log softmax(row)[id] in double, written out here (not the engine's function).
double log_softmax_at(const float* row, std::size_t n, std::int32_t id) {
    double max = -std::numeric_limits<double>::infinity();
    for (std::size_t v = 0; v < n; ++v) max = std::max(max, static_cast<double>(row[v]));
    double sum = 0;
    for (std::size_t v = 0; v < n; ++v) sum += std::exp(static_cast<double>(row[v]) - max);
    return static_cast<double>(row[id]) - (max + std::log(sum));
}

}  // namespace

TEST_CASE("extract --target: the dataset's score for the same sample, recomputed from the logits, arrays unchanged") {
    TempDir dir;
    const std::string p = shell_quote(kPrompt), t = shell_quote(kTarget);
    const Cli with = ember(dir, fmt::format("extract {} --prompt {} --target {} --out with --logits all --json", m(), p, t));
    REQUIRE_MESSAGE(with.exit_code == 0, with.err);
    const Cli without = ember(dir, fmt::format("extract {} --prompt {} --out without --logits all", m(), p));
    REQUIRE_MESSAGE(without.exit_code == 0, without.err);
    write_text(dir.path() / "d.jsonl", fmt::format("{{\"text\": \"{}\", \"target\": \"{}\"}}\n", kPrompt, kTarget));
    const Cli dataset = ember(dir, fmt::format("extract {} --dataset d.jsonl --out dataset", m()));
    REQUIRE_MESSAGE(dataset.exit_code == 0, dataset.err);
    // The whole text's logits, every row: the reference for the score.
    const Cli whole = ember(dir, fmt::format("extract {} --prompt {} --out whole --logits all --stages after_layer --layers 0",
                                             m(), shell_quote(std::string(kPrompt) + kTarget)));
    REQUIRE_MESSAGE(whole.exit_code == 0, whole.err);

    // The extraction's arrays are those of the run without a target, byte for byte.
    for (const char* file : {"after_layer.layer0.npy", "after_layer.layer4.npy", "logits.npy"})
        CHECK(read_text(dir.path() / "with" / file) == read_text(dir.path() / "without" / file));
    // targets.jsonl: the dataset's line for the same sample, but for the sample's id.
    json::object single = parse(read_text(dir.path() / "with/targets.jsonl"));
    json::object from_dataset = parse(read_text(dir.path() / "dataset/targets.jsonl"));
    CHECK(single.at("id").is_null());
    single.erase("id");
    from_dataset.erase("id");
    CHECK(single == from_dataset);
    CHECK(read_text(dir.path() / "with/targets.npy") == read_text(dir.path() / "dataset/targets.npy"));
    CHECK(parse(with.out).at("target").at("logprob") == single.at("logprob"));

    // Recomputed from the whole text's logits: row j - 1 scores target token j.
    const json::object manifest = parse(read_text(dir.path() / "whole/manifest.json"));
    const auto& ids = manifest.at("tokenizer").at("token_ids").as_array();
    const npy::Array logits = npy::read(dir.path() / "whole/logits.npy");
    const std::size_t n_vocab = logits.shape.at(1);
    double sum = 0;
    const auto& tokens = single.at("tokens").as_array();
    REQUIRE(tokens.size() == 2);
    for (const auto& token : tokens) {
        const std::size_t j = token.at("position").to_number<std::size_t>();
        REQUIRE(j < ids.size());
        CHECK(token.at("id") == ids.at(j));
        const double expected = log_softmax_at(logits.values.data() + (j - 1) * n_vocab, n_vocab, ids.at(j).to_number<std::int32_t>());
        CHECK(token.at("logprob").as_double() == doctest::Approx(expected).epsilon(1e-12));
        sum += token.at("logprob").as_double();
    }
    CHECK(single.at("logprob").as_double() == doctest::Approx(sum).epsilon(1e-15));
    CHECK(ember(dir, "verify with").exit_code == 0);
    const json::object with_manifest = parse(read_text(dir.path() / "with/manifest.json"));
    CHECK(with_manifest.at("targets").at("file") == "targets.npy");
    CHECK(with_manifest.at("config").at("prompt").at("target") == kTarget);
}

TEST_CASE("generate and run --target score what extract scores, --ids is the text it tokenizes to") {
    TempDir dir;
    const std::string p = shell_quote(kPrompt), t = shell_quote(kTarget);
    const Cli extract = ember(dir, fmt::format("extract {} --prompt {} --target {} --out e --json", m(), p, t));
    REQUIRE_MESSAGE(extract.exit_code == 0, extract.err);
    const json::value score = parse(extract.out).at("target");

    const Cli text = ember(dir, fmt::format("generate {} --prompt {} --target {} --max-tokens 4 --json", m(), p, t));
    REQUIRE_MESSAGE(text.exit_code == 0, text.err);
    const json::object g = parse(text.out);
    CHECK(g.at("target") == score);

    std::string ids;
    for (const auto& id : g.at("prompt_tokens").as_array()) ids += (ids.empty() ? "" : ",") + json::serialize(id);
    const Cli by_ids = ember(dir, fmt::format("generate {} --ids {} --target {} --max-tokens 4 --json", m(), ids, t));
    REQUIRE_MESSAGE(by_ids.exit_code == 0, by_ids.err);
    const json::object gi = parse(by_ids.out);
    CHECK(gi.at("prompt_tokens") == g.at("prompt_tokens"));
    CHECK(gi.at("tokens") == g.at("tokens"));
    CHECK(gi.at("steps") == g.at("steps"));
    CHECK(gi.at("target").at("logprob") == score.at("logprob"));  // the target split after the ids' text as after the text

    // ember run: the config's prompt replaced by --ids, the target in run.json and targets.jsonl.
    const auto run = ember_run(dir, run_config(model(), "replaced", 4, "", "fast"), fmt::format("--ids {} --target {}", ids, t));
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    CHECK(run.report.at("target").at("logprob") == score.at("logprob"));
    CHECK(run.report.at("generated").at("tokens") == g.at("tokens"));
    CHECK(parse(read_text(run.output_dir / "targets.jsonl")).at("logprob") == score.at("logprob"));
    CHECK(run.report.at("config").at("prompt").at("ids") == g.at("prompt_tokens"));

    // tokenize: --ids is its output format; --prompt-ids takes the ids, and gives them back.
    const Cli tok = ember(dir, fmt::format("tokenize --model {} --prompt-ids {} --ids", shell_quote(model().string()), ids));
    REQUIRE_MESSAGE(tok.exit_code == 0, tok.err);
    std::string spaced = ids;
    std::replace(spaced.begin(), spaced.end(), ',', ' ');
    CHECK(tok.out == spaced + "\n");
}

TEST_CASE("a run's --target goes through its experiments, the edited model is scored") {
    TempDir dir;
    const std::string ablate = experiment(builtin_plugin("ablate"), "stage = \"after_mlp\"\nlayers = [1]\nmode = \"scale\"\nscale = 0.5");
    const auto plain = ember_run(dir, run_config(model(), kPrompt, 2), fmt::format("--target {}", shell_quote(kTarget)));
    REQUIRE_MESSAGE(plain.exit_code == 0, plain.err);
    TempDir other;
    const auto edited = ember_run(other, run_config(model(), kPrompt, 2, ablate), fmt::format("--target {}", shell_quote(kTarget)));
    REQUIRE_MESSAGE(edited.exit_code == 0, edited.err);
    const double a = plain.report.at("target").at("logprob").as_double();
    const double b = edited.report.at("target").at("logprob").as_double();
    CHECK(std::isfinite(a));
    CHECK(a != b);
    CHECK(ember(other, "verify out").exit_code == 0);
}

TEST_CASE("--experiment-config: the TOML config on the command line, typed as TOML types it") {
    TempDir dir;
    const std::string body = "stage = \"after_mlp\"\nlayers = [1]\nmode = \"scale\"\nscale = 0.5";
    const auto in_toml = ember_run(dir, run_config(model(), kPrompt, 4, experiment(builtin_plugin("ablate"), body)));
    REQUIRE_MESSAGE(in_toml.exit_code == 0, in_toml.err);
    TempDir cli;
    const std::string plugin = shell_quote(builtin_plugin("ablate").string());
    const auto on_line = ember_run(cli, run_config(model(), kPrompt, 4),
                                   fmt::format("--experiment {} --experiment-config stage=after_mlp --experiment-config "
                                               "'layers=[1]' --experiment-config mode=scale --experiment-config scale=0.5",
                                               plugin));
    REQUIRE_MESSAGE(on_line.exit_code == 0, on_line.err);
    CHECK(on_line.report.at("config").at("experiments").at(0).at("config") ==
          in_toml.report.at("config").at("experiments").at(0).at("config"));
    CHECK(on_line.report.at("generated").at("tokens") == in_toml.report.at("generated").at("tokens"));
    // A FILE.toml, and a key beside it.
    TempDir file;
    write_text(file.path() / "ablate.toml", "stage = \"after_mlp\"\nlayers = [1]\n");
    const auto from_file = ember_run(file, run_config(model(), kPrompt, 4),
                                     fmt::format("--experiment {} --experiment-config ablate.toml --experiment-config "
                                                 "mode=scale --experiment-config scale=0.5", plugin));
    REQUIRE_MESSAGE(from_file.exit_code == 0, from_file.err);
    CHECK(from_file.report.at("generated").at("tokens") == in_toml.report.at("generated").at("tokens"));

    // Refusals name the key (usage: 2); the plugin's own refusal of a key it does not know (1).
    const std::vector<std::pair<std::string, std::string>> refused = {
        {"--experiment-config stage=x --experiment " + plugin, "comes before any --experiment"},
        {"--experiment " + plugin + " --experiment-config stage=a --experiment-config stage=b", "key stage is set twice"},
        {"--experiment " + plugin + " --experiment-config ablate.toml --experiment-config layers=2", "key layers is set twice"},
        {"--experiment " + plugin + " --experiment-config 'a..b=1'", "'a..b' is not a key"},
        {"--experiment " + plugin + " --experiment-config stage=", "key stage has no value"},
        {"--experiment " + plugin + " --experiment-config stage=after_mlp --experiment-config scale=nan", "key scale"},
    };
    for (const auto& [args, message] : refused) {
        CAPTURE(args);
        TempDir bad;
        write_text(bad.path() / "ablate.toml", "stage = \"after_mlp\"\nlayers = [1]\n");
        const auto r = ember_run(bad, run_config(model(), kPrompt, 4), args);
        CHECK(r.exit_code == 2);
        CHECK(r.err.find(message) != std::string::npos);
        CHECK(!fs::exists(bad.path() / "out"));
    }
    TempDir unknown;
    const auto r = ember_run(unknown, run_config(model(), kPrompt, 4),
                             "--experiment " + plugin + " --experiment-config stage=after_mlp --experiment-config bogus=3");
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("unknown config key 'bogus'") != std::string::npos);
}

TEST_CASE("--ids and --special: checked by name, recorded, and special texts parsed on every prompt option") {
    TempDir dir;
    const std::string tok_model = "--model " + shell_quote(model().string());
    Cli r = ember(dir, "generate " + m() + " --ids 1,403,600 --max-tokens 1");
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("id 600 (index 2) is not in the vocabulary of 512 tokens") != std::string::npos);
    r = ember(dir, "extract " + m() + " --ids 1,x --out o");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("'x' (item 1) is not a token id") != std::string::npos);
    CHECK(!fs::exists(dir.path() / "o"));
    r = ember(dir, "generate " + m() + " --ids 1,2 --no-bos");
    CHECK(r.exit_code == 2);
    r = ember(dir, "generate " + m() + " --ids 1,2 --prompt x");
    CHECK(r.exit_code == 2);
    r = ember(dir, "tokenize " + tok_model + " --prompt-ids 1,9999");
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("id 9999") != std::string::npos);

    // "<s>" is BOS's text: with --special it is that token, without it it is text.
    const std::string text = shell_quote("a<s>b");
    const Cli plain = ember(dir, "generate " + m() + " --prompt " + text + " --max-tokens 1 --json");
    const Cli special = ember(dir, "generate " + m() + " --prompt " + text + " --special --max-tokens 1 --json");
    REQUIRE_MESSAGE(special.exit_code == 0, special.err);
    const Cli tokenized = ember(dir, "tokenize " + tok_model + " --prompt " + text + " --special --ids");
    const json::object special_json = parse(special.out);
    const auto& ids = special_json.at("prompt_tokens").as_array();
    std::string expected;
    for (const auto& id : ids) expected += (expected.empty() ? "" : " ") + json::serialize(id);
    CHECK(tokenized.out == expected + "\n");
    CHECK(parse(plain.out).at("prompt_tokens") != special_json.at("prompt_tokens"));
    CHECK(std::count(ids.begin(), ids.end(), json::value(1)) == 2);  // the BOS added, and the one in the text
    const Cli extracted = ember(dir, "extract " + m() + " --prompt " + text + " --special --out s");
    REQUIRE_MESSAGE(extracted.exit_code == 0, extracted.err);
    const json::object manifest = parse(read_text(dir.path() / "s/manifest.json"));
    CHECK(manifest.at("tokenizer").at("token_ids") == parse(special.out).at("prompt_tokens"));
    CHECK(manifest.at("config").at("prompt").at("special") == true);
}

TEST_CASE("a patch run records its effect against the unpatched run, recomputed from both runs' logits") {
    const std::string corrupt = "Once upon a time there was a boy";
    const std::string target = fmt::format("--target {}", shell_quote(" and"));
    const std::string last_logits = "extract = true\nstages = [\"after_layer\"]\nlayers = [0]\nlogits = \"last\"\n";
    TempDir clean;
    const auto capture = ember_run(clean, run_config(model(), "Once upon a time there was a girl", 2,
                                                     experiment(builtin_plugin("capture"), "stages = [\"after_layer\"]")));
    REQUIRE_MESSAGE(capture.exit_code == 0, capture.err);
    TempDir plain_dir;
    const auto plain = ember_run(plain_dir, run_config(model(), corrupt, 2, last_logits), target);
    REQUIRE_MESSAGE(plain.exit_code == 0, plain.err);
    CHECK(plain.report.at("effect").is_null());  // nothing edited, nothing to compare
    TempDir patched_dir;
    const std::string patch = experiment(
        builtin_plugin("patch"), fmt::format("source = {}\nlayers = [2]\npositions = \"last\"\nphase = \"prefill\"",
                                             toml_literal((clean.path() / "out/capture").string())));
    const auto patched = ember_run(patched_dir, run_config(model(), corrupt, 2, last_logits + "\n" + patch), target);
    REQUIRE_MESSAGE(patched.exit_code == 0, patched.err);

    const json::object& effect = patched.report.at("effect").as_object();
    // The target: the edited score is the run's, the unedited one the plain run's.
    const double edited = patched.report.at("target").at("logprob").as_double();
    const double unedited = plain.report.at("target").at("logprob").as_double();
    CHECK(effect.at("target").at("edited_logprob").as_double() == edited);
    CHECK(effect.at("target").at("unedited_logprob").as_double() == doctest::Approx(unedited).epsilon(1e-12));
    CHECK(effect.at("target").at("delta").as_double() == doctest::Approx(edited - unedited).epsilon(1e-9));
    CHECK(edited != unedited);
    // KL(P || Q) and the top token's logit difference from the two runs' last-position logits.
    const npy::Array p = npy::read(plain.output_dir / "logits.npy"), q = npy::read(patched.output_dir / "logits.npy");
    REQUIRE(p.values.size() == q.values.size());
    const std::size_t n = p.values.size();
    double kl = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const double lp = log_softmax_at(p.values.data(), n, static_cast<std::int32_t>(i));
        const double lq = log_softmax_at(q.values.data(), n, static_cast<std::int32_t>(i));
        kl += std::exp(lp) * (lp - lq);
    }
    CHECK(kl > 0);
    CHECK(effect.at("kl_unedited_edited").as_double() == doctest::Approx(kl).epsilon(1e-9));
    const auto top = static_cast<std::size_t>(std::max_element(p.values.begin(), p.values.end()) - p.values.begin());
    CHECK(effect.at("top_token").at("id") == top);
    CHECK(effect.at("top_token").at("logit_diff").as_double() ==
          doctest::Approx(static_cast<double>(q.values[top]) - p.values[top]).epsilon(1e-9));
    // The patch record names its source by run name and directory as well as by path.
    const json::object record = parse(read_text(patched.output_dir / "patch.json"));
    CHECK(record.at("source").at("run_name") == "out");
    CHECK(str(record.at("source").at("run_dir")) == (clean.path() / "out").string());
    CHECK(record.at("source").at("run_id") == capture.report.at("run_id"));

    // An experiment that changes nothing: no divergence, no change of the target's score.
    TempDir noop_dir;
    const auto noop = ember_run(noop_dir, run_config(model(), corrupt, 2, experiment(builtin_plugin("ablate"),
                                                    "stage = \"after_mlp\"\nmode = \"scale\"\nscale = 1.0")), target);
    REQUIRE_MESSAGE(noop.exit_code == 0, noop.err);
    CHECK(noop.report.at("effect").at("kl_unedited_edited").as_double() == 0.0);
    CHECK(noop.report.at("effect").at("target").at("delta").as_double() == 0.0);
    CHECK(noop.report.at("effect").at("top_token").at("logit_diff").as_double() == 0.0);
}

}  // namespace ember::test
