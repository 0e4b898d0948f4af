#include "extract/dataset_extraction.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <boost/json.hpp>

#include <chrono>
#include <fstream>
#include <iterator>
#include <tuple>
#include <utility>

#include "common/error.hpp"
#include "common/sha256_file.hpp"
#include "experiments/experiment_runner.hpp"
#include "extract/dataset.hpp"
#include "extract/dataset_evaluation.hpp"
#include "extract/dataset_merge.hpp"
#include "extract/dataset_outputs.hpp"
#include "extract/dataset_records.hpp"
#include "record/inputs_record.hpp"
#include "extract/sae_extraction.hpp"
#include "extract/target_scoring.hpp"
#include "runtime/prompt.hpp"
#include "runtime/threads.hpp"

namespace ember::extract {
namespace {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

// The chat template a dataset's conversations are rendered with, parsed at the first line
// that has one (a dataset of texts never reads it).
class ChatTemplateCache {
public:
    ChatTemplateCache(const LoadedModel& model, const config::PromptSection& prompt) : model_(model), prompt_(prompt) {}
    const chat::LoadedTemplate& get() {
        if (!template_) template_ = runtime::load_run_template(model_, prompt_);
        return *template_;
    }

private:
    const LoadedModel& model_;
    const config::PromptSection& prompt_;  // the template (file or name); prompt.chat: the dataset's defaults
    std::optional<chat::LoadedTemplate> template_;
};

// What every sample is prepared against: the request, the default spec, the context.
struct Request {
    const LoadedModel& model;
    config::OutputSection output;  // stages, layers, logits, lens; positions come from the spec
    selection::Spec default_spec;
    config::AddBos add_bos;
    bool special;  // dataset.special: special-token texts in text and target parsed
    bool skip_empty;
    std::size_t context_length;  // the session's: no sample may be longer
    // Every sample evaluated whole: experiments see each sample's whole prompt (the hook
    // contract), attention patterns are as wide as the sample, logits and targets read
    // its last rows. Otherwise a sample's rows after its last selected one are not
    // evaluated: in a causal model no earlier row depends on them, and every row's
    // arithmetic is the same at any length, so the selected rows keep their bits.
    bool evaluate_whole;
    std::vector<hooks::HookSite> sae_sites;  // the [[sae]] sites: Selection::sae_sites of every sample
    ChatTemplateCache* chat_template;
    const json::object* chat_defaults;  // a conversation's variables unless its line sets them
};

// A conversation's sample: rendered (the dataset's defaults under the line's own
// variables), prompt and target tokenized as one text; sample.text becomes the rendering.
runtime::EncodedPrompt encode_chat_sample(const Request& r, Sample& sample) {
    json::object vars = r.chat_defaults ? *r.chat_defaults : json::object{};
    for (const auto& [key, value] : *sample.chat) vars[key] = value;
    runtime::EncodedPrompt p = runtime::encode_chat_prompt(r.model, r.chat_template->get(), std::move(vars), sample.target.value_or(""));
    sample.text = std::string(p.chat->at("rendered").as_string());
    return p;
}

Prepared prepare(const Request& r, Sample sample, const std::filesystem::path& file) {
    Prepared p;
    const std::string name = sample_name(sample, file);
    // A conversation is rendered (its target appended to the rendering), a text is the
    // text and its target; either is tokenized as one text and split at the prompt's end.
    runtime::EncodedPrompt evaluated;
    if (sample.chat) {
        try {
            evaluated = encode_chat_sample(r, sample);
        } catch (const Error& e) {
            throw Error(fmt::format("{}: {}", name, e.what()));
        }
    } else {
        evaluated = runtime::encode_prompt(r.model.tokenizer, sample.text + sample.target.value_or(""), r.add_bos, r.special);
    }
    if (sample.target) {
        TargetTokens t = split_target(std::move(evaluated), sample.text.size(), *sample.target, name);
        p.evaluated = std::move(t.evaluated);
        p.prompt_tokens = t.prompt_tokens;
    } else {
        p.evaluated = std::move(evaluated);
        p.prompt_tokens = p.evaluated.tokens.size();
    }
    if (p.prompt_tokens == 0) throw Error(fmt::format("{}: the prompt has no tokens", name));
    if (p.evaluated.ids.size() > r.context_length)
        throw Error(fmt::format("{}: {} tokens do not fit in the context of {} tokens (--ctx)", name,
                                p.evaluated.ids.size(), r.context_length));
    const std::span<const tokenizer::Token> prompt_tokens(p.evaluated.tokens.data(), p.prompt_tokens);
    const selection::Spec spec = sample.select.value_or(r.default_spec);
    std::optional<selection::Conversation> conversation = p.evaluated.conversation;  // over the prompt's tokens
    if (conversation) conversation->token_messages.resize(p.prompt_tokens);
    try {
        p.selection = resolve(r.output, r.model.model->config(), sample.text, prompt_tokens, &spec,
                              conversation ? &*conversation : nullptr);
    } catch (const Error& e) {
        if (!r.skip_empty || std::string_view(e.what()).find("selects nothing") == std::string_view::npos)
            throw Error(fmt::format("{}: {}", name, e.what()));
        p.skipped = e.what();
        p.selection.reset();
    }
    if (p.selection) p.selection->sae_sites = r.sae_sites;
    if (!p.selection) p.evaluated_rows = 0;  // skipped
    else if (r.evaluate_whole || sample.target || p.selection->positions.empty()) p.evaluated_rows = p.evaluated.ids.size();
    else p.evaluated_rows = p.selection->positions.back() + 1;
    p.sample = std::move(sample);
    return p;
}

// The arrays every sample's rows go into, from the stages and layers asked for.
// attention_pattern's width is each sample's own length: its rows are padded with zeros
// to `longest`, the dataset's longest evaluation.
std::vector<ArrayPlan> plan_arrays(const Selection& s, const models::ModelConfig& c, std::size_t longest) {
    std::vector<ArrayPlan> out;
    for (hooks::Stage stage : kStages) {
        if (!s.has(stage)) continue;
        if (stage == hooks::Stage::AttentionPattern) {
            for (std::uint32_t l : s.layers)
                out.push_back({fmt::format("{}.layer{}.npy", hooks::stage_name(stage), l), ArrayPlan::Source::Stage, stage,
                               l, "<f4", longest, c.layers[l].n_head});
            continue;
        }
        if (!is_layer_stage(stage)) {
            const std::size_t cols = stage == hooks::Stage::AfterLogits ? c.n_vocab : c.n_embd;
            out.push_back({fmt::format("{}.npy", hooks::stage_name(stage)), ArrayPlan::Source::Stage, stage, std::nullopt,
                           "<f4", cols, 1});
            continue;
        }
        for (std::uint32_t l : s.layers) {
            const models::LayerConfig& L = c.layers[l];
            const std::size_t cols = stage == hooks::Stage::HeadOutputs     ? std::size_t{L.n_head} * L.head_dim
                                     : stage == hooks::Stage::MlpActivation ? std::size_t{L.n_ff}
                                                                            : std::size_t{c.n_embd};
            out.push_back({fmt::format("{}.layer{}.npy", hooks::stage_name(stage), l), ArrayPlan::Source::Stage, stage, l,
                           "<f4", cols, 1});
        }
    }
    if (s.logits != config::LogitsDump::None)
        out.push_back({"logits.npy", ArrayPlan::Source::Logits, hooks::Stage::AfterLogits, std::nullopt, "<f4", c.n_vocab, 1});
    if (s.lens_top_k > 0) {
        for (std::uint32_t l : s.layers) {
            out.push_back({fmt::format("logit_lens.layer{}.ids.npy", l), ArrayPlan::Source::LensIds,
                           hooks::Stage::AfterLayer, l, "<i4", s.lens_top_k, 1});
            out.push_back({fmt::format("logit_lens.layer{}.logits.npy", l), ArrayPlan::Source::LensLogits,
                           hooks::Stage::AfterLayer, l, "<f4", s.lens_top_k, 1});
        }
    }
    return out;
}

// `done` and `total` count this run's samples and tokens (a shard's own).
void draw_progress(const RunPoint& done, const RunPoint& total, std::size_t tokens_at_start, double seconds) {
    const double rate = seconds > 0 ? static_cast<double>(done.tokens - tokens_at_start) / seconds : 0;
    const double eta = rate > 0 ? static_cast<double>(total.tokens - done.tokens) / rate : 0;
    fmt::print(stderr, "\r\x1b[Kember: {}/{} samples, {:.0f} tok/s, ETA {:.0f} s", done.samples, total.samples, rate, eta);
}

// One batch of the whole run: its first sample and what it holds.
struct BatchPlan {
    std::size_t first_sample = 0;
    RunPoint count;
};

json::object dataset_manifest_arrays(DatasetOutputs& out, const Selection& s, const std::vector<features::Sae>& saes,
                                     config::SaeOutput sae_layout, json::object& manifest) {
    json::array tensors;
    json::array sae_entries;
    json::array lens_layers;
    for (std::size_t i = 0; i < out.plans().size(); ++i) {
        const ArrayPlan& plan = out.plans()[i];
        const record::NpyAppender& a = out.array(i);
        const json::value shape = json::value_from(a.shape());
        switch (plan.source) {
            case ArrayPlan::Source::Stage:
                if (plan.stage == hooks::Stage::AttentionPattern) {
                    tensors.push_back({{"file", plan.name},
                                       {"stage", hooks::stage_name(plan.stage)},
                                       {"layer", *plan.layer},
                                       {"phase", "prefill"},
                                       {"shape", shape},
                                       {"dtype", "float32"},
                                       {"layout", "[rows, n_head, n_kv]"},
                                       {"rows", "one per line of rows.jsonl: [r, h] is head h of row r"},
                                       {"columns", "KV positions 0 .. n_kv - 1 of the row's own sample (n_kv: its "
                                                   "evaluated tokens, a target's included), then zeros up to the "
                                                   "longest sample's"}});
                    break;
                }
                tensors.push_back({{"file", plan.name},
                                   {"stage", hooks::stage_name(plan.stage)},
                                   {"layer", plan.layer ? json::value(*plan.layer) : json::value(nullptr)},
                                   {"phase", "prefill"},
                                   {"shape", shape},
                                   {"dtype", "float32"},
                                   {"rows", "rows.jsonl, one line per row"}});
                break;
            case ArrayPlan::Source::Logits:
                manifest["logits"] = {{"file", plan.name}, {"stage", "logits"}, {"shape", shape}, {"dtype", "float32"}};
                break;
            case ArrayPlan::Source::LensIds:
                lens_layers.push_back({{"layer", *plan.layer},
                                       {"ids_file", plan.name},
                                       {"logits_file", out.plans()[i + 1].name},
                                       {"shape", shape}});
                break;
            case ArrayPlan::Source::LensLogits: break;
            case ArrayPlan::Source::SaeDense:
            case ArrayPlan::Source::SaeIndptr: {
                const bool dense = plan.source == ArrayPlan::Source::SaeDense;
                const std::size_t rows = dense ? a.rows() : a.rows() - 1;  // indptr: R + 1 entries
                const std::size_t nnz = dense ? 0 : out.array(i + 1).rows();
                sae_entries.push_back(sae_manifest_entry(plan.sae, saes[plan.sae], sae_layout, rows, nnz,
                                                         "rows.jsonl, one line per row"));
                break;
            }
            case ArrayPlan::Source::SaeIndices:
            case ArrayPlan::Source::SaeValues: break;
        }
    }
    if (!saes.empty()) manifest["sae_features"] = std::move(sae_entries);
    manifest["tensors"] = std::move(tensors);
    if (s.lens_top_k > 0) {
        manifest["logit_lens"] = {{"top_k", s.lens_top_k},
                                  {"source", "after_layer rows through the final norm and the LM head"},
                                  {"order", "best first; equal logits by lower id; NaN last"},
                                  {"pieces", "rows.jsonl: logit_lens_pieces"},
                                  {"layers", std::move(lens_layers)}};
    }
    if (record::NpyAppender* t = out.targets_npy()) {
        manifest["targets"] = {{"file", "targets.npy"},
                               {"shape", json::array{t->rows()}},
                               {"dtype", "float64"},
                               {"values", "per sample: the summed log-probability of its target (NaN: no target)"},
                               {"tokens", "targets.jsonl"}};
    }
    return manifest;
}

}  // namespace

bool holds_dataset_failure_record(const std::filesystem::path& dir) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(dir / "run.json", ec)) return false;
    try {
        std::ifstream in(dir / "run.json", std::ios::binary);
        const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const json::value record = json::parse(text);
        const json::value* kind = record.is_object() ? record.as_object().if_contains("kind") : nullptr;
        return kind && kind->is_string() && kind->as_string() == kDatasetFailureKind;
    } catch (const std::exception&) {
        return false;
    }
}

