// Rung: smoke (run configs). TOML run configs: every default, paths relative to the
// config file, every kind of error naming file:line:column, [experiment.config] as JSON
// (integers stay integers, dates become RFC 3339), composition order (defaults file,
// config, command line), the defaults file lookup, and config hashes (equal for
// equivalent configs, different otherwise).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <boost/json.hpp>

#include <cstdlib>
#include <fstream>

#include "common/error.hpp"
#include "config/run_config.hpp"
#include "ember/experiment_config.hpp"
#include "synthetic_run.hpp"

using namespace ember;
using namespace ember::config;
using ember::test::TempDir;
namespace fs = std::filesystem;

namespace {

fs::path write(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
    return path;
}

const char* kMinimal = R"([model]
path = "model.gguf"
[prompt]
text = "Once upon a time"
)";

// The error message of loading `text` as x.toml, with the directory prefix removed.
std::string error_of(const std::string& text) {
    TempDir dir;
    const auto file = write(dir.path() / "x.toml", text);
    try {
        load_run_config(file);
    } catch (const Error& e) {
        std::string what = e.what();
        const std::string prefix = dir.path().string() + "/";
        if (what.rfind(prefix, 0) == 0) what = what.substr(prefix.size());
        return what;
    }
    return "(no error)";
}

// Sets or unsets an environment variable for one scope.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        if (value) ::setenv(name, value, 1);
        else ::unsetenv(name);
    }
    ~ScopedEnv() {
        if (old_) ::setenv(name_, old_->c_str(), 1);
        else ::unsetenv(name_);
    }

private:
    const char* name_;
    std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("a minimal config gets every documented default, paths resolved against its directory") {
    TempDir dir;
    const auto file = write(dir.path() / "demo.toml", kMinimal);
    const RunConfig c = load_run_config(file);
    CHECK(c.source == file);
    CHECK(c.model.path == dir.path() / "model.gguf");
    CHECK(c.model.arch == "auto");
    CHECK(c.model.route == (has_fast_route() ? "fast" : "reference"));  // the build's default route
    CHECK(c.model.kv_type == "f32");
    CHECK(c.model.threads == 0);
    CHECK(c.model.ctx == 0);
    CHECK(c.prompt.text == "Once upon a time");
    CHECK(!c.prompt.file);
    CHECK(c.prompt.add_bos == AddBos::Auto);
    CHECK(c.generation.max_tokens == 32);
    CHECK(c.generation.temperature == 0.0);
    CHECK(c.generation.top_k == 40);
    CHECK(c.generation.top_p == 0.95);
    CHECK(c.generation.seed == 42);
    CHECK(!c.tracing.enabled);
    CHECK(c.output.dir == dir.path() / "runs" / "demo");
    CHECK(c.tracing.path == dir.path() / "runs" / "demo" / "trace.jsonl");
    CHECK(c.hooks.failure == FailurePolicy::Strict);
    CHECK(c.hooks.timeout_ms == 0);
    CHECK(c.experiments.empty());
}

