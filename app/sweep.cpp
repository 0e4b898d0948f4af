#include "sweep.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "attribution/configured_run.hpp"
#include "common/error.hpp"
#include "cli.hpp"
#include "config/run_config.hpp"
#include "record/dir_lock.hpp"
#include "extract/dataset_merge.hpp"
#include "record/inputs_record.hpp"
#include "record/run_directory.hpp"
#include "config/toml_reader.hpp"
#include "experiments/plugin_library.hpp"
#include "record/verify.hpp"
#include "generation_output.hpp"
#include "run_pipeline.hpp"
#include "sweep_shard.hpp"

namespace ember::app {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

// Each model file (with its expected family) loaded at most once, on first use; a model
// that fails to load fails every config that names it, with the same message.
class ModelCache {
public:
    struct Entry {
        std::mutex loading;
        std::shared_ptr<const LoadedModel> model;
        std::string error;
        bool tried = false;
    };

    // The model and whether an earlier run loaded it.
    std::pair<std::shared_ptr<const LoadedModel>, bool> get(const config::RunConfig& config) {
        Entry& entry = slot(fmt::format("{}\n{}", config.model.path.string(), config.model.arch));
        const std::lock_guard lock(entry.loading);  // others wanting this model wait for it
        const bool shared = entry.tried;
        if (!entry.tried) {
            entry.tried = true;
            try {
                entry.model = std::make_shared<const LoadedModel>(config.model.path, family_from_config(config));
            } catch (const std::exception& e) {
                entry.error = e.what();
            }
        }
        if (!entry.model) throw Error(entry.error);
        return {entry.model, shared};
    }

private:
    Entry& slot(const std::string& key) {
        const std::lock_guard lock(mutex_);
        auto& entry = entries_[key];
        if (!entry) entry = std::make_unique<Entry>();
        return *entry;
    }