bool dataset_run_resumable(const std::filesystem::path& dir) {
    namespace fs = std::filesystem;
    if (fs::exists(dir / record::kManifestName)) return false;
    return fs::exists(dir / kProgressName) || fs::exists(dir / "samples.jsonl") || holds_dataset_failure_record(dir);
}

namespace {

// The run's settings, checked against what a dataset run can do and derived from its
// config: the route, threads, batch size, context, the shape of its arrays.
struct DatasetSettings {
    std::filesystem::path file;
    runtime::Route route{};
    std::size_t threads = 0;
    std::size_t batch_tokens = 0;
    std::size_t context_length = 0;
    std::size_t pack_tokens = 0;  // a batch's tokens at most: batch_tokens within the context
    config::OutputSection output;  // stages, layers, logits, lens; positions come from the spec
    Selection shape;               // the output resolved for one position: which arrays
    bool evaluate_whole = false;   // see Request
};

DatasetSettings checked_settings(const LoadedModel& model, const config::RunConfig& config,
                                 const DatasetRunOptions& options) {
    if (!config.dataset.path) throw Error("the run has no dataset (dataset.path)");
    DatasetSettings s;
    s.file = *config.dataset.path;
    const auto route = runtime::route_from_name(config.model.route);
    if (!route) throw Error(fmt::format("model.route '{}' is not one of reference, fast", config.model.route));
    s.route = *route;
    if (config.tracing.enabled) throw Error("a dataset run has no trace journal yet: leave tracing off");
    if (config.output.logits == config::LogitsDump::Last || config.output.logits == config::LogitsDump::All)
        throw Error("a dataset run writes the logits of the selected rows: output.logits must be none or selected");
    s.threads = runtime::effective_threads(config.model.threads);
    s.batch_tokens = config.dataset.batch_tokens ? config.dataset.batch_tokens : config::kDefaultBatchTokens;
    s.context_length = config.model.ctx ? config.model.ctx : runtime::default_context_length(model.model->config());
    s.pack_tokens = std::min(s.batch_tokens, s.context_length);
    s.output = config.output;
    s.output.positions = {config::PositionSelection::Kind::All, {}, {}};
    s.shape = resolve(s.output, model.model->config(), 1);
    s.evaluate_whole = config.dataset.evaluate_whole || options.experiments ||
                       s.shape.has(hooks::Stage::AttentionPattern) || s.shape.has(hooks::Stage::BeforeLogits) ||
                       s.shape.has(hooks::Stage::AfterLogits) || s.shape.logits != config::LogitsDump::None;
    return s;
}

// The whole run's batches: every line read, tokenized and resolved before anything is
// written, consecutive samples of at most pack_tokens tokens in all (a longer sample
// alone), as run_batches evaluates them.
struct BatchPlans {
    std::vector<BatchPlan> batches;
    std::size_t longest = 0;  // the longest evaluation (prompt and target)
    bool any_target = false;
};

BatchPlans plan_batches(const Request& request, const DatasetSettings& settings) {
    BatchPlans plans;
    DatasetReader reader(settings.file);
    Sample s;
    std::size_t fill = 0;
    while (reader.next(s)) {
        plans.any_target |= s.target.has_value();
        const Prepared p = prepare(request, std::move(s), settings.file);
        plans.longest = std::max(plans.longest, p.evaluated.ids.size());
        const std::size_t n = p.evaluated_rows;
        if (plans.batches.empty() || fill + n > settings.pack_tokens) {
            plans.batches.push_back({p.sample.index, {}});
            fill = 0;
        }
        fill += n;
        RunPoint& counted = plans.batches.back().count;
        counted.samples += 1;
        counted.rows += p.selection ? p.selection->positions.size() : 0;
        counted.tokens += p.evaluated.ids.size();
        counted.evaluated += p.evaluated_rows;
        counted.skipped += p.selection ? 0 : 1;
    }
    return plans;
}

// This run's batches: all of them, or a shard's contiguous range of the whole run's
// (config/shard.hpp over the batch count), so it evaluates exactly what the unsharded run
// evaluates and its rows are the same bits on any route.
struct ShardSpan {
    std::size_t first_batch = 0, end_batch = 0;
    std::size_t begin = 0, end = 0;  // this run's samples
    RunPoint first;  // where this run's samples start: the samples, rows and tokens before them
    RunPoint total;  // this run's own samples and tokens
};

ShardSpan shard_span(const std::vector<BatchPlan>& batches, const config::RunConfig& config, std::size_t samples) {
    ShardSpan span;
    std::tie(span.first_batch, span.end_batch) = config.dataset.shard
                                                     ? config::shard_range(batches.size(), *config.dataset.shard)
                                                     : std::pair<std::size_t, std::size_t>{0, batches.size()};
    const auto batch_start = [&](std::size_t b) { return b < batches.size() ? batches[b].first_sample : samples; };
    span.begin = batch_start(span.first_batch);
    span.end = batch_start(span.end_batch);
    for (std::size_t b = 0; b < span.end_batch; ++b) (b < span.first_batch ? span.first : span.total) += batches[b].count;
    return span;
}

// One run per directory: an unfinished dataset run (progress.json) is continued in
// place; a finished or other run is refused, or replaced with [output] overwrite.
record::RunDirectoryOptions dataset_directory_options(const config::RunConfig& config, const DatasetRunOptions& options) {
    record::RunDirectoryOptions o;
    o.overwrite = config.output.overwrite || options.overwrite;
    if (options.skip_if_current)
        o.not_needed = [&config](const std::filesystem::path&) { return record::current_result(config, config::config_hash(config)); };
    o.holder = "ember extract --dataset";
    o.inputs = record::input_paths(config);
    o.resumable = dataset_run_resumable;
    return o;
}

// What a resumed run must match: the config, the dataset and every SAE file (a changed
// SAE file starts the run over, like a changed config).
std::string dataset_run_key(const config::RunConfig& config, const DatasetInfo& info, const std::vector<record::InputFile>& inputs) {
    std::string sae_digests;
    for (const record::InputFile& input : inputs)
        if (input.role == "sae") sae_digests += input.sha256;
    return sha256_hex(config::canonical_json(config) + info.sha256 + sae_digests);
}

runtime::SessionOptions dataset_session_options(const LoadedModel& model, const config::RunConfig& config,
                                                const DatasetSettings& s, const BatchPlans& plans) {
    runtime::SessionOptions o;
    o.route = s.route;
    if (const auto kv_type = kernels::kv_type_from_name(config.model.kv_type)) o.kv_type = *kv_type;
    o.context_length = config.model.ctx;
    if (config.model.ctx == 0) {
        // The cache holds one evaluation at a time (a reset between them): sized to the
        // largest, in llama.cpp's steps of 256 positions (the attention's padded length, and
        // so its sums, are those of any longer context), not to the model's whole context.
        const std::size_t needed = (std::max<std::size_t>(s.pack_tokens, plans.longest) + 255) / 256 * 256;
        o.context_length = std::min(needed, runtime::default_context_length(model.model->config()));
    }
    o.threads = s.threads;
    o.max_batch = std::max<std::size_t>(plans.longest, s.batch_tokens);
    o.all_logits = s.shape.needs_all_logits() || plans.any_target;
    return o;
}

// The samples of this run, read batch by batch from where it starts (a resumed run: past
// the samples finished earlier; a shard: past another shard's) to its end.
class BatchReader {
public:
    BatchReader(const Request& request, const DatasetSettings& settings, std::size_t skip, std::size_t end)
        : request_(request), settings_(settings), reader_(settings.file), end_(end) {
        for (std::size_t i = 0; i < skip && reader_.next(sample_); ++i) {}
    }
    // One batch: consecutive samples of at most pack_tokens tokens in all (a longer sample
    // alone); empty at the end.
    std::vector<Prepared> next() {
        std::vector<Prepared> batch;
        std::size_t tokens = 0;
        while (pending_ || next_sample()) {
            Prepared p = pending_ ? std::move(*pending_) : prepare(request_, std::move(sample_), settings_.file);
            pending_.reset();
            const std::size_t n = p.evaluated_rows;
            if (!batch.empty() && tokens + n > settings_.pack_tokens) {
                pending_ = std::move(p);
                break;
            }
            tokens += n;
            batch.push_back(std::move(p));
        }
        return batch;
    }

private:
    bool next_sample() { return reader_.next(sample_) && sample_.index < end_; }