TEST_CASE("the issue's example config reads as written") {
    TempDir dir;
    const auto file = write(dir.path() / "configs" / "demo.toml", R"([model]
path = "../models/model.gguf"
arch = "qwen3"
route = "reference"
kv_type = "f16"
threads = 2
ctx = 512
[prompt]
file = "prompt.txt"
add_bos = false
[generation]
max_tokens = 8
temperature = 0.7
top_k = 0
top_p = 0.5
seed = 7
[tracing]
enabled = true
path = "trace.jsonl"
[output]
dir = "runs/demo"
[hooks]
failure = "fail_open"
timeout_ms = 250
[[experiment]]
plugin = "plugins/libablate.so"
[experiment.config]
layers = [1]
stage = "after_mlp"
)");
    const RunConfig c = load_run_config(file);
    const fs::path base = dir.path() / "configs";
    CHECK(c.model.path == dir.path() / "models" / "model.gguf");
    CHECK(c.model.arch == "qwen3");
    CHECK(c.model.route == "reference");
    CHECK(c.model.kv_type == "f16");
    CHECK(c.model.threads == 2);
    CHECK(c.model.ctx == 512);
    CHECK(c.prompt.file == base / "prompt.txt");
    CHECK(c.prompt.add_bos == AddBos::No);
    CHECK(c.generation.max_tokens == 8);
    CHECK(c.generation.temperature == 0.7);
    CHECK(c.generation.top_k == 0);
    CHECK(c.generation.top_p == 0.5);
    CHECK(c.generation.seed == 7);
    CHECK(c.tracing.enabled);
    CHECK(c.tracing.path == base / "trace.jsonl");
    CHECK(c.output.dir == base / "runs" / "demo");
    CHECK(c.hooks.failure == FailurePolicy::FailOpen);
    CHECK(c.hooks.timeout_ms == 250);
    REQUIRE(c.experiments.size() == 1);
    CHECK(c.experiments[0].plugin == base / "plugins" / "libablate.so");
    CHECK(c.experiments[0].config_json == R"({"layers":[1],"stage":"after_mlp"})");
    CHECK(c.experiments[0].base_dir == base);
    CHECK(c.experiments[0].origin == file.string() + ":25");
}

