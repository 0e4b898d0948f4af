// ember run [--experiment PLUGIN.so]... [--trace FILE] [--model PATH] [--route R] [--threads N]
//           [--experiment-config KEY=VALUE | FILE.toml]... (each configuring the --experiment before it)
//           [--prompt TEXT | --file PATH | --ids 1,2,3] [--special] [--no-bos] [--target TEXT]
//           [--ctx N] [--kv-type T] [--arch A] CONFIG.toml
// (the model options, each given one overriding the config's [model] key)
// Runs a run config (docs/run-config.md): the experiments composed in order (the
// defaults file's, the config's [[experiment]] entries, each --experiment), the
// generated text streamed to stdout, a summary on stderr, and run.json in the config's
// output directory, with the trace journal ([tracing] or --trace), the extraction
// ([output] extract = true) and manifest.json beside it. Exit status: 0 (also when fail_open went past failing experiments),
// 1 a failed run (a strict experiment failure prints exactly
// `experiment 'NAME' failed in STAGE (phase=decode, layer=7): MESSAGE`), 2 bad usage.
#include <fmt/format.h>

#include <cstdio>
#include <functional>
#include <memory>

#include "cli.hpp"
#include "commands.hpp"
#include "common/error.hpp"
#include "common/output_path.hpp"
#include "attribution/configured_run.hpp"
#include "config/run_config.hpp"
#include "record/inputs_record.hpp"
#include "generation_output.hpp"
#include "run_pipeline.hpp"
#include "supervised_run.hpp"

