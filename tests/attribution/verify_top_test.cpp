// Rung: interventions. What `ember attribute --verify-top K` records as the truth of a
// site is what activation patching with Ember's own experiments measures: for each of the
// K top units (after_layer, after_mlp: whole residual rows, what `patch` writes), an
// `ember run` on the reference route with `capture` saving the corrupted prompt's
// activations and `patch` writing that one (stage, layer, position) into the clean run,
// its logits dumped: M_patched - M_clean, the summed log-probability of the target computed
// here from those logits, equals the recorded effect (to 1e-9: the logits are the same
// floats; only the log-softmax's summation order differs from the engine's).
#include <doctest/doctest.h>

#include <ember/npy.hpp>

#include <boost/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace ember {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

const std::string kClean = "Once upon a time, there was a little girl named Lily";
const std::string kCorrupt = "Once upon a time, there was a little boy named Lily";
const std::string kTarget = ". She";

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::string run(const std::string& args) {
    const auto r = test::run_command(std::string(EMBER_BINARY) + " " + args + " 2>&1");
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    return r.output;
}

std::string plugin(const char* name) { return std::string(EMBER_BUILTIN_PLUGIN_DIR) + "/lib" + name + ".so"; }

// A reference-route `ember run` of prompt + target, one generated token, every prompt row's
// logits dumped, with `experiment` (TOML) composed; returns its output directory.
fs::path route_run(const fs::path& root, const std::string& name, const std::string& prompt, const std::string& experiment) {
    const fs::path config = root / (name + ".toml");
    std::ofstream(config) << "[model]\npath = " << test::shell_quote(test::fixture_path("models/stories260K.gguf").string())
                          << "\nroute = \"reference\"\n[prompt]\ntext = \"" << prompt << kTarget
                          << "\"\n[generation]\nmax_tokens = 1\n[output]\ndir = \"" << name
                          << "\"\nextract = true\nstages = [\"before_logits\"]\nlogits = \"all\"\n"
                          << experiment;
    run("run --no-defaults " + test::shell_quote(config.string()));
    return root / name;
}

// The summed log-probability of the metric's terms from a run's logits.npy (row, token).
double logprob(const fs::path& run_dir, const json::array& terms) {
    const npy::Array logits = npy::read(run_dir / "logits.npy");
    REQUIRE(logits.shape.size() == 2);
    const std::size_t V = logits.shape[1];
    double total = 0;
    for (const json::value& t : terms) {
        const std::size_t row = t.at("row").to_number<std::size_t>();
        const std::size_t token = t.at("token").to_number<std::size_t>();
        REQUIRE(row < logits.shape[0]);
        const float* z = logits.values.data() + row * V;
        double max = z[0];
        for (std::size_t j = 1; j < V; ++j) max = std::max(max, static_cast<double>(z[j]));
        double sum = 0;
        for (std::size_t j = 0; j < V; ++j) sum += std::exp(z[j] - max);
        total += z[token] - max - std::log(sum);
    }
    return total;
}

TEST_CASE("--verify-top's effects are what ember run's capture and patch experiments measure") {
    const test::TempDir tmp;
    const fs::path atp = tmp.path() / "atp";
    run("attribute --model " + test::shell_quote(test::fixture_path("models/stories260K.gguf").string()) + " --prompt " +
        test::shell_quote(kClean) + " --corrupt " + test::shell_quote(kCorrupt) + " --target " + test::shell_quote(kTarget) +
        " --stages after_layer,after_mlp --verify-top 5 --out " + test::shell_quote(atp.string()));
    const json::value manifest = json::parse(read_file(atp / "manifest.json"));
    const json::array& terms = manifest.at("metric").at("evaluations").at(0).at("terms").as_array();

    // The corrupted prompt's activations, captured on the reference route; the clean run.
    route_run(tmp.path(), "source", kCorrupt,
              "[[experiment]]\nplugin = \"" + plugin("capture") + "\"\n[experiment.config]\nstages = [\"after_layer\", "
              "\"after_mlp\"]\nphase = \"prefill\"\n");
    const double clean = logprob(route_run(tmp.path(), "clean", kClean, ""), terms);
    CHECK(std::abs(clean - manifest.at("attribution_patching").at("route_clean_metric").as_double()) <= 1e-9);

    std::istringstream lines(read_file(atp / "attribution.jsonl"));
    std::size_t verified = 0;
    for (std::string line; std::getline(lines, line);) {
        const json::object unit = json::parse(line).as_object();
        if (!unit.contains("effect")) continue;
        const std::string stage(unit.at("stage").as_string());
        const auto layer = unit.at("layer").to_number<std::int64_t>();
        const auto position = unit.at("position").to_number<std::int64_t>();
        CAPTURE(line);
        const std::string name = "patched" + std::to_string(verified);
        const fs::path patched = route_run(
            tmp.path(), name, kClean,
            "[[experiment]]\nplugin = \"" + plugin("patch") + "\"\n[experiment.config]\nsource = \"source/capture\"\n" +
                "stages = [\"" + stage + "\"]\nlayers = [" + std::to_string(layer) + "]\npositions = [" +
                std::to_string(position) + "]\nphase = \"prefill\"\n");
        const double effect = logprob(patched, terms) - clean;
        CAPTURE(effect);
        CHECK(std::abs(effect - unit.at("effect").as_double()) <= 1e-9);
        ++verified;
    }
    CHECK(verified == 5);
}

}  // namespace
}  // namespace ember