TEST_CASE("every error names file:line:column") {
    struct Case {
        std::string toml, error;
    };
    const std::string ok_prompt = "[prompt]\ntext = \"hi\"\n";
    const Case cases[] = {
        {"modle = 1\n" + std::string(kMinimal), "x.toml:1:1: unknown key 'modle' (known keys: model, prompt, generation, "
                                                "tracing, output, hooks, dataset, attribute, experiment, sae)"},
        {std::string(kMinimal) + "modle = 1\n", "x.toml:5:1: unknown key 'modle' in [prompt] (known keys: text, file, "
                                                "add_bos, messages, add_generation_prompt, enable_thinking, tools, template, template_name, ids, special, target)"},
        {std::string(kMinimal) + "[modle]\n", "x.toml:5:2: unknown key 'modle' (known keys: model, prompt, generation, "
                                              "tracing, output, hooks, dataset, attribute, experiment, sae)"},
        {"[model]\npath = \"m.gguf\"\ntreads = 2\n" + ok_prompt,
         "x.toml:3:1: unknown key 'treads' in [model] (known keys: path, arch, route, kv_type, threads, ctx)"},
        {"[model]\npath = \"m.gguf\"\nthreads = \"2\"\n" + ok_prompt,
         "x.toml:3:11: model.threads must be an integer, not a string"},
        {"[model]\npath = \"m.gguf\"\nthreads = -1\n" + ok_prompt, "x.toml:3:11: model.threads = -1 is outside [0, 4096]"},
        {"[model]\npath = 5\n" + ok_prompt, "x.toml:2:8: model.path must be a string, not an integer"},
        {"[model]\npath = \"m.gguf\"\nroute = \"turbo\"\n" + ok_prompt,
         "x.toml:3:9: model.route = \"turbo\" is not one of \"reference\", \"fast\""},
        {"[model]\npath = \"m.gguf\"\narch = \"gpt2\"\n" + ok_prompt,
         "x.toml:3:8: model.arch = \"gpt2\" is not one of \"auto\", \"llama\", \"qwen3\", \"gemma4\""},
        {"[model]\narch = \"llama\"\n" + ok_prompt, "x.toml:1:1: [model] needs path = \"model.gguf\""},
        {ok_prompt, "x.toml:1:1: missing [model] (model.path is required)"},
        {"[model]\npath = \"m.gguf\"\n", "x.toml:1:1: missing [prompt] (prompt.text, prompt.file or prompt.messages is required)"},
        {"model = 5\n" + ok_prompt, "x.toml:1:9: model must be a table, not an integer"},
        {"[model]\npath = \"m.gguf\"\n[prompt]\ntext = \"a\"\nfile = \"b.txt\"\n",
         "x.toml:5:8: [prompt] takes text or file, not both"},
        {"[model]\npath = \"m.gguf\"\n[prompt]\nadd_bos = true\n",
         "x.toml:3:1: [prompt] needs text = \"...\", file = \"prompt.txt\", ids = [...] or messages = [...]"},
        {"[model]\npath = \"m.gguf\"\n[prompt]\ntext = \"a\"\nadd_bos = \"yes\"\n",
         "x.toml:5:11: prompt.add_bos must be true, false or \"auto\""},
        {std::string(kMinimal) + "[generation]\nmax_tokens = 0\n", "x.toml:6:14: generation.max_tokens = 0 is outside [1, 2147483647]"},
        {std::string(kMinimal) + "[generation]\ntemperature = \"hot\"\n",
         "x.toml:6:15: generation.temperature must be a number, not a string"},
        {std::string(kMinimal) + "[generation]\ntemperature = -0.5\n",
         "x.toml:6:15: generation.temperature = -0.5 is outside [0, 1000000]"},
        {std::string(kMinimal) + "[generation]\ntop_p = 1.5\n", "x.toml:6:9: generation.top_p = 1.5 is outside [0, 1]"},
        {std::string(kMinimal) + "[tracing]\nenabled = 1\n", "x.toml:6:11: tracing.enabled must be true or false, not an integer"},
        {std::string(kMinimal) + "[output]\ndir = \"\"\n", "x.toml:6:7: output.dir is an empty path"},
        {std::string(kMinimal) + "[hooks]\nfailure = \"lenient\"\n",
         "x.toml:6:11: hooks.failure = \"lenient\" is not one of \"strict\", \"fail_open\""},
        {std::string(kMinimal) + "[hooks]\ntimeout_ms = 1.5\n", "x.toml:6:14: hooks.timeout_ms must be an integer, not a float"},
        {std::string(kMinimal) + "[experiment]\nplugin = \"a.so\"\n",
         "x.toml:5:1: experiment must be written [[experiment]] (an array of tables)"},
        {std::string(kMinimal) + "[[experiment]]\nconfig = {}\n",
         "x.toml:5:1: [[experiment]] needs plugin = \"path/to/libname.so\""},
        {std::string(kMinimal) + "[[experiment]]\nplugins = \"a.so\"\n",
         "x.toml:6:1: unknown key 'plugins' in [experiment] (known keys: plugin, config)"},
        {std::string(kMinimal) + "[[experiment]]\nplugin = \"a.so\"\nconfig = 3\n",
         "x.toml:7:10: experiment.config must be a table, not an integer"},
        {std::string(kMinimal) + "[[experiment]]\nplugin = \"a.so\"\n[experiment.config]\nscale = nan\n",
         "x.toml:8:9: nan cannot be passed to an experiment (JSON has no NaN or infinity)"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.toml);
        CHECK(error_of(c.toml) == c.error);
    }
    // TOML syntax errors carry toml++'s description at the exact place.
    CHECK(error_of("[model]\npath = \"m.gguf\"\nthreads = = 2\n").rfind("x.toml:3:11: ", 0) == 0);
    CHECK(error_of("").find("missing [model]") != std::string::npos);
}

TEST_CASE("a missing config file is named") {
    CHECK_THROWS_WITH_AS(load_run_config("/no/such/config.toml"), "/no/such/config.toml: cannot open (no such file)",
                         Error);
}

TEST_CASE("[experiment.config] becomes JSON: integers stay integers, dates become RFC 3339") {
    TempDir dir;
    const auto file = write(dir.path() / "x.toml", std::string(kMinimal) + R"([[experiment]]
plugin = "a.so"
[experiment.config]
big = 9007199254740993
ratio = 0.5
whole = 2.0
on = true
name = "caf\u00e9"
layers = [0, -1]
day = 1979-05-27
time = 07:32:00.25
local = 1979-05-27T07:32:00
zulu = 1979-05-27T07:32:00Z
offset = 1979-05-27T00:32:00.999999-07:00
nested = { b = 1, a = [{ x = 1 }] }
)");
    const auto c = load_run_config(file);
    REQUIRE(c.experiments.size() == 1);
    CHECK(c.experiments[0].config_json ==
          R"({"big":9007199254740993,"day":"1979-05-27","layers":[0,-1],"local":"1979-05-27T07:32:00",)"
          R"("name":"café","nested":{"a":[{"x":1}],"b":1},"offset":"1979-05-27T00:32:00.999999-07:00",)"
          R"("on":true,"ratio":5E-1,"time":"07:32:00.25","whole":2E0,"zulu":"1979-05-27T07:32:00Z"})");
    // What the plugin's reader makes of it.
    const ember::ExperimentConfig plugin_side(c.experiments[0].config_json);
    CHECK(plugin_side.get_int("big", 0) == 9007199254740993LL);
    CHECK(plugin_side.get_double("ratio", 0) == 0.5);
    CHECK(plugin_side.get_double("whole", 0) == 2.0);
}

