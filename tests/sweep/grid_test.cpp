// Rung: smoke (configuration). Grid expansion: the cartesian product of [grid] keys and
// [[grid.zip]] groups, in a documented order; run names made of every grid key's value,
// filesystem-safe and ASCII for any value (Arabic included); two grids that expand to
// the same run give it the same config hash, the hash of that run written by hand; every
// error names file:line:column of the grid key or value at fault.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <boost/json.hpp>

#include <algorithm>
#include <fstream>

#include "common/error.hpp"
#include "config/run_config.hpp"
#include "config/sweep_grid.hpp"
#include "support/temp_dir.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

const std::string kBase =
    "[model]\npath = \"model.gguf\"\nthreads = 1\n[prompt]\ntext = \"Once upon a time\"\n"
    "[generation]\nmax_tokens = 2\n";

fs::path write(const fs::path& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
    return path;
}

config::Grid expand(const TempDir& dir, const std::string& name, const std::string& text) {
    return config::expand_grid(write(dir.path() / name, text));
}

// The error expand_grid throws, or "" when it does not throw.
std::string error_of(const TempDir& dir, const std::string& text) {
    try {
        expand(dir, "bad.toml", text);
    } catch (const Error& e) {
        const std::string message = e.what();
        const std::string prefix = dir.path().string() + "/";
        return message.starts_with(prefix) ? message.substr(prefix.size()) : message;
    }
    return "";
}

// 1000 seeds x 1000 max_tokens: a million runs.
std::string huge_grid() {
    std::string values;
    for (int i = 1; i <= 1000; ++i) values += fmt::format("{}{}", i > 1 ? ", " : "", i);
    return fmt::format("[grid]\n\"generation.seed\" = [{0}]\n\"generation.max_tokens\" = [{0}]\n", values);
}

// Safe ASCII, and characters beyond ASCII (readable labels: Arabic stays Arabic) as whole
// UTF-8 sequences; never '/', a control byte or a cut character.
bool name_is_safe(const std::string& name) {
    if (name.empty() || name.size() > 200 || name.front() == '.') return false;
    for (std::size_t i = 0; i < name.size();) {
        const auto c = static_cast<unsigned char>(name[i]);
        if (c < 0x80) {
            if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  std::string_view("._-=,+~").find(static_cast<char>(c)) != std::string_view::npos))
                return false;
            ++i;
            continue;
        }
        const std::size_t n = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
        if (n == 0 || i + n > name.size()) return false;
        for (std::size_t k = 1; k < n; ++k)
            if ((static_cast<unsigned char>(name[i + k]) & 0xC0) != 0x80) return false;
        i += n;
    }
    return true;
}

}  // namespace

