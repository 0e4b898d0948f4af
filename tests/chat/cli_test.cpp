// `ember template` and `ember tokenize --chat` from the command line.
//   - Rung: golden (llama.cpp). `ember tokenize --model M --template T --chat VARS --ids`
//     gives llama.cpp's ids for the reference's rendering of the same conversation, with
//     special tokens parsed and no BOS added, on the Llama 3, Qwen3 and Gemma 4 fixtures
//     (tests/chat/tokens/llamacpp_ids.json, made by make_llamacpp_ids.py).
//   - Rung: smoke. Bad input is a clear error naming where, exit 1, nothing on stdout.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using ember::test::run_command;
using ember::test::shell_quote;

std::string slurp(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE_MESSAGE(in, "cannot read " << path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
}

ember::test::CommandResult run_ember(const std::string& args, bool merge_stderr = false) {
    return run_command(std::string(EMBER_BINARY) + " " + args, merge_stderr);
}

fs::path templates_dir() { return ember::test::fixture_path("chat") / "templates"; }

}  // namespace

TEST_CASE("tokenize --chat gives llama.cpp's ids for the reference's rendering") {
    const fs::path here(EMBER_CHAT_TEST_DIR);
    const json::value ids = json::parse(slurp(here / "tokens" / "llamacpp_ids.json"));
    // The goldens the renderings came from, by label, to find each case's variables.
    std::map<std::string, json::value> goldens;
    goldens["fixtures:chat/goldens.json"] = json::parse(slurp(ember::test::fixture_path("chat") / "goldens.json"));
    goldens["tests/chat/goldens/more_goldens.json"] = json::parse(slurp(here / "goldens" / "more_goldens.json"));
    const auto& results = ids.at("results").as_array();
    REQUIRE(results.size() >= 40);
    std::map<std::string, int> per_model;
    ember::test::TempDir dir;
    for (const auto& r : results) {
        const std::string name = std::string(r.at("model").as_string()) + " / " + std::string(r.at("case").as_string());
        SUBCASE(name.c_str()) {
            const json::value* vars = nullptr;
            for (const auto& g : goldens.at(std::string(r.at("goldens").as_string())).at("results").as_array())
                if (g.at("template") == r.at("template") && g.at("case") == r.at("case")) vars = &g.at("vars");
            REQUIRE(vars);
            const fs::path vars_file = dir.path() / "vars.json";
            write(vars_file, json::serialize(*vars));
            const fs::path model = ember::test::fixture_path("models/" + std::string(r.at("model").as_string()) + ".gguf");
            const fs::path tmpl = templates_dir() / (std::string(r.at("template").as_string()) + ".jinja");
            const auto out = run_ember("tokenize --model " + shell_quote(model.string()) + " --template " +
                                   shell_quote(tmpl.string()) + " --chat " + shell_quote(vars_file.string()) + " --ids");
            REQUIRE(out.exit_code == 0);
            std::string expected;
            for (const auto& id : r.at("ids").as_array()) expected += (expected.empty() ? "" : " ") + std::to_string(id.as_int64());
            CHECK(out.output == expected + "\n");
        }
        ++per_model[std::string(r.at("model").as_string())];
    }
    CHECK(per_model.size() == 3);  // the Llama 3, Qwen3 and Gemma 4 fixtures
}

TEST_CASE("ember template prints exactly the reference's text") {
    const json::value goldens = json::parse(slurp(ember::test::fixture_path("chat") / "goldens.json"));
    ember::test::TempDir dir;
    const auto& first = goldens.at("results").as_array().at(0);
    write(dir.path() / "vars.json", json::serialize(first.at("vars")));
    const fs::path tmpl = templates_dir() / (std::string(first.at("template").as_string()) + ".jinja");
    const auto out = run_ember("template --template " + shell_quote(tmpl.string()) + " --vars " +
                           shell_quote((dir.path() / "vars.json").string()));
    CHECK(out.exit_code == 0);
    CHECK(out.output == std::string(first.at("rendered").as_string()));  // no newline added
}

TEST_CASE("ember template --model takes the GGUF's template and BOS/EOS texts") {
    ember::test::TempDir dir;
    write(dir.path() / "vars.json", R"({"add_generation_prompt": true, "messages": [{"role": "user", "content": "مرحبا"}]})");
    const auto gemma = ember::test::fixture_path("models/synth-gemma4-q8_0.gguf");
    const auto out = run_ember("template --model " + shell_quote(gemma.string()) + " --vars " +
                           shell_quote((dir.path() / "vars.json").string()));
    REQUIRE(out.exit_code == 0);
    CHECK(out.output.rfind("<bos><|turn>user\nمرحبا<turn|>\n<|turn>model\n", 0) == 0);
    const auto missing = run_ember("template --model " + shell_quote(gemma.string()) + " --name tool_use --vars " +
                               shell_quote((dir.path() / "vars.json").string()), true);
    CHECK(missing.exit_code == 1);
    CHECK(missing.output.find("no 'tokenizer.chat_template.tool_use' in the model (it has: tokenizer.chat_template)") !=
          std::string::npos);
}