TEST_CASE("experiments compose: defaults file, then the config's, then the command line's") {
    TempDir dir;
    const auto defaults = write(dir.path() / "home" / "defaults.toml", R"([[experiment]]
plugin = "libfinite-check.so"
)");
    const auto file = write(dir.path() / "run" / "x.toml", std::string(kMinimal) + R"([[experiment]]
plugin = "libablate.so"
[experiment.config]
stage = "after_mlp"
[[experiment]]
plugin = "/abs/libsteer.so"
)");
    LoadOptions options;
    options.defaults_file = defaults;
    options.command_line_experiments = {"libcapture.so"};
    const auto c = load_run_config(file, options);
    REQUIRE(c.experiments.size() == 4);
    CHECK(c.experiments[0].plugin == dir.path() / "home" / "libfinite-check.so");
    CHECK(c.experiments[0].origin == "defaults " + defaults.string() + ":1");
    CHECK(c.experiments[0].base_dir == dir.path() / "home");
    CHECK(c.experiments[1].plugin == dir.path() / "run" / "libablate.so");
    CHECK(c.experiments[1].config_json == R"({"stage":"after_mlp"})");
    CHECK(c.experiments[1].origin == file.string() + ":5");
    CHECK(c.experiments[2].plugin == "/abs/libsteer.so");
    CHECK(c.experiments[2].config_json == "{}");
    CHECK(c.experiments[3].plugin == fs::current_path() / "libcapture.so");
    CHECK(c.experiments[3].origin == "--experiment 1");
    CHECK(c.experiments[3].base_dir == fs::current_path());

    write(defaults, "[model]\npath = \"m.gguf\"\n");
    try {
        load_run_config(file, options);
        FAIL("a defaults file with [model] was accepted");
    } catch (const Error& e) {
        CHECK(std::string(e.what()) == defaults.string() + ":1:2: unknown key 'model' (known keys: experiment)");
    }
}

TEST_CASE("clearing defaults: [hooks] defaults = false and --no-defaults leave the defaults file out") {
    TempDir dir;
    const auto defaults = write(dir.path() / "home" / "defaults.toml", "[[experiment]]\nplugin = \"libfinite-check.so\"\n");
    const std::string own = "[[experiment]]\nplugin = \"libablate.so\"\n";
    LoadOptions options;
    options.defaults_file = defaults;
    const auto with = load_run_config(write(dir.path() / "a.toml", std::string(kMinimal) + own), options);
    REQUIRE(with.experiments.size() == 2);  // the defaults file's, then the config's
    const auto cleared = load_run_config(
        write(dir.path() / "b.toml", std::string(kMinimal) + "[hooks]\ndefaults = false\n" + own), options);
    REQUIRE(cleared.experiments.size() == 1);
    CHECK(cleared.experiments[0].plugin == dir.path() / "libablate.so");
    CHECK(canonical_json(cleared).find(R"("defaults":false)") != std::string::npos);
    options.no_defaults = true;
    const auto flag = load_run_config(dir.path() / "a.toml", options);
    REQUIRE(flag.experiments.size() == 1);
    CHECK_FALSE(flag.hooks.defaults);
    // A config that does not mention it keeps its hash (the key is recorded only when false).
    CHECK(canonical_json(with).find("defaults") == std::string::npos);
    CHECK(error_of(std::string(kMinimal) + "[hooks]\ndefaults = 1\n").find("hooks.defaults") != std::string::npos);
}