TEST_CASE("grid: the product of [grid] keys and [[grid.zip]] groups, in order, with names and values") {
    TempDir dir;
    const config::Grid grid = expand(dir, "patch.toml",
                                     kBase + "[grid]\n\"output.layers\" = [[0], [1], [2]]\n"
                                             "[[grid.zip]]\n\"prompt.text\" = [\"a b\", \"ذهب الولد إلى المدرسة\"]\n"
                                             "\"generation.seed\" = [1, 2]\n");
    CHECK(grid.keys == std::vector<std::string>{"generation.seed", "output.layers", "prompt.text"});
    CHECK(grid.base_dir == dir.path() / "runs" / "patch");
    REQUIRE(grid.runs.size() == 6);  // 3 layers x 2 pairs, not x 4
    std::vector<std::string> names;
    for (std::size_t i = 0; i < grid.runs.size(); ++i) {
        CAPTURE(i);
        const config::GridRun& run = grid.runs[i];
        names.push_back(run.name);
        CHECK(name_is_safe(run.name));
        // The product dimension varies slowest; the zip group's keys move together.
        const std::uint32_t layer = static_cast<std::uint32_t>(i / 2);
        const bool arabic = i % 2 == 1;
        REQUIRE(run.config.output.layers.has_value());
        CHECK(*run.config.output.layers == std::vector<std::uint32_t>{layer});
        CHECK(run.config.generation.seed == (arabic ? 2u : 1u));
        CHECK(*run.config.prompt.text == (arabic ? "ذهب الولد إلى المدرسة" : "a b"));
        CHECK(run.config.output.dir == grid.base_dir / run.name);
        CHECK(run.config.tracing.path == grid.base_dir / run.name / "trace.jsonl");
        REQUIRE(run.values.size() == 3);
        CHECK(run.values[0].key == "generation.seed");
        CHECK(run.values[1].value == json::array{layer});
        CHECK(run.values[2].value == json::value(*run.config.prompt.text));
        const std::string prefix = fmt::format("seed={},layers={},text=", arabic ? 2 : 1, layer);
        CHECK(run.name.rfind(prefix, 0) == 0);
        // Readable labels: the Arabic words kept (24 bytes of them, whole characters), then the hash.
        const std::string label = arabic ? "ذهب_الولد_إلى~" : "a_b~";
        CHECK(run.name.substr(prefix.size(), label.size()) == label);
        CHECK(run.name.size() == prefix.size() + label.size() + 8);
    }
    std::sort(names.begin(), names.end());
    CHECK(std::adjacent_find(names.begin(), names.end()) == names.end());
    // The same file expands the same way again.
    const config::Grid again = config::expand_grid(dir.path() / "patch.toml");
    for (std::size_t i = 0; i < grid.runs.size(); ++i) CHECK(again.runs[i].name == grid.runs[i].name);
}

TEST_CASE("grid: two grids that expand to the same run give it the hash of that run written by hand") {
    TempDir dir;
    const std::string base = kBase + "[output]\ndir = \"out\"\n";
    // One quotes its keys and zips; the other nests them; their layer lists overlap in [1].
    const config::Grid a = expand(dir, "a.toml",
                                  base + "[grid]\n\"output.layers\" = [[0], [1]]\n[[grid.zip]]\n\"generation.seed\" = [7]\n");
    const config::Grid b = expand(dir, "b.toml", base + "[grid.generation]\nseed = [7]\n[grid.output]\nlayers = [[1], [2]]\n");
    REQUIRE(a.runs.size() == 2);
    REQUIRE(b.runs.size() == 2);
    CHECK(a.runs[1].name == "seed=7,layers=1");
    CHECK(b.runs[0].name == a.runs[1].name);
    CHECK(config::config_hash(a.runs[1].config) == config::config_hash(b.runs[0].config));
    CHECK(config::config_hash(a.runs[0].config) != config::config_hash(a.runs[1].config));

    const fs::path by_hand = write(dir.path() / "by-hand.toml", "[model]\npath = \"./model.gguf\"\nthreads = 1\n[prompt]\ntext = \"Once upon a time\"\n"
                   "[generation]\nseed = 7\nmax_tokens = 2\n[output]\nlayers = [1]\ndir = \"out/seed=7,layers=1\"\n");
    CHECK(config::config_hash(config::load_run_config(by_hand)) == config::config_hash(a.runs[1].config));
}

