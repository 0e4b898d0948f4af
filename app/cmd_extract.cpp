// ember extract --model MODEL (--prompt TEXT | --file PATH) --out DIR [--stages S,...]
//               [--layers all|N,M] [--positions all|last|N,M] [--logits none|last|all]
//               [--logit-lens K] [--route fast|reference] [--arch A] [--threads N]
//               [--ctx N] [--no-bos] [--trace FILE] [--json]
// ember extract CONFIG.toml [--json]
// Runs the prompt through the model once (prefill) and writes the chosen hidden states
// as .npy files with a sealed manifest.json (docs/extraction.md, docs/formats.md). The
// options and the run config's [output] section are two spellings of the same request.
#include <fmt/format.h>

#include <filesystem>

#include "cli.hpp"
#include "commands.hpp"
#include "common/error.hpp"
#include "config/run_config.hpp"
#include "extract/extraction.hpp"
#include "extract/selection.hpp"

namespace ember::app {
namespace {

namespace fs = std::filesystem;

fs::path absolute(const std::string& path) { return fs::absolute(path).lexically_normal(); }

// "comma-separated: before_layer, ..." from the stage table.
std::string stage_list_help() {
    std::string list;
    for (hooks::Stage s : extract::kStages) list += fmt::format("{}{}", list.empty() ? "" : ", ", hooks::stage_name(s));
    return "comma-separated: " + list;
}

// The request the options spell, as the run config that means the same.
config::RunConfig config_from_options(const po::variables_map& vm) {
    config::RunConfig c;
    if (!vm.count("model")) throw UsageError("ember extract: give --model MODEL.gguf (or a run config)");
    if (!vm.count("out")) throw UsageError("ember extract: give --out DIR");
    if (vm.count("prompt") == vm.count("file")) throw UsageError("ember extract: give exactly one of --prompt TEXT or --file PATH");
    c.model.path = absolute(vm["model"].as<std::string>());
    c.model.arch = vm["arch"].as<std::string>();
    parse_arch(c.model.arch);
    c.model.route = vm["route"].as<std::string>();
    if (!runtime::route_from_name(c.model.route))
        throw UsageError(fmt::format("--route '{}' is not one of reference, fast", c.model.route));
    const long long threads = vm["threads"].as<long long>();
    const long long ctx = vm["ctx"].as<long long>();
    if (threads < 0 || threads > config::kMaxThreads)
        throw UsageError(fmt::format("--threads must be in [0, {}] (0: every hardware thread)", config::kMaxThreads));
    if (ctx < 0 || ctx > INT32_MAX) throw UsageError("--ctx must be >= 0 (0: min(4096, the training context))");
    c.model.threads = static_cast<std::uint32_t>(threads);
    c.model.ctx = static_cast<std::uint32_t>(ctx);
    if (vm.count("prompt")) c.prompt.text = vm["prompt"].as<std::string>();
    else c.prompt.file = absolute(vm["file"].as<std::string>());
    if (vm["no-bos"].as<bool>()) c.prompt.add_bos = config::AddBos::No;

    c.output.dir = absolute(vm["out"].as<std::string>());
    c.output.extract = true;
    extract::parse_stages(vm["stages"].as<std::string>(), c.output);
    extract::parse_layers(vm["layers"].as<std::string>(), c.output);
    extract::parse_positions(vm["positions"].as<std::string>(), c.output);
    extract::parse_logits(vm["logits"].as<std::string>(), c.output);
    const long long lens = vm["logit-lens"].as<long long>();
    if (lens < 0 || lens > (1 << 20)) throw UsageError("--logit-lens K must be in [0, 1048576] (0: no lens)");
    c.output.logit_lens = static_cast<std::uint32_t>(lens);
    if (vm.count("trace")) {
        c.tracing.enabled = true;
        c.tracing.path = absolute(vm["trace"].as<std::string>());
    } else {
        c.tracing.path = c.output.dir / "trace.jsonl";
    }
    return c;
}

}  // namespace

int run_extract(const std::vector<std::string>& args) {
    po::options_description options("extract options");
    options.add_options()
        ("model", po::value<std::string>(), "GGUF model to run")
        ("prompt", po::value<std::string>(), "the prompt text")
        ("file", po::value<std::string>(), "a file whose bytes are the prompt")
        ("out", po::value<std::string>(), "the run directory to write")
        ("stages", po::value<std::string>()->default_value("after_layer"),
         stage_list_help().c_str())
        ("layers", po::value<std::string>()->default_value("all"), "all, or comma-separated layer indices")
        ("positions", po::value<std::string>()->default_value("all"), "all, last, or comma-separated prompt positions")
        ("logits", po::value<std::string>()->default_value("none"), "logits.npy: none, last or all positions")
        ("logit-lens", po::value<long long>()->default_value(0), "top-K logit lens for every chosen layer (0: off)")
        ("route", po::value<std::string>()->default_value("fast"), "kernels: fast|reference")
        ("arch", po::value<std::string>()->default_value("auto"), "expected architecture: auto|llama|qwen3|gemma4")
        ("threads", po::value<long long>()->default_value(0), "threads (0: every hardware thread)")
        ("ctx", po::value<long long>()->default_value(0), "context length (0: min(4096, training context))")
        ("no-bos", po::bool_switch(), "do not add the BOS token even if the model asks for it")
        ("trace", po::value<std::string>(), "also write the operation journal to FILE")
        ("json", po::bool_switch(), "print a JSON summary")
        ("config", po::value<std::string>(), "a run config (TOML) instead of the options above");
    po::positional_options_description positional;
    positional.add("config", 1);
    po::variables_map vm;
    if (!parse_options("extract", args, options, positional, vm)) return kExitOk;

    config::RunConfig config;
    if (vm.count("config")) {
        for (const auto& [option, value] : vm) {
            if (option != "config" && option != "json" && !value.defaulted())
                throw UsageError(fmt::format("ember extract: --{} cannot be combined with a run config (set it there)", option));
        }
        config = config::load_run_config(vm["config"].as<std::string>());
        config.output.extract = true;
    } else {
        config = config_from_options(vm);
    }

    const extract::LoadedModel model(config.model.path, parse_arch(config.model.arch));
    const extract::ExtractionResult result = extract::run_extraction(model, config);

    if (vm["json"].as<bool>()) {
        boost::json::object o{{"dir", result.dir.string()},
                              {"manifest", (result.dir / extract::kManifestName).string()},
                              {"n_tokens", result.n_tokens},
                              {"arrays", result.arrays},
                              {"config_hash", config::config_hash(config)},
                              {"prefill_ms", result.prefill_ms},
                              {"write_ms", result.write_ms}};
        if (result.trace) o["trace"] = {{"path", result.trace->path.string()}, {"fingerprint", result.trace->fingerprint}};
        print_json(o);
    } else {
        fmt::print(stderr, "ember: {} prompt tokens, {} arrays in {} (prefill {:.1f} ms, write {:.1f} ms)\n",
                   result.n_tokens, result.arrays, result.dir.string(), result.prefill_ms, result.write_ms);
    }
    return kExitOk;
}

}  // namespace ember::app