TEST_CASE("the defaults file: $EMBER_DEFAULTS, else $XDG_CONFIG_HOME, else ~/.config") {
    TempDir dir;
    const auto explicit_file = write(dir.path() / "mine.toml", "");
    const auto xdg_file = write(dir.path() / "xdg" / "ember" / "defaults.toml", "");
    const auto home_file = write(dir.path() / "home" / ".config" / "ember" / "defaults.toml", "");
    {
        ScopedEnv e("EMBER_DEFAULTS", explicit_file.c_str());
        ScopedEnv x("XDG_CONFIG_HOME", (dir.path() / "xdg").c_str());
        CHECK(find_defaults_file() == explicit_file);
    }
    {
        ScopedEnv e("EMBER_DEFAULTS", (dir.path() / "absent.toml").c_str());
        CHECK_THROWS_WITH_AS(find_defaults_file(),
                             ((dir.path() / "absent.toml").string() + ": no such defaults file (named by $EMBER_DEFAULTS)").c_str(),
                             Error);
    }
    {
        ScopedEnv e("EMBER_DEFAULTS", nullptr);
        ScopedEnv x("XDG_CONFIG_HOME", (dir.path() / "xdg").c_str());
        CHECK(find_defaults_file() == xdg_file);
    }
    {
        ScopedEnv e("EMBER_DEFAULTS", nullptr);
        ScopedEnv x("XDG_CONFIG_HOME", (dir.path() / "empty").c_str());
        CHECK(!find_defaults_file());
    }
    {
        ScopedEnv e("EMBER_DEFAULTS", nullptr);
        ScopedEnv x("XDG_CONFIG_HOME", nullptr);
        ScopedEnv h("HOME", (dir.path() / "home").c_str());
        CHECK(find_defaults_file() == home_file);
    }
}