TEST_CASE("grid: experiment keys by plugin name or index, and only keys the base experiment sets") {
    TempDir dir;
    const std::string base = kBase + "[[experiment]]\nplugin = \"plugins/libpatch.so\"\n[experiment.config]\n"
                                     "source = \"clean/capture\"\nlayers = [0]\npositions = [0]\n";
    const config::Grid grid = expand(dir, "g.toml",
                                     base + "[grid]\n\"experiment.patch.config.layers\" = [[1], [3]]\n"
                                            "\"experiment.0.config.positions\" = [[4], [5], [6]]\n");
    REQUIRE(grid.runs.size() == 6);
    // Keys in name order: "experiment.0..." sorts before "experiment.patch...".
    CHECK(grid.runs[0].name == "positions=4,layers=1");
    CHECK(grid.runs[5].name == "positions=6,layers=3");
    const json::object patch = json::parse(grid.runs[5].config.experiments.at(0).config_json).as_object();
    CHECK(patch.at("layers") == json::array{3});
    CHECK(patch.at("positions") == json::array{6});
    CHECK(patch.at("source") == "clean/capture");

    CHECK(error_of(dir, base + "[grid]\n\"experiment.patch.config.layerz\" = [[1]]\n") ==
          "bad.toml:15:1: grid key 'experiment.patch.config.layerz': the base [[experiment]] 'patch' has no "
          "'config.layerz' (a grid varies keys the base experiment sets; give it a value there)");
    CHECK(error_of(dir, base + "[grid]\n\"experiment.steer.config.layers\" = [[1]]\n")
              .starts_with("bad.toml:15:1: grid key 'experiment.steer.config.layers': no [[experiment]] 'steer' in the "
                           "base config (there: 0 (patch))"));
}

TEST_CASE("grid: every error names file:line:column") {
    TempDir dir;
    struct Case {
        std::string grid;
        std::string error;
    };
    // kBase is 7 lines; the [grid] header is line 8, its first key line 9.
    const Case cases[] = {
        {"[grid]\n\"model.treads\" = [1, 2]\n",
         "bad.toml:9:1: unknown key 'treads' in [model] (known keys: path, arch, route, kv_type, threads, ctx)"},
        {"[grid]\n\"model.threads\" = [1, \"two\"]\n", "bad.toml:9:23: model.threads must be an integer, not a string"},
        {"[grid]\n\"generation.top_p\" = [0.5, 2.0]\n", "bad.toml:9:28: generation.top_p = 2 is outside [0, 1]"},
        {"[grid]\n\"modle.threads\" = [1]\n",
         "bad.toml:9:1: unknown key 'modle' (known keys: model, prompt, generation, tracing, output, hooks, dataset, attribute, experiment, sae)"},
        {"[grid]\n\"model.threads\" = 3\n", "bad.toml:9:19: grid key 'model.threads' must be a list of values, not an integer"},
        {"[grid]\n\"model.threads\" = []\n", "bad.toml:9:19: grid key 'model.threads' has no values"},
        {"[grid]\n\"model.threads\" = [1, 1]\n",
         "bad.toml:9:1: grid key 'model.threads': value 2 is the same as value 1 (a run would be given twice)"},
        {"[grid]\n\"output.dir\" = [\"a\", \"b\"]\n",
         "bad.toml:9:1: output.dir cannot be a grid key: each run writes to output.dir/NAME, NAME made of its grid values"},
        {"[grid]\n\"model.path.x\" = [1]\n",
         "bad.toml:9:1: grid key 'model.path.x': model.path is a string in the base config, not a table"},
        {"[[grid.zip]]\n\"model.threads\" = [1, 2]\n\"generation.seed\" = [1]\n",
         "bad.toml:9:1: grid key 'model.threads' has 2 values but 'generation.seed' in the same [[grid.zip]] group has 1 "
         "(the keys of a group vary together)"},
        {"[grid]\n\"model.threads\" = [1]\n[[grid.zip]]\n\"model.threads\" = [2]\n",
         "bad.toml:11:1: grid key 'model.threads' is given twice"},
        {"[grid]\n", "bad.toml:8:1: [grid] has no keys: give it at least one config key with a list of values"},
        {huge_grid(), "bad.toml:8:1: the grid expands to more than 100000 runs; split it into several grid files"},
        {"[grid]\n\"model.threads\" = [1, 2]\n[tracing]\npath = \"t.jsonl\"\n",
         "bad.toml:11:8: tracing.path in a grid's base would name one journal for every run; leave it out (each run's "
         "journal goes to its own output directory) or make it a grid key"},
    };
    for (const Case& c : cases) {
        CAPTURE(c.grid);
        CHECK(error_of(dir, kBase + c.grid) == c.error);
    }
    CHECK(error_of(dir, kBase + "[grid]\n\"experiment.0.plugin\" = [1, \"1\"]\n")
              .starts_with("bad.toml:9:1: grid key 'experiment.0.plugin': the base config has no [[experiment]]"));
}