    const Request& request_;
    const DatasetSettings& settings_;
    DatasetReader reader_;
    Sample sample_;
    std::size_t end_;
    std::optional<Prepared> pending_;  // read, but beyond the previous batch
};

// The manifest of a dataset run: the run, the dataset, the model, the backend, the
// config, the inputs (dataset_manifest_arrays adds the arrays).
json::object dataset_manifest(const LoadedModel& model, const config::RunConfig& config, const DatasetSettings& s,
                              const DatasetInfo& info, const RunPoint& own, const runtime::Session& session,
                              json::array inputs) {
    return {
        {"schema_version", record::kManifestSchemaVersion},
        {"kind", "ember.dataset_extraction"},
        {"run_id", nullptr},
        {"layout", "one .npy per (stage, layer), the selected rows of every sample stacked in dataset order: "
                   "STAGE.layerN.npy, STAGE.npy for the logits stages, logits.npy, logit_lens.layerN.ids.npy and "
                   ".logits.npy; rows.jsonl (one line per row), samples.jsonl (one line per sample), targets.jsonl "
                   "and targets.npy; manifest.json last"},
        {"dtype", "float32"},
        {"output_format", {{"format", "npy"}, {"version", "1.0"}, {"order", "C"}, {"byte_order", "little"}}},
        {"tensor_contract",
         {{"phase", "prefill"},
          {"stages", json::value_from(config.output.stages)},
          {"layers", json::value_from(s.shape.layers)},
          {"select", config.dataset.select},
          {"rows", "row r of every array is line r of rows.jsonl: its sample, position, token and byte span"},
          {"evaluation", "each sample at positions from 0, attending only to its own tokens; several samples "
                         "may share one packed evaluation (batch_tokens), which changes no value; without "
                         "experiments, attention patterns, logits or a target, a sample's rows after its last "
                         "selected one are not evaluated (samples.jsonl evaluated_tokens), which changes no "
                         "value either"}}},
        {"dataset",
         {{"path", s.file.string()},
          {"sha256", info.sha256},
          {"bytes", info.bytes},
          {"samples", own.samples},
          {"skipped", own.skipped},
          {"rows", own.rows},
          {"tokens", own.tokens},
          {"evaluated_tokens", own.evaluated}}},
        {"selection", {{"default", config.dataset.select}, {"on_empty", config.dataset.skip_empty ? "skip" : "error"}}},
        {"batch_tokens", s.batch_tokens},
        {"model", record::model_record(model.path, model.file, model.model->config(), model.sha256)},
        {"backend", {{"route", session.backend().route()}, {"variant", session.backend().variant()}}},
        {"route", session.backend().route()},
        {"threads", s.threads},
        {"config_hash", config::config_hash(config)},
        {"config", config::to_json(config)},
        {"inputs", std::move(inputs)},
        {"trace", nullptr},
    };
}

}  // namespace