namespace ember::app {

namespace {

// A config with [attribute]: `ember attribute`'s run of it (docs/attribution.md), on the
// reference route's gradient model, with no experiment and no trace.
int run_attribute_config(const config::RunConfig& config, bool experiments_or_trace_asked) {
    if (experiments_or_trace_asked || !config.experiments.empty())
        throw Error(fmt::format("{}: [attribute] runs the gradient model alone: no experiment (--experiment, the defaults "
                                "file's: --no-defaults or [hooks] defaults = false) and no --trace",
                                config.source.string()));
    const LoadedModel model(config.model.path, family_from_config(config));
    attribution::ConfiguredOptions options;
    options.run_id = make_run_id();
    const attribution::ConfiguredAttribution r = attribution::run_configured_attribution(model, config, options);
    if (r.resumed_samples > 0)
        fmt::print(stderr, "ember: resumed run {} after its {} finished sample(s)\n", r.run_id, r.resumed_samples);
    fmt::print(stderr, "ember: {} {} over {} sample(s); {} arrays in {} (forward {:.1f} ms, backward {:.1f} ms)\n",
               config.attribute->metric, r.samples == 1 ? fmt::format("= {:.6g}", r.metric) : std::string("computed"),
               r.samples, r.arrays, r.dir.string(), r.forward_ms, r.backward_ms);
    fmt::print(stderr, "ember: run {} written to {}\n", r.run_id, r.dir.string());
    return kExitOk;
}

}  // namespace

int run_run(const std::vector<std::string>& args) {
    po::options_description options("run options");
    // The model options, each given one overriding the config's [model] key.
    // The prompt options, given, replace the config's [prompt] (--target, --special and --no-bos add to it).
    options.add(model_options()).add(prompt_options()).add(target_options()).add(chat_options()).add(experiment_config_options());
    options.add_options()
        ("experiment", po::value<std::vector<std::string>>()->composing(),
         "load this experiment plugin after the config's (repeatable; runs in the order given)")
        ("sae", po::value<std::vector<std::string>>()->composing(),
         "load this SAE spliced at its site, after the config's [[sae]] (repeatable; docs/features.md)")
        ("no-defaults", "leave out the defaults file's experiments (as [hooks] defaults = false)")
        ("trace", po::value<std::string>(), "write the operation journal to FILE (as [tracing] enabled = true, path = FILE)")
        ("overwrite", po::bool_switch(), "replace an earlier run in the output directory (as [output] overwrite = true)")
        ("config", po::value<std::string>(), "the run config (TOML)");
    if (args.size() == 1 && args[0] == "--worker") run_worker();  // started by a supervisor, never by hand
    po::positional_options_description positional;
    positional.add("config", 1);
    po::variables_map vm;
    if (!parse_options("run", args, options, positional, vm)) return kExitOk;
    if (!vm.count("config")) {
        throw UsageError("ember run: give a run config: ember run [--experiment PLUGIN.so]... CONFIG.toml");
    }

    config::LoadOptions load;
    load.defaults_file = config::find_defaults_file();
    load.no_defaults = vm.count("no-defaults") > 0;
    if (vm.count("experiment")) {
        for (const auto& plugin : vm["experiment"].as<std::vector<std::string>>())
            load.command_line_experiments.emplace_back(plugin);
    }
    load.command_line_configs = experiment_configs(args, vm);
    config::RunConfig config = config::load_run_config(vm["config"].as<std::string>(), load);
    apply_model_options(vm, config.model, true);
    const bool prompt_given = vm.count("prompt") || vm.count("file") || vm.count("ids") || vm.count("target") ||
                              vm["special"].as<bool>() || vm["no-bos"].as<bool>();
    if (prompt_given) {
        if (config.dataset.path)
            throw UsageError("ember run: the prompt options replace a single prompt; the config runs a dataset");
        if (vm.count("chat") && (vm.count("prompt") || vm.count("file") || vm.count("ids")))
            throw UsageError("ember run: --chat replaces the prompt: give it or --prompt/--file/--ids, not both");
        apply_prompt_options(vm, config.prompt, false);
    }
    if (chat_requested(vm)) {
        if (config.dataset.path) throw UsageError("ember run: --chat replaces a single prompt; the config runs a dataset");
        apply_chat_options(vm, config.prompt);
    }
    if (vm["overwrite"].as<bool>()) config.output.overwrite = true;
    if (vm.count("sae"))
        for (const auto& dir : vm["sae"].as<std::vector<std::string>>())
            config.saes.push_back({std::filesystem::absolute(dir).lexically_normal(), std::nullopt, true});
    if (vm.count("trace")) {
        config.tracing.enabled = true;
        config.tracing.path = std::filesystem::absolute(vm["trace"].as<std::string>()).lexically_normal();
    }

    // What it writes, before any work: nothing there yet, or what it may replace.
    if (vm.count("trace")) check_output_file("--trace", config.tracing.path);
    record::check_run_outputs(config, false);
    if (config.attribute) return run_attribute_config(config, vm.count("trace") > 0 || vm.count("experiment") > 0);

    // With experiments the run happens in a supervised worker (run_pipeline.hpp), which
    // loads the plugins, never here: a plugin that cannot be loaded stops the run there
    // before anything is written.
    const LoadedModel model(config.model.path, family_from_config(config));
    TextPrinter print_token(model.tokenizer);
    RunOptions run_options;
    run_options.on_token = std::ref(print_token);
    RunOutcome outcome;
    try {
        outcome = execute_run(config, model, run_options, supervision_for(config, run_options));
    } catch (...) {
        if (print_token.printed_any()) std::fputs("\n", stdout);  // end the partial text's line
        throw;
    }
    print_token.finish();
    print_summary(outcome.prompt_tokens.size(), outcome.result, outcome.route, outcome.threads);
    if (outcome.target) print_target(*outcome.target);
    if (!outcome.experiment_failures.empty()) {
        fmt::print(stderr, "ember: {} experiment failure(s) passed over (hooks.failure = \"fail_open\"); first: {}\n",
                   outcome.experiment_failures.size(), outcome.experiment_failures.front());
    }
    if (outcome.trace) {
        fmt::print(stderr, "ember: trace {} ({} operations, fingerprint {})\n", outcome.trace->path.string(),
                   outcome.trace->operations, outcome.trace->fingerprint);
    }
    if (outcome.arrays > 0) fmt::print(stderr, "ember: {} arrays extracted\n", outcome.arrays);
    fmt::print(stderr, "ember: run {} written to {}\n", outcome.run_id, outcome.report.string());
    return kExitOk;
}

}  // namespace ember::app