    std::mutex mutex_;
    std::map<std::string, std::unique_ptr<Entry>> entries_;
};

// A config with what the planning found: its parse error, or a reason to skip it.
struct Planned {
    std::optional<config::RunConfig> config;
    SweepRun run;
};

Planned plan(const SweepInput& input, const std::optional<fs::path>& defaults, bool force) {
    Planned p;
    p.run.config = input.config;
    p.run.name = input.name;
    p.run.grid = input.grid;
    try {
        config::LoadOptions load;
        load.defaults_file = defaults;
        p.config = input.expanded ? *input.expanded : config::load_run_config(input.config, load);
        record::check_run_outputs(*p.config, true);  // a sweep replaces stale results: up front, as a failed run
    } catch (const std::exception& e) {
        p.run.error = e.what();
        return p;
    }
    if (p.config->dataset.path && !p.config->attribute) p.config->output.extract = true;  // as `ember extract CONFIG` runs it
    p.run.config_hash = config::config_hash(*p.config);
    p.run.output_dir = p.config->output.dir;
    if (!force) {
        if (auto reason = record::current_result(*p.config, p.run.config_hash)) {
            p.run.outcome = SweepOutcome::Skipped;
            p.run.error = *reason;
        }
    }
    return p;
}

// How long a run waits for another process (another sweep) to finish its output directory.
constexpr auto kWaitForDirectory = std::chrono::minutes(30);

void run_one(Planned& p, ModelCache& models, bool force) {
    const auto start = Clock::now();
    // A stale result is replaced; with the directory locked, a result another sweep made
    // meanwhile is found and counted by that sweep, not this one.
    RunOptions options;
    options.overwrite = true;
    options.skip_if_current = !force;
    for (;;) {
        try {
            auto [model, shared] = models.get(*p.config);
            p.run.model_shared = shared;
            p.run.load_ms = shared ? 0.0 : model->load_ms;
            if (p.config->attribute) {  // an attribution run (docs/attribution.md): no run.json, the manifest
                if (!p.config->experiments.empty())
                    throw Error("[attribute] runs the gradient model alone: no experiment (the defaults file's: [hooks] "
                                "defaults = false)");
                attribution::ConfiguredOptions attribute;
                attribute.overwrite = options.overwrite;
                attribute.run_id = make_run_id();
                const attribution::ConfiguredAttribution r =
                    attribution::run_configured_attribution(*model, *p.config, attribute);
                p.run.run_id = r.run_id;
                p.run.prompt_tokens = r.prompt_tokens;
                p.run.prefill_ms = r.forward_ms;
            } else if (p.config->dataset.path) {  // a dataset run (or a shard of one): no run.json, the manifest
                extract::DatasetRunOptions dataset;
                dataset.overwrite = options.overwrite;
                dataset.skip_if_current = options.skip_if_current;
                const extract::DatasetResult r =
                    execute_dataset_run(*model, *p.config, dataset, supervision_for(*p.config));
                p.run.prompt_tokens = r.tokens;
                p.run.prefill_ms = r.seconds * 1000.0;
            } else {
                const RunOutcome outcome = execute_run(*p.config, *model, options, supervision_for(*p.config, options));
                p.run.run_id = outcome.run_id;
                p.run.prompt_tokens = outcome.prompt_tokens.size();
                p.run.generated_tokens = outcome.result.tokens.size();
                p.run.prefill_ms = outcome.result.timings.prefill_ms;
                p.run.decode_ms = outcome.result.timings.decode_ms;
            }
            p.run.outcome = SweepOutcome::Ok;
            p.run.error.clear();
        } catch (const record::RunNotNeeded& e) {
            p.run.outcome = SweepOutcome::Skipped;
            p.run.error = e.what();
        } catch (const DirectoryInUse& e) {  // another process (another sweep) is making it
            if (Clock::now() - start < kWaitForDirectory) {
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
                continue;
            }
            p.run.outcome = SweepOutcome::Failed;
            p.run.error = e.what();
        } catch (const std::exception& e) {
            p.run.outcome = SweepOutcome::Failed;
            p.run.error = e.what();
        }
        break;
    }
    p.run.total_ms = ms_since(start);
}

std::string csv_field(const std::string& text) {
    if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
    std::string out = "\"";
    for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

// What a planned run's output directory holds: its run.json's numbers (a dataset run's
// manifest's token count) when the result verifies (plan marked it skipped), otherwise why
// there is no result.
void read_dataset_result(Planned& p) {
    const fs::path dir = p.config->output.dir;
    const fs::path manifest = dir / record::kManifestName;
    if (p.run.outcome != SweepOutcome::Skipped) {
        p.run.outcome = SweepOutcome::Failed;
        p.run.error = fs::exists(manifest)
                          ? fmt::format("the result in {} does not verify or is another config's (ember verify says why)", dir.string())
                          : fmt::format("no result in {} (not run, or interrupted: running it again resumes it)", dir.string());
        return;
    }
    try {
        const json::value m = json::parse(read_file(manifest, "manifest.json"));
        if (p.config->attribute) {  // as the run reported it (a local sweep's row)
            const attribution::AttributionSummary s = attribution::summary_from_manifest(m.as_object());
            p.run.run_id = s.run_id;
            p.run.prompt_tokens = s.prompt_tokens;
        } else {
            p.run.prompt_tokens = m.at("dataset").at("tokens").to_number<std::size_t>();
        }
    } catch (const std::exception& e) {
        p.run.outcome = SweepOutcome::Failed;
        p.run.error = fmt::format("{}: {}", manifest.string(), e.what());
        return;
    }
    p.run.outcome = SweepOutcome::Ok;
    p.run.error.clear();
}

void read_result(Planned& p) {
    if (p.config->dataset.path || p.config->attribute) return read_dataset_result(p);
    const fs::path dir = p.config->output.dir;
    const fs::path report_file = dir / "run.json";
    std::optional<json::object> report;
    try {
        if (fs::exists(report_file)) report = json::parse(read_file(report_file, "run.json")).as_object();
    } catch (const std::exception& e) {
        p.run.outcome = SweepOutcome::Failed;
        p.run.error = fmt::format("{}: {}", report_file.string(), e.what());
        return;
    }
    if (p.run.outcome != SweepOutcome::Skipped) {
        p.run.outcome = SweepOutcome::Failed;
        // A failed, crashed or timed-out run records why.
        if (report && report->at("outcome") != "ok" && report->at("error").is_string())
            p.run.error = json::value_to<std::string>(report->at("error"));
        else if (report) p.run.error = fmt::format("the result in {} does not verify (ember verify says why)", dir.string());
        else p.run.error = fmt::format("no result in {} (not run, or interrupted)", dir.string());
        return;
    }
    const auto number = [&](const char* key) {
        const json::value* v = report->at("timings").as_object().if_contains(key);
        return v && v->is_number() ? v->to_number<double>() : 0.0;
    };
    p.run.outcome = SweepOutcome::Ok;
    p.run.error.clear();
    p.run.run_id = json::value_to<std::string>(report->at("run_id"));
    p.run.prompt_tokens = report->at("prompt").at("tokens").as_array().size();
    p.run.generated_tokens = report->at("generated").at("tokens").as_array().size();
    p.run.load_ms = number("load_ms");
    p.run.prefill_ms = number("prefill_ms");
    p.run.decode_ms = number("decode_ms");
    p.run.total_ms = number("total_ms");
}

// Every grid key of the runs, in order of first appearance.
std::vector<std::string> grid_columns(const std::vector<SweepRun>& runs) {
    std::vector<std::string> keys;
    for (const SweepRun& r : runs)
        for (const config::GridValue& v : r.grid)
            if (std::find(keys.begin(), keys.end(), v.key) == keys.end()) keys.push_back(v.key);
    return keys;
}

const json::value* grid_value(const SweepRun& run, const std::string& key) {
    for (const config::GridValue& v : run.grid)
        if (v.key == key) return &v.value;
    return nullptr;
}

}  // namespace

std::vector<SweepRun> collect_sweep(const std::vector<SweepInput>& inputs) {
    const std::optional<fs::path> defaults = config::find_defaults_file();
    std::vector<SweepRun> out;
    for (const SweepInput& input : inputs) {
        Planned p = plan(input, defaults, false);
        if (p.config) read_result(p);
        out.push_back(std::move(p.run));
    }
    return out;
}

std::string_view sweep_outcome_name(SweepOutcome outcome) {
    switch (outcome) {
        case SweepOutcome::Ok: return "ok";
        case SweepOutcome::Failed: return "failed";
        case SweepOutcome::Skipped: return "skipped";
    }
    return "failed";
}

std::vector<SweepInput> expand_configs(const std::vector<std::string>& arguments) {
    std::vector<fs::path> files;
    for (const std::string& argument : arguments) {
        const fs::path path(argument);
        std::error_code ec;
        if (fs::is_directory(path, ec)) {
            std::vector<fs::path> found;
            for (const auto& entry : fs::directory_iterator(path))
                if (entry.path().extension() == ".toml" && !entry.is_directory()) found.push_back(entry.path());
            if (found.empty()) throw UsageError(fmt::format("ember sweep: {} holds no *.toml run config", argument));
            std::sort(found.begin(), found.end());
            files.insert(files.end(), found.begin(), found.end());
        } else if (fs::exists(path, ec)) {
            files.push_back(path);
        } else {
            throw UsageError(fmt::format("ember sweep: {}: no such file or directory", argument));
        }
    }
    std::vector<SweepInput> out;
    config::LoadOptions load;
    load.defaults_file = config::find_defaults_file();
    // A dataset run with [dataset] shards = N becomes its N shard runs.
    const auto add = [&](SweepInput input) {
        std::optional<config::RunConfig> c = input.expanded;
        if (!c) {
            try {
                c = config::load_run_config(input.config, load);
            } catch (const std::exception&) {
                // The run reports it.
            }
        }
        if (c && c->dataset.path && !c->attribute) c->output.extract = true;  // as `ember extract CONFIG` runs it
        if (!c || !c->dataset.path || c->dataset.shards <= 1 || c->dataset.shard) {
            out.push_back(std::move(input));
            return;
        }
        for (std::size_t k = 0; k < c->dataset.shards; ++k) {
            const Shard shard{k, c->dataset.shards};
            const std::string name = fmt::format("{}shard-{}-of-{}", input.name.empty() ? "" : input.name + ",", k, shard.count);
            out.push_back({input.config, name, input.grid, dataset_shard_config(*c, shard), c});
        }
    };
    for (const fs::path& file : files) {
        if (!config::is_grid_file(file)) {
            add({file, {}, {}, std::nullopt, std::nullopt});
            continue;
        }
        for (config::GridRun& run : config::expand_grid(file, load).runs)
            add({file, std::move(run.name), std::move(run.values), std::move(run.config), std::nullopt});
    }
    return out;
}

std::vector<DatasetMerge> dataset_merges(const std::vector<SweepInput>& inputs) {
    std::vector<DatasetMerge> out;
    for (const SweepInput& input : inputs) {
        if (!input.unsharded) continue;
        if (out.empty() || out.back().unsharded.output.dir != input.unsharded->output.dir)
            out.push_back({{}, *input.unsharded});
        out.back().shards.push_back(input.expanded->output.dir);
    }
    return out;
}

std::size_t merge_sweep_datasets(const std::vector<SweepInput>& inputs, const std::vector<SweepRun>& runs) {
    std::map<fs::path, const SweepRun*> by_dir;
    for (const SweepRun& r : runs) by_dir[r.output_dir] = &r;
    std::size_t failed = 0;
    for (const DatasetMerge& m : dataset_merges(inputs)) {
        const fs::path& out = m.unsharded.output.dir;
        const auto not_done = std::find_if(m.shards.begin(), m.shards.end(), [&](const fs::path& shard) {
            const auto it = by_dir.find(shard);
            return it == by_dir.end() || it->second->outcome == SweepOutcome::Failed;
        });
        if (not_done != m.shards.end()) {
            fmt::print(stderr, "ember sweep: {} not merged: its shard {} did not finish\n", out.string(), not_done->string());
            ++failed;
            continue;
        }
        if (record::current_result(m.unsharded, config::config_hash(m.unsharded))) {
            fmt::print(stderr, "ember sweep: {} holds the merged shards already\n", out.string());
            continue;
        }
        try {
            const extract::MergeResult r = extract::merge_dataset_shards(m.shards, out, {.overwrite = true});
            fmt::print(stderr, "ember sweep: merged {} shards ({} samples, {} rows) into {}\n", r.shards, r.samples, r.rows,
                       out.string());
        } catch (const std::exception& e) {
            fmt::print(stderr, "ember sweep: {} not merged: {}\n", out.string(), e.what());
            ++failed;
        }
    }
    return failed;
}

std::vector<SweepRun> execute_sweep(const std::vector<SweepInput>& inputs, const SweepOptions& options) {
    const std::optional<fs::path> defaults = config::find_defaults_file();
    std::vector<Planned> planned;
    for (const SweepInput& input : inputs) planned.push_back(plan(input, defaults, options.force));

    // Two runs must not write one directory.
    std::map<fs::path, fs::path> owner;
    for (Planned& p : planned) {
        if (!p.config) continue;
        const auto [it, fresh] = owner.emplace(p.config->output.dir, p.run.config);
        if (!fresh) {
            p.run.outcome = SweepOutcome::Failed;
            p.run.error = fmt::format("output.dir {} is also the output directory of {}", p.config->output.dir.string(),
                                      it->second.string());
            p.config.reset();
        }
    }

    // A plugin that does not declare EMBER_PLUGIN_FLAG_CONCURRENT never has two instances
    // at once: the runs using it take its lock (all of a run's locks in path order).
    std::map<fs::path, std::mutex> serial;
    std::vector<std::vector<std::mutex*>> locks(planned.size());
    for (std::size_t i = 0; i < planned.size(); ++i) {
        if (!planned[i].config) continue;
        std::map<fs::path, std::mutex*> own;
        for (const auto& e : planned[i].config->experiments) {
            try {
                if (!experiments::PluginLibrary::load(e.plugin)->concurrent()) own[e.plugin] = &serial[e.plugin];
            } catch (const Error&) {
                // The run reports it when it loads its plugins.
            }
        }
        for (const auto& [path, mutex] : own) locks[i].push_back(mutex);
    }

    ModelCache models;
    std::mutex report;
    std::atomic<std::size_t> next{0};
    std::size_t done = 0;
    const auto worker = [&] {
        for (std::size_t i = next++; i < planned.size(); i = next++) {
            Planned& p = planned[i];
            // Checked again when its turn comes: an earlier run of this sweep may have
            // changed one of its inputs (a patch source captured again).
            if (p.config && p.run.outcome == SweepOutcome::Skipped && !record::current_result(*p.config, p.run.config_hash)) {
                p.run.outcome = SweepOutcome::Failed;
                p.run.error.clear();
            }
            const bool runnable = p.config && p.run.outcome != SweepOutcome::Skipped;
            if (runnable) {
                if (options.on_run_start) {
                    const std::lock_guard lock(report);
                    options.on_run_start(p.run);
                }
                std::vector<std::unique_lock<std::mutex>> held;
                for (std::mutex* m : locks[i]) held.emplace_back(*m);
                run_one(p, models, options.force);
            }
            const std::lock_guard lock(report);
            ++done;
            if (options.on_run_done) options.on_run_done(p.run, done, planned.size());
        }
    };
    const std::size_t jobs = std::clamp<std::size_t>(options.jobs, 1, std::max<std::size_t>(planned.size(), 1));
    std::vector<std::thread> threads;
    for (std::size_t j = 1; j < jobs; ++j) threads.emplace_back(worker);
    worker();
    for (auto& t : threads) t.join();

    std::vector<SweepRun> out;
    for (Planned& p : planned) out.push_back(std::move(p.run));
    return out;
}

json::array sweep_summary_json(const std::vector<SweepRun>& runs) {
    const std::vector<std::string> columns = grid_columns(runs);
    json::array out;
    for (const SweepRun& r : runs) {
        json::object row{{"config", r.config.string()}};  // the grid columns right after config
        if (!columns.empty()) row["name"] = r.name;
        for (const std::string& key : columns) {
            const json::value* v = grid_value(r, key);
            row[key] = v ? *v : json::value(nullptr);
        }
        json::object rest{{"outcome", sweep_outcome_name(r.outcome)},
                          {"error", r.error.empty() ? json::value(nullptr) : json::value(r.error)},
                          {"run_id", r.run_id.empty() ? json::value(nullptr) : json::value(r.run_id)},
                          {"config_hash", r.config_hash},
                          {"output_dir", r.output_dir.string()},
                          {"prompt_tokens", r.prompt_tokens},
                          {"generated_tokens", r.generated_tokens},
                          {"model_shared", r.model_shared},
                          {"load_ms", r.load_ms},
                          {"prefill_ms", r.prefill_ms},
                          {"decode_ms", r.decode_ms},
                          {"total_ms", r.total_ms}};
        for (auto& kv : rest) row[kv.key()] = std::move(kv.value());
        out.push_back(std::move(row));
    }
    return out;
}

std::string sweep_summary_csv(const std::vector<SweepRun>& runs) {
    const std::vector<std::string> columns = grid_columns(runs);
    std::string grid_header;
    if (!columns.empty()) grid_header = "name,";
    for (const std::string& key : columns) grid_header += csv_field(key) + ",";
    std::string out = "config," + grid_header +
                      "outcome,error,run_id,config_hash,output_dir,prompt_tokens,generated_tokens,model_shared,load_ms,"
                      "prefill_ms,decode_ms,total_ms\n";
    for (const SweepRun& r : runs) {
        std::string grid;
        if (!columns.empty()) grid = csv_field(r.name) + ",";
        for (const std::string& key : columns) {
            const json::value* v = grid_value(r, key);
            grid += (!v ? std::string() : v->is_string() ? csv_field(std::string(v->get_string()))
                                                          : csv_field(config::canonical_json(*v))) + ",";
        }
        out += fmt::format("{},{}{},{},{},{},{},{},{},{},{:.3f},{:.3f},{:.3f},{:.3f}\n", csv_field(r.config.string()), grid,
                           sweep_outcome_name(r.outcome), csv_field(r.error), r.run_id, r.config_hash,
                           csv_field(r.output_dir.string()), r.prompt_tokens, r.generated_tokens,
                           r.model_shared ? "true" : "false", r.load_ms, r.prefill_ms, r.decode_ms, r.total_ms);
    }
    return out;
}

}  // namespace ember::app