// In named steps: the settings checked, the inputs hashed and the SAEs loaded, every
// sample prepared and the batches planned, the directory opened (or resumed), the session
// made, the batches evaluated and appended, the inputs checked unchanged, the manifest.
DatasetResult run_dataset_extraction(const LoadedModel& model, const config::RunConfig& config,
                                     const DatasetRunOptions& options) {
    DatasetSettings settings = checked_settings(model, config, options);
    // Hashed before they are read: a change while the run reads them fails it (check_inputs_unchanged).
    std::vector<record::InputFile> inputs = record::collect_inputs(config, model.sha256, model.file.mapping()->state());
    const std::vector<features::Sae> saes = load_extraction_saes(config, model.model->config(), inputs);
    // An SAE at before_logits needs every row's logits stages (needs_all_logits) and each
    // sample evaluated whole, as --stages before_logits does.
    settings.shape.sae_sites = sae_sites(saes);
    for (const features::Sae& sae : saes) settings.evaluate_whole |= !sae.site.layer;
    ChatTemplateCache chat_template(model, config.prompt);
    const Request request{model,
                          settings.output,
                          selection::parse(config.dataset.select),
                          config.prompt.add_bos,
                          config.dataset.special,
                          config.dataset.skip_empty,
                          settings.context_length,
                          settings.evaluate_whole,
                          sae_sites(saes),
                          &chat_template,
                          config.prompt.chat ? &*config.prompt.chat : nullptr};

    const DatasetInfo info = scan_dataset(settings.file);
    const BatchPlans plans = plan_batches(request, settings);
    const ShardSpan span = shard_span(plans.batches, config, info.samples);

    record::RunDirectoryWriter writer(config.output.dir, dataset_directory_options(config, options));
    if (holds_dataset_failure_record(writer.dir())) std::filesystem::remove(writer.dir() / "run.json");
    std::vector<ArrayPlan> array_plans = plan_arrays(settings.shape, model.model->config(), plans.longest);
    plan_sae_arrays(saes, config.output.sae_output, array_plans);
    DatasetOutputs out(writer.dir(), std::move(array_plans), plans.any_target, dataset_run_key(config, info, inputs));
    start_sae_arrays(out);

    runtime::Session session(*model.model, dataset_session_options(model, config, settings, plans));
    const SaeEncoders encoders(saes, settings.route, settings.threads);
    // A packed evaluation holds its samples' K/V side by side: it fits the context.
    if (settings.pack_tokens > session.context_length())
        throw Error("the batches were planned for a longer context than the session's");

    DatasetResult result;
    result.dir = writer.dir();
    RunPoint point = out.resumed() ? out.resumed_at() : span.first;
    const RunPoint at_start = point;
    result.resumed_samples = point.samples - span.first.samples;
    const auto start = Clock::now();
    const bool progress = options.progress && ::isatty(STDERR_FILENO);
    const BatchEvaluation evaluation{session, model, settings.route, settings.threads, options.experiments,
                                     settings.shape.has(hooks::Stage::AttentionPattern), encoders, saes.size(),
                                     settings.file};
    BatchReader reader(request, settings, point.samples, span.end);
    DatasetRecords appender(out, model.tokenizer);
    for (std::vector<Prepared> batch = reader.next(); !batch.empty(); batch = reader.next()) {
        for (const SampleRows& r : evaluate_batch(evaluation, batch)) appender.append(r, point);
        out.checkpoint(point);
        ++result.batches;
        if (progress) draw_progress(point - span.first, span.total, (at_start - span.first).tokens,
                                    std::chrono::duration<double>(Clock::now() - start).count());
        if (options.on_batch) options.on_batch(point.samples);
    }
    if (progress) fmt::print(stderr, "\n");

    // The inputs as they were read (else nothing is renamed into place), the arrays' headers
    // made true, every file renamed into place, the manifest last.
    record::check_inputs_unchanged(inputs, model.file.mapping());
    out.finish();
    const RunPoint own = point - span.first;
    json::array recorded_inputs = record::inputs_json(inputs);
    if (options.experiments) record::add_read_inputs(recorded_inputs, options.experiments->snapshot());
    json::object manifest = dataset_manifest(model, config, settings, info, own, session, std::move(recorded_inputs));
    dataset_manifest_arrays(out, settings.shape, saes, config.output.sae_output, manifest);
    if (config.dataset.shard) {  // last: ember merge takes it off
        manifest["shard"] = shard_record(*config.dataset.shard, info.samples, {span.begin, span.end}, plans.batches.size(),
                                         {span.first_batch, span.end_batch}, span.first.rows,
                                         manifest.at("config").as_object(), info.sha256, model.sha256);
    }
    writer.commit(std::move(manifest));

    result.samples = own.samples;
    result.skipped = own.skipped;
    result.rows = own.rows;
    result.tokens = own.tokens;
    result.tokens_this_run = point.tokens - at_start.tokens;
    result.evaluated = own.evaluated;
    result.evaluated_this_run = point.evaluated - at_start.evaluated;
    result.arrays = out.plans().size() + (plans.any_target ? 1 : 0);
    result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return result;
}
}  // namespace ember::extract
