// Rung: smoke. The trace through the command line: `ember generate --trace` writes the
// journal and reports its fingerprint; `ember trace fingerprint` recomputes it from the
// file; `ember trace export --chrome` writes valid JSON (checked by Boost.JSON and by
// Python's json module) with exactly one complete ("X") event per journal line, in
// order; malformed input is named by file and line; a failed run leaves no journal.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <boost/json.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/files.hpp"
#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace ember::test {
namespace {

namespace json = boost::json;

std::string ember() { return EMBER_BINARY; }

std::vector<std::string> lines_of(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
}

std::string generate_traced(const std::string& model, const std::filesystem::path& trace, const std::string& extra = "") {
    return fmt::format("{} generate --model {} --prompt {} --max-tokens 4 --threads 2 --trace {} {}", ember(),
                       shell_quote(fixture_path("models/" + model + ".gguf").string()),
                       shell_quote("The quick brown fox"), shell_quote(trace.string()), extra);
}

}  // namespace

TEST_CASE("ember generate --trace: the journal, its fingerprint in --json, ember trace fingerprint agrees") {
    TempDir dir;
    const auto trace = dir.path() / "t.jsonl";
    const CommandResult r = run_command(generate_traced("synth-llama3-q8_0", trace, "--json"));
    REQUIRE(r.exit_code == 0);
    const json::object o = json::parse(r.output).as_object();
    const json::object& t = o.at("trace").as_object();
    CHECK(t.at("path").as_string() == trace.string());
    CHECK(static_cast<std::size_t>(t.at("operations").as_int64()) == lines_of(trace).size());
    CHECK(t.at("evaluations").as_int64() == 4);  // the prefill and three decodes
    const CommandResult fp = run_command(fmt::format("{} trace fingerprint {}", ember(), shell_quote(trace.string())));
    REQUIRE(fp.exit_code == 0);
    CHECK(fp.output == std::string(t.at("fingerprint").as_string()) + "\n");
    for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
        CHECK(entry.path().filename() == "t.jsonl");  // no temporary left
}

TEST_CASE("ember trace export --chrome: valid JSON, one complete event per operation, in order") {
    TempDir dir;
    const auto trace = dir.path() / "t.jsonl";
    const auto out = dir.path() / "chrome.json";
    REQUIRE(run_command(generate_traced("synth-gemma4-e-q8_0", trace)).exit_code == 0);
    const CommandResult r = run_command(
        fmt::format("{} trace export --chrome {} {}", ember(), shell_quote(trace.string()), shell_quote(out.string())), true);
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);

    const std::vector<std::string> journal = lines_of(trace);
    const json::value doc = json::parse(read_all(out));
    const json::array& events = doc.at("traceEvents").as_array();
    REQUIRE(events.size() == journal.size());
    double previous_ts = 0;
    for (std::size_t i = 0; i < events.size(); ++i) {
        const json::object& e = events[i].as_object();
        const json::object line = json::parse(journal[i]).as_object();
        CAPTURE(i);
        CHECK(e.at("ph").as_string() == "X");
        const std::string name(line.at("name").as_string());
        const std::string expected_name =
            line.at("layer").is_null() ? name : fmt::format("{}-{}", name, line.at("layer").as_int64());
        CHECK(e.at("name").as_string() == expected_name);
        CHECK(e.at("cat").as_string() == line.at("op_kind").as_string());
        CHECK(e.at("dur").as_double() == doctest::Approx(line.at("duration_ns").to_number<double>() / 1000.0));
        const double ts = e.at("ts").as_double();
        CHECK(ts >= previous_ts);
        previous_ts = ts;
        CHECK(e.at("pid").is_int64());
        CHECK(e.at("tid").is_int64());
        CHECK(e.at("args").as_object().at("kernel") == line.at("kernel"));
        CHECK(e.at("args").as_object().at("step") == line.at("step"));
    }
    // An independent JSON parser agrees (what Perfetto and chrome://tracing need).
    const CommandResult py = run_command(
        fmt::format("/usr/bin/python3 -c {} {}",
                    shell_quote("import json,sys; d=json.load(open(sys.argv[1])); "
                                "print(sum(1 for e in d['traceEvents'] if e['ph']=='X'))"),
                    shell_quote(out.string())));
    REQUIRE(py.exit_code == 0);
    CHECK(py.output == fmt::format("{}\n", journal.size()));
}

TEST_CASE("ember trace: malformed journals are named by line, usage errors exit 2") {
    TempDir dir;
    const auto bad = dir.path() / "bad.jsonl";
    {
        std::ofstream out(bad);
        out << R"({"seq":0})" << "\n";
    }
    CommandResult r = run_command(
        fmt::format("{} trace export --chrome {} {}", ember(), shell_quote(bad.string()), shell_quote((dir.path() / "o.json").string())),
        true);
    CHECK(r.exit_code == 1);
    CHECK(r.output.find(bad.string() + ":1: missing field 'name'") != std::string::npos);
    CHECK(!std::filesystem::exists(dir.path() / "o.json"));
    r = run_command(fmt::format("{} trace fingerprint {}", ember(), shell_quote((dir.path() / "absent.jsonl").string())), true);
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("absent.jsonl: cannot open") != std::string::npos);
    CHECK(run_command(fmt::format("{} trace export {} x.json", ember(), shell_quote(bad.string())), true).exit_code == 2);
    CHECK(run_command(fmt::format("{} trace", ember()), true).exit_code == 2);
    CHECK(run_command(fmt::format("{} trace frobnicate", ember()), true).exit_code == 2);
}

TEST_CASE("a run that fails leaves no trace journal") {
    TempDir dir;
    const auto trace = dir.path() / "t.jsonl";
    // The prompt does not fit in a context of 2 tokens: the run stops after the journal opened.
    const CommandResult r = run_command(generate_traced("stories260K", trace, "--ctx 2"), true);
    CHECK(r.exit_code == 1);
    CHECK(std::filesystem::is_empty(dir.path()));
}

}  // namespace ember::test