TEST_CASE("grid: how values are written in run names") {
    CHECK(config::grid_value_text(json::value(3)) == "3");
    CHECK(config::grid_value_text(json::value(-2)) == "-2");
    CHECK(config::grid_value_text(json::value(0.5)) == "0.5");
    CHECK(config::grid_value_text(json::value(true)) == "true");
    CHECK(config::grid_value_text(json::array{0, 3}) == "0+3");
    CHECK(config::grid_value_text(json::value("after_layer")) == "after_layer");
    CHECK(config::grid_value_text(json::value("last")) == "last");
    const std::string slash = config::grid_value_text(json::value("runs/clean/capture"));
    CHECK(slash.starts_with("runs_clean_capture~"));
    CHECK(slash.size() == std::string("runs_clean_capture~").size() + 8);
    const std::string dots = config::grid_value_text(json::value(".."));
    CHECK(dots.starts_with("~"));
    CHECK(dots.size() == 9);
    const std::string arabic = config::grid_value_text(json::value("ذهب الولد"));
    CHECK(arabic.starts_with("ذهب_الولد~"));
    CHECK(arabic.size() == std::string("ذهب_الولد~").size() + 8);
    CHECK(arabic != config::grid_value_text(json::value("ذهب البنت")));  // the hash tells them apart
    // Equal slugs, different values: the hash still tells them apart.
    CHECK(config::grid_value_text(json::value("كتب/")) != config::grid_value_text(json::value("كتب:")));
    CHECK(config::grid_value_text(json::value("كتب/")).starts_with("كتب~"));
    // Unsafe bytes go: a bidirectional control, a zero-width joiner, a no-break space, a
    // control byte, invalid UTF-8 (a lone continuation byte, a cut sequence).
    CHECK(config::grid_value_text(json::value("a\u202Eb\u200Dc\u00A0d\x01" "e")).starts_with("a_b_c_d_e~"));
    CHECK(config::grid_value_text(json::value(std::string("x\x80y\xD8"))).starts_with("x_y~"));
    // The cap falls between characters: 30 two-byte letters give 12 whole ones (24 bytes).
    std::string letters;
    for (int i = 0; i < 30; ++i) letters += "ب";
    const std::string capped = config::grid_value_text(json::value(letters));
    CHECK(capped.substr(0, capped.size() - 9) == letters.substr(0, 24));
    CHECK(capped[24] == '~');
    // A three-byte character that would pass the cap is left out whole.
    const std::string odd = "x" + letters.substr(0, 22) + "€";  // 1 + 22 + 3 bytes
    const std::string odd_text = config::grid_value_text(json::value(odd));
    CHECK(odd_text.substr(0, odd_text.size() - 9) == "x" + letters.substr(0, 22));
    const std::string long_text(100, 'x');
    CHECK(config::grid_value_text(json::value(long_text)) .size() == 24 + 9);
    CHECK(config::grid_value_text(json::object{{"a", 1}}).starts_with("~"));
}

TEST_CASE("grid: values that would be written alike are refused, naming both runs") {
    TempDir dir;
    const std::string error = error_of(dir, kBase + "[grid]\n\"prompt.text\" = [\"1\", \"2\"]\n"
                                                    "[[grid.zip]]\n\"generation.seed\" = [1, 2]\n"
                                                    "\"generation.max_tokens\" = [1, 1]\n");
    CHECK(error.empty());  // the zip group's seeds tell its runs apart
    // 1 and 1.0 are different TOML values, written alike.
    CHECK(error_of(dir, kBase + "[grid]\n\"generation.temperature\" = [1, 1.0]\n") ==
          "bad.toml:8:1: runs 0 and 1 would both be named 'temperature=1' (their values are written alike)");
}

}  // namespace ember::test
