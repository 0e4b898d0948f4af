// ember extract --model MODEL (--prompt TEXT | --file PATH | --ids 1,2,3) [--special] [--target TEXT] --out DIR [--stages S,...]
//               [--layers all|N,M] [--positions all|last|N,M | --select SPEC] [--logits none|last|all]
//               [--logit-lens K] [--no-bos] [--trace FILE] [--json]
//               [the model options: --route --threads --ctx --kv-type --arch]
// ember extract --model MODEL --dataset FILE --out DIR [--select SPEC] [--on-empty error|skip]
//               [--batch-tokens N] [--experiment P.so]... [--shard K/N] [the options above but --prompt/--file]
// (either form: [--sae DIR]... [--sae-output dense|sparse], each SAE's features at the selected rows)
// ember extract CONFIG.toml [--shard K/N] [--json]
// Runs the prompt through the model once (prefill) and writes the chosen hidden states
// as .npy files with a sealed manifest.json (docs/extraction.md, docs/formats.md). With a
// dataset, every sample's selected rows are stacked into one array per (stage, layer); with
// --shard K/N only shard K's samples (`ember merge` joins the shards). The options and the
// run config's [output] and [dataset] sections are two spellings of the same request.
#include <fmt/format.h>

#include <filesystem>

#include "cli.hpp"
#include "commands.hpp"
#include "common/error.hpp"
#include "common/output_path.hpp"
#include "record/inputs_record.hpp"
#include "config/run_config.hpp"
#include "run_pipeline.hpp"
#include "extract/extraction.hpp"
#include "extract/resolved_selection.hpp"
#include "sweep_shard.hpp"