TEST_CASE("bad templates and variables: a clear error naming where, exit 1, nothing printed") {
    ember::test::TempDir dir;
    const fs::path vars = dir.path() / "vars.json";
    write(vars, R"({"messages": [{"role": "user", "content": "hi"}]})");
    const auto run_template = [&](const std::string& source, const fs::path& vars_file) {
        const fs::path t = dir.path() / "t.jinja";
        write(t, source);
        const auto out = run_ember("template --template " + shell_quote(t.string()) + " --vars " + shell_quote(vars_file.string()) +
                               " 2>" + shell_quote((dir.path() / "err.txt").string()));
        CHECK(out.output.empty());  // nothing renders half
        CHECK(out.exit_code == 1);
        return slurp(dir.path() / "err.txt");
    };
    const std::string t = (dir.path() / "t.jinja").string();
    CHECK(run_template("ok\n{{ messages[0].content | }}", vars) == "error: " + t + ":2:26: expected a filter name\n");
    CHECK(run_template("{{ messages | shout }}", vars) == "error: " + t + ":1:15: unknown filter 'shout' for a list\n");
    CHECK(run_template("before {{ raise_exception('no system message') }}", vars) ==
          "error: " + t + ":1:11: raise_exception: no system message\n");
    CHECK(run_template("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", vars).find(
              t + ":1:20: macro calls nested deeper than 256 (a recursion that does not end?)") != std::string::npos);
    // A 100 MB template is refused before it is read.
    {
        const fs::path big = dir.path() / "big.jinja";
        std::ofstream out(big, std::ios::binary);
        const std::string chunk(1 << 20, 'a');
        for (int i = 0; i < 100; ++i) out << chunk;
        out.close();
        const auto r = run_ember("template --template " + shell_quote(big.string()) + " --vars " + shell_quote(vars.string()), true);
        CHECK(r.exit_code == 1);
        CHECK(r.output == "error: " + big.string() + ": the template is 104857600 bytes, more than the limit of 4194304 bytes\n");
        fs::remove(big);
    }
    const fs::path not_list = dir.path() / "not_list.json";
    write(not_list, R"({"messages": "hello"})");
    CHECK(run_template("{{ messages }}", not_list) == "error: " + not_list.string() + ": 'messages' must be a list of messages, not a string\n");
    write(not_list, R"({"messages": [{"content": "no role"}]})");
    CHECK(run_template("{{ messages }}", not_list) == "error: " + not_list.string() + ": messages[0] needs a string 'role'\n");
    write(not_list, R"({"messages": [], "add_generation_prompt": "yes"})");
    CHECK(run_template("{{ messages }}", not_list) ==
          "error: " + not_list.string() + ": 'add_generation_prompt' must be true or false, not a string\n");
    const fs::path broken = dir.path() / "broken.vars";  // not .json: the temp dir's strict-JSON check would refuse it
    write(broken, "{\"messages\": [");
    CHECK(run_template("{{ messages }}", broken).find(broken.string() + ": not valid JSON") != std::string::npos);
    // Usage errors exit 2.
    CHECK(run_ember("template --vars " + shell_quote(vars.string()), true).exit_code == 2);
    CHECK(run_ember("tokenize --model x.gguf --prompt hi --chat " + shell_quote(vars.string()), true).exit_code == 2);
}

TEST_CASE("a run config's [prompt] messages: run.json records the rendering and each token's message") {
    ember::test::TempDir dir;
    const fs::path model = ember::test::fixture_path("models/synth-qwen3-q8_0.gguf");
    const fs::path config = dir.path() / "chat.toml";
    write(config, "[model]\npath = " + json::serialize(json::value(model.string())) +
                      "\n\n[prompt]\nmessages = [{role = \"system\", content = \"Be brief.\"},"
                      " {role = \"user\", content = \"ما جذر مكتبة؟\"}]\nadd_generation_prompt = true\n\n"
                      "[generation]\nmax_tokens = 2\n\n[output]\ndir = \"run\"\n");
    const auto out = run_ember("run " + shell_quote(config.string()), true);
    INFO(out.output);
    REQUIRE(out.exit_code == 0);
    const json::value report = json::parse(slurp(dir.path() / "run" / "run.json"));
    const auto& prompt = report.at("prompt");
    // The same text `ember template --model` renders from the same conversation.
    write(dir.path() / "vars.json",
          R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "ما جذر مكتبة؟"}], "add_generation_prompt": true})");
    const auto rendered = run_ember("template --model " + shell_quote(model.string()) + " --vars " +
                                shell_quote((dir.path() / "vars.json").string()));
    CHECK(prompt.at("chat").at("rendered").as_string() == rendered.output);
    CHECK(prompt.at("text").as_string() == rendered.output);
    const std::string source(prompt.at("chat").at("template_source").as_string());
    CHECK(source.size() > 45);
    CHECK(source.substr(source.size() - 45) == "synth-qwen3-q8_0.gguf:tokenizer.chat_template");
    const auto& owners = prompt.at("token_messages").as_array();
    REQUIRE(owners.size() == prompt.at("tokens").as_array().size());
    // <|im_start|> is template text; some token belongs to the system message and some to the user's.
    CHECK(owners.front().is_null());
    bool system = false, user = false;
    for (const auto& o : owners) {
        system = system || (o.is_int64() && o.as_int64() == 0);
        user = user || (o.is_int64() && o.as_int64() == 1);
    }
    CHECK(system);
    CHECK(user);
    // messages exclude text: a clear error naming the file and line.
    write(config, "[model]\npath = \"m.gguf\"\n[prompt]\ntext = \"x\"\nmessages = []\n[output]\ndir = \"run2\"\n");
    const auto bad = run_ember("run " + shell_quote(config.string()), true);
    CHECK(bad.exit_code == 1);
    CHECK(bad.output.find("[prompt] takes messages, text or file: one of them") != std::string::npos);
}
