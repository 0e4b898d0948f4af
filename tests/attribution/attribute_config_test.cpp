// Rung: interventions (the attribution-patching estimates and --verify-top's real patches)
// and smoke (bad input). `[attribute]` in a run config, a sweep's grid and a dataset makes
// the run `ember attribute` makes of the same inputs: every array and attribution.jsonl
// the same bytes, with every selection spec (`select`), for a single prompt, each run of
// a grid, and each sample of a dataset, whose clean/corrupt pairs align by substring as
// patch aligns a source (corrupt_select); a pairing that does not align is refused naming
// the line and both specs, exit 1, nothing written.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace ember {
namespace {

namespace fs = std::filesystem;

const std::string kClean = "Once upon a time, there was a little girl named Lily";
const std::string kCorrupt = "Once upon a time, there was a little boy named Lily";
const std::string kShortClean = "Once upon a time, there was a girl named Lily";  // two tokens fewer

std::string model_path() { return test::fixture_path("models/stories260K.gguf").string(); }

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void write_file(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string run(const std::string& args) {
    const auto r = test::run_command(std::string(EMBER_BINARY) + " " + args + " 2>&1");
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    return r.output;
}

std::string attribute(const std::string& out, const std::string& args) {
    return run("attribute --model " + test::shell_quote(model_path()) + " --target '. She' --out " +
               test::shell_quote(out) + " " + args);
}

// The result files of an attribution run (arrays and the ranked table), by name.
std::vector<std::string> result_files(const fs::path& dir) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) {
        const std::string name = e.path().filename().string();
        if (name.ends_with(".npy") || name.ends_with("attribution.jsonl")) names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    return names;
}

// Every result file of `single` (an `ember attribute` run) is in `configured` under
// prefix + its name, the same bytes.
void check_same_files(const fs::path& single, const fs::path& configured, const std::string& prefix = "") {
    const std::vector<std::string> names = result_files(single);
    REQUIRE(!names.empty());
    for (const std::string& name : names) {
        CAPTURE(name);
        REQUIRE(fs::exists(configured / (prefix + name)));
        CHECK(read_file(single / name) == read_file(configured / (prefix + name)));
    }
    CHECK(test::run_command(std::string(EMBER_BINARY) + " verify " + test::shell_quote(configured.string())).exit_code == 0);
}

std::string model_table() { return "[model]\npath = " + test::shell_quote(model_path()) + "\n"; }

TEST_CASE("[attribute] in a run config writes what ember attribute writes, the same bytes") {
    const test::TempDir tmp;
    attribute((tmp.path() / "single").string(),
              "--prompt " + test::shell_quote(kClean) + " --corrupt " + test::shell_quote(kCorrupt) +
                  " --stages after_layer,head_outputs --select substring:girl --verify-top 4");
    write_file(tmp.path() / "a.toml", model_table() + "[prompt]\ntext = \"" + kClean + "\"\n[attribute]\ntarget = \". She\"\n" +
                                          "corrupt = \"" + kCorrupt + "\"\nverify_top = 4\n[output]\ndir = \"configured\"\n" +
                                          "stages = [\"after_layer\", \"head_outputs\"]\nselect = \"substring:girl\"\n");
    run("run --no-defaults " + test::shell_quote((tmp.path() / "a.toml").string()));
    check_same_files(tmp.path() / "single", tmp.path() / "configured");
}

TEST_CASE("[attribute] in a sweep's grid: each run is ember attribute's, every selection spec") {
    const test::TempDir tmp;
    write_file(tmp.path() / "grid.toml", model_table() + "[prompt]\ntext = \"" + kClean + "\"\n[attribute]\ntarget = \". She\"\n" +
                                             "[output]\ndir = \"runs\"\nstages = [\"after_mlp\"]\n[grid]\n" +
                                             "\"output.select\" = [\"last\", \"substring:girl:first\", \"bytes:0-4\"]\n");
    const auto r = test::run_command(std::string(EMBER_BINARY) + " sweep " + test::shell_quote((tmp.path() / "grid.toml").string()) +
                                     " --summary " + test::shell_quote((tmp.path() / "summary.json").string()) + " 2>&1");
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    const boost::json::value summary = boost::json::parse(read_file(tmp.path() / "summary.json"));
    std::size_t checked = 0;
    for (const char* spec : {"last", "substring:girl:first", "bytes:0-4"}) {
        CAPTURE(spec);
        const fs::path single = tmp.path() / ("single-" + std::to_string(checked));
        attribute(single.string(), "--prompt " + test::shell_quote(kClean) + " --stages after_mlp --select " + test::shell_quote(spec));
        // The run's directory, from the sweep's summary (its name is made of the grid value).
        fs::path dir;
        const boost::json::array& rows = summary.is_array() ? summary.as_array() : summary.at("runs").as_array();
        for (const auto& row : rows)
            if (row.at("output.select") == boost::json::value(spec)) dir = std::string(row.at("output_dir").as_string());
        REQUIRE_MESSAGE(!dir.empty(), boost::json::serialize(summary));
        check_same_files(single, dir);
        ++checked;
    }
}

TEST_CASE("[attribute] with [dataset]: each sample is ember attribute's run, pairs aligned by substring") {
    const test::TempDir tmp;
    // Line 1: the pair aligned position for position; line 2: a shorter clean prompt, its
    // "girl" patched from the corrupted prompt's "boy" by text.
    write_file(tmp.path() / "pairs.jsonl",
               "{\"text\": \"" + kClean + "\", \"corrupt\": \"" + kCorrupt + "\", \"select\": \"substring:girl\", " +
                   "\"corrupt_select\": \"substring:boy\"}\n" + "{\"text\": \"" + kShortClean + "\", \"corrupt\": \"" +
                   kCorrupt + "\", \"select\": \"substring:girl\", \"corrupt_select\": \"substring:boy\", \"id\": \"short\"}\n");
    write_file(tmp.path() / "d.toml", model_table() + "[dataset]\npath = \"pairs.jsonl\"\n[attribute]\ntarget = \". She\"\n" +
                                          "verify_top = 3\n[output]\ndir = \"configured\"\n" +
                                          "stages = [\"after_layer\", \"mlp_activation\"]\nlayers = [0, 2]\n");
    run("run --no-defaults " + test::shell_quote((tmp.path() / "d.toml").string()));
    const std::string common = " --corrupt " + test::shell_quote(kCorrupt) +
                               " --stages after_layer,mlp_activation --layers 0,2 --verify-top 3 --select substring:girl";
    attribute((tmp.path() / "one").string(), "--prompt " + test::shell_quote(kClean) + common);
    attribute((tmp.path() / "two").string(), "--prompt " + test::shell_quote(kShortClean) + common + " --corrupt-select substring:boy");
    check_same_files(tmp.path() / "one", tmp.path() / "configured", "sample0.");
    check_same_files(tmp.path() / "two", tmp.path() / "configured", "sample1.");
}

TEST_CASE("[attribute] refuses what it cannot mean by name, exit 1, nothing written") {
    const test::TempDir tmp;
    struct Case {
        std::string toml;
        std::string jsonl;
        std::string message;
    };
    const std::string prompt = "[prompt]\ntext = \"" + kClean + "\"\n";
    const Case cases[] = {
        // The pair selects 3 rows ("girl") against 1 ("Lily"): refused naming the line and both specs.
        {"[dataset]\npath = \"p.jsonl\"\n[attribute]\ntarget = \". She\"\n",
         "{\"text\": \"" + kClean + "\", \"corrupt\": \"" + kCorrupt + "\", \"select\": \"substring:girl\", \"corrupt_select\": \"substring:Lily\"}\n",
         "p.jsonl:1: sample 1: corrupt_select 'substring:Lily' selects 1 row(s) of the corrupted prompt, but the selection "
         "'substring:girl' selects 3 row(s)"},
        {prompt + "[attribute]\ntarget = \". She\"\ncorrupt = \"a b\"\n", "", "the corrupted prompt is 3 tokens and the clean prompt 15"},
        {prompt + "[attribute]\nmetric = \"logit-diff\"\ntarget = \". She\"\n", "", "needs attribute.contrast"},
        {prompt + "[attribute]\nmetric = \"logprob\"\n", "", "[attribute] needs target"},
        {prompt + "[attribute]\ntarget = \". She\"\n[output]\nstages = [\"after_logits\"]\n", "", "stage after_logits has no gradient"},
    };
    std::size_t n = 0;
    for (const Case& c : cases) {
        CAPTURE(c.toml);
        const fs::path config = tmp.path() / ("c" + std::to_string(n++) + ".toml");
        if (!c.jsonl.empty()) write_file(tmp.path() / "p.jsonl", c.jsonl);
        write_file(config, model_table() + c.toml + (c.toml.find("[output]") == std::string::npos ? "[output]\n" : "") +
                               "dir = \"out\"\n");
        const auto r = test::run_command(std::string(EMBER_BINARY) + " run --no-defaults " + test::shell_quote(config.string()) + " 2>&1");
        CHECK(r.exit_code == 1);
        CHECK_MESSAGE(r.output.find(c.message) != std::string::npos, r.output);
        CHECK(!fs::exists(tmp.path() / "out"));
    }
    // model.route = "fast" written in the file: refused at its line, as --route fast is.
    write_file(tmp.path() / "fast.toml", "[model]\npath = " + test::shell_quote(model_path()) + "\nroute = \"fast\"\n" + prompt +
                                             "[attribute]\ntarget = \". She\"\n");
    const auto r = test::run_command(std::string(EMBER_BINARY) + " run --no-defaults " + test::shell_quote((tmp.path() / "fast.toml").string()) + " 2>&1");
    CHECK(r.exit_code == 1);
    CHECK_MESSAGE(r.output.find("fast.toml:3:9: model.route = \"fast\" is refused with [attribute]") != std::string::npos, r.output);
}

}  // namespace
}  // namespace ember