namespace ember::app {
namespace {

namespace fs = std::filesystem;

// "comma-separated: before_layer, ..." from the stage table.
std::string stage_list_help() {
    std::string list;
    for (hooks::Stage s : extract::kStages) list += fmt::format("{}{}", list.empty() ? "" : ", ", hooks::stage_name(s));
    return "comma-separated: " + list;
}

// The request the options spell, as the run config that means the same.
config::RunConfig config_from_options(const po::variables_map& vm, const std::vector<std::string>& args) {
    config::RunConfig c;
    if (!vm.count("model")) throw UsageError("ember extract: give --model MODEL.gguf (or a run config)");
    if (!vm.count("out")) throw UsageError("ember extract: give --out DIR");
    // With --dataset, --chat VARS.json gives the defaults of the dataset's conversations.
    const bool chat_prompt = vm.count("chat") && !vm.count("dataset");
    if (vm.count("prompt") + vm.count("file") + vm.count("ids") + vm.count("dataset") + (chat_prompt ? 1 : 0) != 1)
        throw UsageError("ember extract: give exactly one of --prompt TEXT, --file PATH, --ids 1,2,3, --chat VARS.json or "
                         "--dataset FILE");
    apply_model_options(vm, c.model, false);
    if (vm.count("dataset")) {
        c.dataset.path = absolute_path(vm["dataset"].as<std::string>());
        if (vm.count("target")) throw UsageError("ember extract --dataset: a sample's target is its \"target\" field");
    }
    apply_prompt_options(vm, c.prompt, false);
    if (c.dataset.path) {  // a dataset's own setting: its samples' texts and targets (dataset.special)
        c.dataset.special = c.prompt.special;
        c.prompt.special = false;
    }
    if (chat_requested(vm)) apply_chat_options(vm, c.prompt);
    if (c.dataset.path && c.prompt.chat && c.prompt.chat->contains("messages"))
        throw UsageError("ember extract --dataset: --chat " + vm["chat"].as<std::string>() +
                         " gives the defaults of the dataset's conversations (add_generation_prompt, enable_thinking, "
                         "tools...); its messages come from the lines");
    c.output.dir = absolute_path(vm["out"].as<std::string>());
    c.output.extract = true;
    extract::parse_stages(vm["stages"].as<std::string>(), c.output);
    extract::parse_layers(vm["layers"].as<std::string>(), c.output);
    if (vm.count("select") && !vm["positions"].defaulted())
        throw UsageError("ember extract: --select and --positions are two spellings of one request: give one");
    if (c.dataset.path) {
        if (!vm["positions"].defaulted()) throw UsageError("ember extract --dataset: choose rows with --select SPEC");
        if (vm.count("select")) c.dataset.select = extract::parse_spec(vm["select"].as<std::string>(), "select").to_string();
        const long long batch = vm["batch-tokens"].as<long long>();
        if (batch < 0 || batch > INT32_MAX) throw UsageError("--batch-tokens must be >= 0 (0: the default)");
        c.dataset.batch_tokens = static_cast<std::uint32_t>(batch);
        const std::string on_empty = vm["on-empty"].as<std::string>();
        if (on_empty != "error" && on_empty != "skip") throw UsageError("--on-empty must be error or skip");
        c.dataset.skip_empty = on_empty == "skip";
        const std::string evaluate = vm["evaluate"].as<std::string>();
        if (evaluate != "needed" && evaluate != "whole") throw UsageError("--evaluate must be needed or whole");
        c.dataset.evaluate_whole = evaluate == "whole";
        if (vm.count("shard")) c.dataset.shard = parse_shard(vm["shard"].as<std::string>(), "ember extract");
    } else if (vm.count("select")) {
        extract::parse_select(vm["select"].as<std::string>(), c.output);
    } else {
        extract::parse_positions(vm["positions"].as<std::string>(), c.output);
    }
    if (vm.count("experiment-config") && !vm.count("experiment"))
        throw UsageError("ember extract: --experiment-config configures the --experiment before it: give one");
    if (vm.count("experiment")) {
        if (!c.dataset.path) throw UsageError("ember extract: --experiment needs --dataset (or use ember run)");
        std::size_t n = 0;
        const std::vector<std::string> configs = experiment_configs(args, vm);
        for (const std::string& plugin : vm["experiment"].as<std::vector<std::string>>()) {
            config::ExperimentEntry e;
            e.plugin = absolute_path(plugin);
            e.config_json = configs.at(n);
            e.base_dir = fs::current_path();
            e.origin = fmt::format("--experiment {}", ++n);
            c.experiments.push_back(std::move(e));
        }
    }
    if (vm.count("sae"))
        for (const std::string& dir : vm["sae"].as<std::vector<std::string>>()) c.saes.push_back({absolute_path(dir), std::nullopt, true});
    const std::string sae_output = vm["sae-output"].as<std::string>();
    if (sae_output != "dense" && sae_output != "sparse") throw UsageError("--sae-output must be dense or sparse");
    if (!vm["sae-output"].defaulted() && !vm.count("sae")) throw UsageError("ember extract: --sae-output goes with --sae DIR");
    c.output.sae_output = sae_output == "dense" ? config::SaeOutput::Dense : config::SaeOutput::Sparse;
    extract::parse_logits(vm["logits"].as<std::string>(), c.output);
    const long long lens = vm["logit-lens"].as<long long>();
    if (lens < 0 || lens > (1 << 20)) throw UsageError("--logit-lens K must be in [0, 1048576] (0: no lens)");
    c.output.logit_lens = static_cast<std::uint32_t>(lens);
    if (vm.count("trace") && c.dataset.path) throw UsageError("ember extract --dataset: --trace is not supported yet");
    if (vm.count("trace")) {
        c.tracing.enabled = true;
        c.tracing.path = absolute_path(vm["trace"].as<std::string>());
    } else {
        c.tracing.path = c.output.dir / "trace.jsonl";
    }
    return c;
}

// Experiments on a dataset: loaded once, called per sample (docs/extraction.md), in a
// supervised worker (run_pipeline.hpp).
int run_dataset(const extract::LoadedModel& model, const config::RunConfig& config, bool json) {
    extract::DatasetRunOptions options;
    options.progress = !json;
    const extract::DatasetResult r = execute_dataset_run(model, config, options, supervision_for(config));
    const double seconds = std::max(r.seconds, 1e-9);
    if (json) {
        print_json(boost::json::object{{"dir", r.dir.string()},
                                       {"manifest", (r.dir / record::kManifestName).string()},
                                       {"samples", r.samples},
                                       {"skipped", r.skipped},
                                       {"rows", r.rows},
                                       {"tokens", r.tokens},
                                       {"evaluated_tokens", r.evaluated},
                                       {"arrays", r.arrays},
                                       {"batches", r.batches},
                                       {"resumed_samples", r.resumed_samples},
                                       {"seconds", r.seconds},
                                       {"config_hash", config::config_hash(config)}});
    } else {
        fmt::print(stderr,
                   "ember: {} samples ({} skipped, {} resumed), {} rows, {} tokens ({} evaluated), {} arrays in {} "
                   "({:.1f} s, {:.0f} tok/s, {:.0f} evaluated tok/s)\n",
                   r.samples, r.skipped, r.resumed_samples, r.rows, r.tokens, r.evaluated, r.arrays, r.dir.string(),
                   r.seconds, static_cast<double>(r.tokens_this_run) / seconds,
                   static_cast<double>(r.evaluated_this_run) / seconds);
    }
    return kExitOk;
}

// `ember extract CONFIG --shard K/N`: the run `ember sweep` makes of shard K (sweep_shard.hpp).
config::RunConfig shard_of_config(config::RunConfig config, Shard shard) {
    const std::string name = config.source.string();
    if (!config.dataset.path) throw UsageError(fmt::format("ember extract: --shard K/N goes with a dataset run; {} has none", name));
    if (config.dataset.shard)
        throw UsageError(fmt::format("ember extract: {} is shard {} already (dataset.shard)", name,
                                     config::shard_text(*config.dataset.shard)));
    if (config.dataset.shards > 1 && config.dataset.shards != shard.count)
        throw UsageError(fmt::format("ember extract: --shard {} is not one of the dataset.shards = {} of {}",
                                     config::shard_text(shard), config.dataset.shards, name));
    return dataset_shard_config(std::move(config), shard);
}

}  // namespace

int run_extract(const std::vector<std::string>& args) {
    po::options_description options("extract options");
    options.add(model_options()).add(prompt_options()).add(target_options()).add(chat_options()).add(experiment_config_options());
    options.add_options()
        ("dataset", po::value<std::string>(), "a dataset: JSONL (text, id, select, target) or .txt (one prompt a line)")
        ("out", po::value<std::string>(), "the run directory to write")
        ("stages", po::value<std::string>()->default_value("after_layer"),
         stage_list_help().c_str())
        ("layers", po::value<std::string>()->default_value("all"), "all, or comma-separated layer indices")
        ("positions", po::value<std::string>()->default_value("all"), "all, last, or comma-separated prompt positions")
        ("select", po::value<std::string>(),
         "a selection spec: all, first, last, 3,-1, bytes:A-B, chars:A-B, substring:TEXT[#K], each [:first|:last]")
        ("logits", po::value<std::string>()->default_value("none"), "logits.npy: none, last, all or the selected positions")
        ("logit-lens", po::value<long long>()->default_value(0), "top-K logit lens for every chosen layer (0: off)")
        ("batch-tokens", po::value<long long>()->default_value(0), "dataset: tokens per evaluation (0: the default)")
        ("on-empty", po::value<std::string>()->default_value("error"), "dataset: a sample selecting nothing: error|skip")
        ("evaluate", po::value<std::string>()->default_value("needed"),
         "dataset: needed (a sample's rows up to the last one an output reads) or whole (every row; the same values)")
        ("experiment", po::value<std::vector<std::string>>(), "dataset: an experiment plugin (.so), per sample; repeatable")
        ("shard", po::value<std::string>(), "dataset: only shard K of N of the samples (K/N, K from 0); ember merge joins them")
        ("sae", po::value<std::vector<std::string>>()->composing(),
         "also write this SAE's features at the selected rows (repeatable; docs/features.md)")
        ("sae-output", po::value<std::string>()->default_value("dense"),
         "the SAE features' layout: dense ([R, d_sae] float32) or sparse (CSR: indptr, indices, values)")
        ("trace", po::value<std::string>(), "also write the operation journal to FILE")
        ("json", po::bool_switch(), "print a JSON summary")
        ("overwrite", po::bool_switch(), "replace an earlier run in the output directory (as [output] overwrite = true)")
        ("config", po::value<std::string>(), "a run config (TOML) instead of the options above");
    po::positional_options_description positional;
    positional.add("config", 1);
    po::variables_map vm;
    if (!parse_options("extract", args, options, positional, vm)) return kExitOk;

    config::RunConfig config;
    if (vm.count("config")) {
        for (const auto& [option, value] : vm) {
            if (option != "config" && option != "json" && option != "overwrite" && option != "shard" && !value.defaulted())
                throw UsageError(fmt::format("ember extract: --{} cannot be combined with a run config (set it there)", option));
        }
        config = config::load_run_config(vm["config"].as<std::string>());
        config.output.extract = true;
        // (dataset.shards = N says how ember sweep splits the run; run here, it is done whole.)
        if (vm.count("shard")) config = shard_of_config(std::move(config), parse_shard(vm["shard"].as<std::string>(), "ember extract"));
    } else {
        if (vm.count("shard") && !vm.count("dataset")) throw UsageError("ember extract: --shard K/N goes with --dataset");
        config = config_from_options(vm, args);
    }

    // A single-prompt extraction loads no experiment (run_extraction has no hooks for
    // them): a config that composes some is `ember run`'s, which supervises them.
    if (!config.dataset.path && !config.experiments.empty())
        throw UsageError(fmt::format("ember extract: {} composes {} experiment(s) ([[experiment]]): a single-prompt "
                                     "run with experiments is `ember run {}` with [output] extract = true",
                                     config.source.string(), config.experiments.size(), config.source.string()));

    // What it writes, before any work: nothing there yet, or what it may replace.
    if (vm.count("out")) check_output_directory("--out", config.output.dir);
    if (vm.count("trace")) check_output_file("--trace", config.tracing.path);
    record::check_run_outputs(config, vm["overwrite"].as<bool>());

    const extract::LoadedModel model(config.model.path, parse_arch(config.model.arch));
    if (config.dataset.path) return run_dataset(model, config, vm["json"].as<bool>());
    extract::ExtractionOptions extraction;
    extraction.overwrite = vm["overwrite"].as<bool>();
    const extract::ExtractionResult result = extract::run_extraction(model, config, extraction);

    if (vm["json"].as<bool>()) {
        boost::json::object o{{"dir", result.dir.string()},
                              {"manifest", (result.dir / record::kManifestName).string()},
                              {"n_tokens", result.n_tokens},
                              {"arrays", result.arrays},
                              {"config_hash", config::config_hash(config)},
                              {"prefill_ms", result.prefill_ms},
                              {"write_ms", result.write_ms}};
        if (result.trace) o["trace"] = {{"path", result.trace->path.string()}, {"fingerprint", result.trace->fingerprint}};
        if (result.target) o["target"] = *result.target;
        print_json(o);
    } else {
        fmt::print(stderr, "ember: {} prompt tokens, {} arrays in {} (prefill {:.1f} ms, write {:.1f} ms)\n",
                   result.n_tokens, result.arrays, result.dir.string(), result.prefill_ms, result.write_ms);
        if (result.target)
            fmt::print(stderr, "ember: target log-probability {:.6f} over {} tokens (targets.jsonl)\n",
                       result.target->at("logprob").as_double(), result.target->at("n_tokens").to_number<std::size_t>());
    }
    return kExitOk;
}

}  // namespace ember::app