TEST_CASE("equivalent configs hash equal, any change in meaning changes the hash") {
    TempDir dir;
    const auto minimal = load_run_config(write(dir.path() / "a.toml", std::string(kMinimal) + R"([[experiment]]
plugin = "libablate.so"
[experiment.config]
stage = "after_mlp"
layers = [1, 2]
)"));
    // The same run spelled out: defaults written, keys and tables reordered, paths
    // spelled differently, an integer where a float is expected.
    const auto spelled_out = load_run_config(write(dir.path() / "b.toml", R"([hooks]
timeout_ms = 0
failure = "strict"
[prompt]
add_bos = "auto"
text = "Once upon a time"
[[experiment]]
plugin = "./sub/../libablate.so"
config = { layers = [1, 2], stage = "after_mlp" }
[model]
ctx = 0
threads = 0
route = ")" + std::string(has_fast_route() ? "fast" : "reference") + R"("
kv_type = "f32"
arch = "auto"
path = "./model.gguf"
[generation]
temperature = 0
seed = 42
max_tokens = 32
[output]
dir = "runs/a"
[tracing]
enabled = false
path = "runs/a/trace.jsonl"
)"));
    CHECK(canonical_json(minimal) == canonical_json(spelled_out));
    CHECK(config_hash(minimal) == config_hash(spelled_out));
    CHECK(config_hash(minimal).size() == 64);
    CHECK(canonical_json(minimal).rfind(R"({"experiments":[{"base_dir":)", 0) == 0);

    const auto with = [&](const std::string& name, const std::string& extra) {
        return config_hash(load_run_config(write(dir.path() / name, std::string(kMinimal) + extra)));
    };
    const std::string ablate = "[[experiment]]\nplugin = \"libablate.so\"\n[experiment.config]\nstage = \"after_mlp\"\n";
    const std::string base_hash = with("c.toml", "[output]\ndir = \"runs/a\"\n" + ablate + "layers = [1, 2]\n");
    CHECK(base_hash == config_hash(minimal));
    CHECK(with("d.toml", "[output]\ndir = \"runs/a\"\n" + ablate + "layers = [1, 3]\n") != base_hash);
    CHECK(with("e.toml", "[output]\ndir = \"runs/a\"\n[generation]\nseed = 1\n" + ablate + "layers = [1, 2]\n") !=
          base_hash);
    CHECK(with("f.toml", "[output]\ndir = \"runs/a\"\n" + ablate + "layers = [1, 2]\n" + ablate) != base_hash);
    LoadOptions options;
    options.command_line_experiments = {"libcapture.so"};
    CHECK(config_hash(load_run_config(dir.path() / "c.toml", options)) != base_hash);
}

TEST_CASE("an experiment's config nested deeper than 32 levels is refused at file:line") {
    // Issue 24: 40 levels passed the TOML limit (64) and failed later, in the run, with
    // Boost.JSON's bare "too deep".
    const auto nested = [](int arrays) {
        std::string value = "1";
        for (int i = 0; i < arrays; ++i) value = "[" + value + "]";
        return std::string(kMinimal) + "[[experiment]]\nplugin = \"libx.so\"\n[experiment.config]\nx = " + value + "\n";
    };
    CHECK(error_of(nested(40)).rfind("x.toml:7:1: [experiment.config] nests 41 levels of tables and arrays, more than the "
                                     "32 an experiment's config may have",
                                     0) == 0);
    CHECK(error_of(nested(32)).find("nests 33 levels") != std::string::npos);
    TempDir dir;
    const auto config = load_run_config(write(dir.path() / "ok.toml", nested(31)));  // 32 levels: read everywhere
    CHECK_NOTHROW(boost::json::parse(config.experiments.at(0).config_json));
}

TEST_CASE("-0.0 and 0.0 hash alike, in the config's own keys and in an experiment's config") {
    // Issue 24: the canonical JSON wrote -0.0 as "-0E0", so two configs meaning the same run
    // had two hashes (and a sweep reran a verified result).
    TempDir dir;
    const auto hash_of = [&](const std::string& name, const char* zero) {
        return config_hash(load_run_config(write(dir.path() / name, std::string(kMinimal) + fmt::format(R"([generation]
temperature = {0}
top_p = 0.5
[output]
dir = "runs/a"
[[experiment]]
plugin = "libsteer.so"
[experiment.config]
scale = {0}
offsets = [{0}, 1.5]
)", zero))));
    };
    CHECK(hash_of("plus.toml", "0.0") == hash_of("minus.toml", "-0.0"));
    CHECK(hash_of("plus.toml", "0.0") != hash_of("other.toml", "0.25"));  // a real change still counts
}

TEST_CASE("to_json records the parsed config for run.json") {
    TempDir dir;
    const auto c = load_run_config(write(dir.path() / "x.toml", kMinimal));
    const auto o = to_json(c);
    CHECK(o.at("model").as_object().at("path").as_string() == (dir.path() / "model.gguf").string());
    CHECK(o.at("prompt").as_object().at("add_bos").as_string() == "auto");
    CHECK(o.at("hooks").as_object().at("failure").as_string() == "strict");
    CHECK(o.at("generation").as_object().at("temperature").as_double() == 0.0);
    CHECK(o.at("experiments").as_array().empty());
}

TEST_CASE("configs/demo.toml parses") {
    const auto c = load_run_config(fs::path(EMBER_SOURCE_DIR) / "configs" / "demo.toml");
    CHECK(c.model.path.filename() == "stories260K.gguf");
    REQUIRE(c.experiments.size() == 1);
    CHECK(c.experiments[0].plugin == fs::path(EMBER_SOURCE_DIR) / "build" / "plugins" / "libablate.so");
}

TEST_CASE("[output] extraction keys: defaults, every form, errors at file:line:column, in the hash") {
    TempDir dir;
    const RunConfig defaults = load_run_config(write(dir.path() / "d.toml", kMinimal));
    CHECK(!defaults.output.extract);
    CHECK(defaults.output.stages == std::vector<std::string>{"after_layer"});
    CHECK(!defaults.output.layers);
    CHECK(defaults.output.positions.kind == PositionSelection::Kind::All);
    CHECK(defaults.output.logits == LogitsDump::None);
    CHECK(defaults.output.logit_lens == 0);
    const auto o = to_json(defaults).at("output").as_object();
    CHECK(o.at("stages") == boost::json::array{"after_layer"});
    CHECK(o.at("layers") == "all");
    CHECK(o.at("positions") == "all");
    CHECK(o.at("logits") == "none");
    CHECK(o.at("logit_lens") == 0);
    CHECK(o.at("extract") == false);

    const RunConfig c = load_run_config(write(dir.path() / "c.toml", std::string(kMinimal) + R"([output]
extract = true
stages = ["before_logits", "after_mlp"]
layers = [3, 0]
positions = [4, 1]
logits = "all"
logit_lens = 10
)"));
    CHECK(c.output.extract);
    CHECK(c.output.stages == std::vector<std::string>{"before_logits", "after_mlp"});
    CHECK(c.output.layers == std::vector<std::uint32_t>{3, 0});
    CHECK(c.output.positions.kind == PositionSelection::Kind::List);
    CHECK(c.output.positions.list == std::vector<std::uint32_t>{4, 1});
    CHECK(c.output.logits == LogitsDump::All);
    CHECK(c.output.logit_lens == 10);
    CHECK(config_hash(c) != config_hash(defaults));
    const RunConfig last = load_run_config(write(dir.path() / "l.toml", std::string(kMinimal) + "[output]\npositions = \"last\"\n"));
    CHECK(last.output.positions.kind == PositionSelection::Kind::Last);

    const std::string out = std::string(kMinimal) + "[output]\n";
    CHECK(error_of(out + "stages = \"after_layer\"\n") ==
          "x.toml:6:10: output.stages must be an array of strings (\"before_layer\", \"attention_pattern\", \"head_outputs\", \"after_attention\", \"residual_mid\", \"mlp_input\", \"mlp_activation\", \"after_mlp\", "
          "\"after_layer\", \"before_logits\", \"after_logits\"), not a string");
    CHECK(error_of(out + "stages = [\"after_layer\", \"after_everything\"]\n") ==
          "x.toml:6:26: output.stages: \"after_everything\" is not one of \"before_layer\", \"attention_pattern\", \"head_outputs\", \"after_attention\", \"residual_mid\", \"mlp_input\", \"mlp_activation\", "
          "\"after_mlp\", \"after_layer\", \"before_logits\", \"after_logits\"");
    CHECK(error_of(out + "stages = [\"after_mlp\", \"after_mlp\"]\n") == "x.toml:6:24: output.stages: \"after_mlp\" is given twice");
    CHECK(error_of(out + "layers = \"some\"\n") == "x.toml:6:10: output.layers = \"some\" is not one of \"all\" or an array of integers");
    CHECK(error_of(out + "layers = [1, -2]\n") == "x.toml:6:14: output.layers: -2 is outside [0, 2147483647]");
    CHECK(error_of(out + "layers = [1, \"2\"]\n") == "x.toml:6:14: output.layers must hold only integers");
    CHECK(error_of(out + "layers = []\n") == "x.toml:6:10: output.layers is an empty array");
    CHECK(error_of(out + "positions = 3\n") ==
          "x.toml:6:13: output.positions must be \"all\", \"last\" or an array of integers, not an integer");
    CHECK(error_of(out + "positions = [2, 2]\n") == "x.toml:6:17: output.positions: 2 is given twice");
    CHECK(error_of(out + "logits = \"first\"\n") == "x.toml:6:10: output.logits = \"first\" is not one of \"none\", \"last\", \"all\", \"selected\"");
    CHECK(error_of(out + "logit_lens = -1\n") == "x.toml:6:14: output.logit_lens = -1 is outside [0, 1048576]");
    CHECK(error_of(out + "extract = \"yes\"\n") == "x.toml:6:11: output.extract must be true or false, not a string");
    CHECK(error_of(out + "stage = [\"after_layer\"]\n") ==
          "x.toml:6:1: unknown key 'stage' in [output] (known keys: dir, extract, stages, layers, positions, select, logits, "
          "logit_lens, overwrite, sae_output)");
}
