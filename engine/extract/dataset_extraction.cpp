#include "extract/dataset_extraction.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <boost/json.hpp>

#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>

#include "common/error.hpp"
#include "common/sha256.hpp"
#include "experiments/experiment_runner.hpp"
#include "extract/dataset.hpp"
#include "extract/dataset_merge.hpp"
#include "extract/dataset_outputs.hpp"
#include "extract/dataset_records.hpp"
#include "extract/inputs_record.hpp"
#include "extract/logit_lens.hpp"
#include "extract/sae_extraction.hpp"
#include "extract/target_scoring.hpp"
#include "hooks/hook_chain.hpp"

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
        if (!template_) template_ = load_run_template(model_, prompt_);
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
EncodedPrompt encode_chat_sample(const Request& r, Sample& sample) {
    json::object vars = r.chat_defaults ? *r.chat_defaults : json::object{};
    for (const auto& [key, value] : *sample.chat) vars[key] = value;
    EncodedPrompt p = encode_chat_prompt(r.model, r.chat_template->get(), std::move(vars), sample.target.value_or(""));
    sample.text = std::string(p.chat->at("rendered").as_string());
    return p;
}

std::string sample_name(const Sample& s, const std::filesystem::path& file) {
    return fmt::format("{}:{}: sample {}", file.string(), s.line, s.id_text());
}

Prepared prepare(const Request& r, Sample sample, const std::filesystem::path& file) {
    Prepared p;
    const std::string name = sample_name(sample, file);
    // A conversation is rendered (its target appended to the rendering), a text is the
    // text and its target; either is tokenized as one text and split at the prompt's end.
    EncodedPrompt evaluated;
    if (sample.chat) {
        try {
            evaluated = encode_chat_sample(r, sample);
        } catch (const Error& e) {
            throw Error(fmt::format("{}: {}", name, e.what()));
        }
    } else {
        evaluated = encode_prompt(r.model.tokenizer, sample.text + sample.target.value_or(""), r.add_bos);
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

// log p(target token j | tokens before j) for every target token (target_scoring.hpp).
std::vector<double> target_logprobs(const Prepared& p, kernels::ConstRows logits) {
    return score_target(p.evaluated.ids, p.prompt_tokens, logits).logprobs;
}

// Evaluates one sample on its own (position 0, an empty cache), with the experiments'
// per-sample calls around it.
void evaluate_sample(runtime::Session& session, const LoadedModel& model, runtime::Route route, std::size_t threads,
                     experiments::ExperimentRunner* runner, SampleRows& s, const std::string& name) {
    const Prepared& p = *s.prepared;
    const Selection& sel = *p.selection;
    const bool all_logits = sel.needs_all_logits() || p.sample.target.has_value();
    s.extractor.emplace(sel);
    session.reset();
    hooks::HookChain chain{runner, &*s.extractor};
    try {
        if (runner) {
            // The prompt services show this sample's own text and tokens (a target's excluded).
            std::vector<std::uint32_t> ids(p.evaluated.ids.begin(), p.evaluated.ids.begin() + p.prompt_tokens);
            std::vector<ember_token_span> spans;
            for (std::size_t i = 0; i < p.prompt_tokens; ++i)
                spans.push_back({p.evaluated.tokens[i].start, p.evaluated.tokens[i].end});
            runner->set_prompt(p.sample.text, std::move(ids), std::move(spans));
            runner->set_sample(p.sample.index, p.sample.line, p.sample.id_text());
            hooks::EvalInfo info;
            info.phase = hooks::Phase::Prefill;
            info.n_tokens = p.evaluated_rows;
            info.all_logits = all_logits;
            runner->before_prefill(info);
        }
        const kernels::ConstRows logits = session.prefill(p.evaluated_ids(), all_logits, chain.simplest());
        if (runner) runner->on_generation_complete(0, experiments::StopReason::MaxTokens);
        s.extractor->check_complete();
        if (p.sample.target) s.target = target_logprobs(p, logits);
    } catch (const experiments::ExperimentFailure& e) {
        throw Error(fmt::format("{}: {}", name, e.what()));
    }
    if (sel.lens_top_k > 0) s.lens = logit_lens(*model.model, route, threads, s.extractor->lens_sources(), sel.lens_top_k);
}

// The hooks of a packed evaluation: every stage's rows cut into the samples' own and
// handed to each sample's Extractor as if its prefill ran alone (positions from 0).
class PackedHooks final : public hooks::ActiveHooks {
public:
    PackedHooks(std::vector<SampleRows*> samples, bool all_logits) : samples_(std::move(samples)), all_logits_(all_logits) {}

    void stage(hooks::Stage stage, const hooks::EvalInfo& e, std::uint32_t l, hooks::TensorView v) override {
        const bool logits_stage = stage == hooks::Stage::BeforeLogits || stage == hooks::Stage::AfterLogits;
        if (logits_stage && !all_logits_) return;
        split(e, v, [&](Extractor& x, const hooks::EvalInfo& i, hooks::TensorView s) { x.stage(stage, i, l, s); });
    }
    // No attention_pattern: a packed evaluation computes none (models::attend); a dataset
    // run that wants it evaluates every sample alone.
    bool wants(hooks::Stage stage) const override {
        if (stage == hooks::Stage::AttentionPattern) return false;
        for (const SampleRows* s : samples_)
            if (s->extractor->wants(stage)) return true;
        return false;
    }

private:
    template <class F>
    void split(const hooks::EvalInfo& packed, hooks::TensorView v, F&& f) {
        std::size_t row = 0;
        for (SampleRows* s : samples_) {
            const std::size_t n = s->prepared->evaluated_rows;
            hooks::EvalInfo info = packed;
            info.start_position = 0;
            info.n_tokens = n;
            f(*s->extractor, info, hooks::TensorView{v.data + row * v.cols, n, v.cols});
            row += n;
        }
    }

    std::vector<SampleRows*> samples_;
    bool all_logits_;
};

// Evaluates the samples in one packed prefill (no experiments: see docs/extraction.md).
void evaluate_packed(runtime::Session& session, const LoadedModel& model, runtime::Route route, std::size_t threads,
                     std::vector<SampleRows*> samples) {
    std::vector<std::int32_t> tokens;
    std::vector<std::size_t> lengths;
    std::unique_ptr<bool[]> sample_all_logits(new bool[samples.size()]);  // as evaluate_sample computes them
    bool all_logits = false;
    for (SampleRows* s : samples) {
        const Prepared& p = *s->prepared;
        tokens.insert(tokens.end(), p.evaluated_ids().begin(), p.evaluated_ids().end());
        lengths.push_back(p.evaluated_rows);
        const Selection& sel = *p.selection;
        // A packed evaluation computes the logits of every row or of its very last one only.
        all_logits |= sel.has(hooks::Stage::BeforeLogits) || sel.has(hooks::Stage::AfterLogits) ||
                      sel.logits != config::LogitsDump::None || p.sample.target.has_value();
        sample_all_logits[lengths.size() - 1] = sel.needs_all_logits() || p.sample.target.has_value();
        s->extractor.emplace(sel);
    }
    PackedHooks hooks(samples, all_logits);
    session.reset();
    const kernels::ConstRows logits =
        session.prefill_packed(tokens, lengths, all_logits, std::span<const bool>(sample_all_logits.get(), samples.size()), &hooks);
    std::size_t row = 0;
    for (SampleRows* s : samples) {
        const Prepared& p = *s->prepared;
        s->extractor->check_complete();
        if (p.sample.target) s->target = target_logprobs(p, logits.slice(row, p.evaluated_rows));
        row += p.evaluated_rows;
        if (p.selection->lens_top_k > 0)
            s->lens = logit_lens(*model.model, route, threads, s->extractor->lens_sources(), p.selection->lens_top_k);
    }
}

// `done` and `total` count this run's samples and tokens (a shard's own).
void draw_progress(const RunPoint& done, const RunPoint& total, std::size_t tokens_at_start, double seconds) {
    const double rate = seconds > 0 ? static_cast<double>(done.tokens - tokens_at_start) / seconds : 0;
    const double eta = rate > 0 ? static_cast<double>(total.tokens - done.tokens) / rate : 0;
    fmt::print(stderr, "\r\x1b[Kember: {}/{} samples, {:.0f} tok/s, ETA {:.0f} s", done.samples, total.samples, rate, eta);
}

RunPoint operator-(const RunPoint& a, const RunPoint& b) {
    return {a.samples - b.samples, a.rows - b.rows, a.tokens - b.tokens, a.evaluated - b.evaluated, a.skipped - b.skipped};
}

RunPoint& operator+=(RunPoint& a, const RunPoint& b) {
    a.samples += b.samples;
    a.rows += b.rows;
    a.tokens += b.tokens;
    a.evaluated += b.evaluated;
    a.skipped += b.skipped;
    return a;
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
        const NpyAppender& a = out.array(i);
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
    if (NpyAppender* t = out.targets_npy()) {
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
    if (fs::exists(dir / kManifestName)) return false;
    return fs::exists(dir / kProgressName) || fs::exists(dir / "samples.jsonl") || holds_dataset_failure_record(dir);
}

DatasetResult run_dataset_extraction(const LoadedModel& model, const config::RunConfig& config,
                                     const DatasetRunOptions& options) {
    if (!config.dataset.path) throw Error("the run has no dataset (dataset.path)");
    const std::filesystem::path& file = *config.dataset.path;
    const auto route = runtime::route_from_name(config.model.route);
    if (!route) throw Error(fmt::format("model.route '{}' is not one of reference, fast", config.model.route));
    if (config.tracing.enabled) throw Error("a dataset run has no trace journal yet: leave tracing off");
    if (config.output.logits == config::LogitsDump::Last || config.output.logits == config::LogitsDump::All)
        throw Error("a dataset run writes the logits of the selected rows: output.logits must be none or selected");
    const std::size_t threads = effective_threads(config.model.threads);
    const std::size_t batch_tokens = config.dataset.batch_tokens ? config.dataset.batch_tokens : config::kDefaultBatchTokens;

    const std::size_t context_length =
        config.model.ctx ? config.model.ctx : runtime::default_context_length(model.model->config());
    config::OutputSection output = config.output;  // stages, layers, logits, lens; positions come from the spec
    output.positions = {config::PositionSelection::Kind::All, {}, {}};
    const Selection shape = resolve(output, model.model->config(), 1);
    const bool evaluate_whole = config.dataset.evaluate_whole || options.experiments ||
                                shape.has(hooks::Stage::AttentionPattern) || shape.has(hooks::Stage::BeforeLogits) ||
                                shape.has(hooks::Stage::AfterLogits) || shape.logits != config::LogitsDump::None;
    // Hashed before they are read: a change while the run reads them fails it (check_inputs_unchanged).
    std::vector<InputFile> inputs = collect_inputs(config, model.sha256, model.file.mapping()->state());
    const std::vector<features::Sae> saes = load_extraction_saes(config, model.model->config(), inputs);
    if (!saes.empty() && config.dataset.shard)
        throw Error("a dataset shard with SAEs ([[sae]], --sae): ember merge does not join SAE feature arrays yet; run "
                    "the dataset whole");
    ChatTemplateCache chat_template(model, config.prompt);
    const Request request{model,
                          output,
                          selection::parse(config.dataset.select),
                          config.prompt.add_bos,
                          config.dataset.skip_empty,
                          context_length,
                          evaluate_whole,
                          sae_sites(saes),
                          &chat_template,
                          config.prompt.chat ? &*config.prompt.chat : nullptr};

    // Every line read, tokenized and resolved before anything is written, and the run's
    // batches planned: consecutive samples of at most pack_tokens tokens in all (a longer
    // sample alone), as the loop below evaluates them. A shard is a contiguous range of the
    // whole run's batches (config/shard.hpp over the batch count), so it evaluates exactly
    // what the unsharded run evaluates and its rows are the same bits on any route.
    const DatasetInfo info = scan_dataset(file);
    const std::size_t pack_tokens = std::min(batch_tokens, context_length);
    std::vector<BatchPlan> batches;
    std::size_t longest = 0;
    bool any_target = false;
    {
        DatasetReader reader(file);
        Sample s;
        std::size_t fill = 0;
        while (reader.next(s)) {
            any_target |= s.target.has_value();
            const Prepared p = prepare(request, std::move(s), file);
            longest = std::max(longest, p.evaluated.ids.size());
            const std::size_t n = p.evaluated_rows;
            if (batches.empty() || fill + n > pack_tokens) {
                batches.push_back({p.sample.index, {}});
                fill = 0;
            }
            fill += n;
            RunPoint& counted = batches.back().count;
            counted.samples += 1;
            counted.rows += p.selection ? p.selection->positions.size() : 0;
            counted.tokens += p.evaluated.ids.size();
            counted.evaluated += p.evaluated_rows;
            counted.skipped += p.selection ? 0 : 1;
        }
    }
    const auto [first_batch, end_batch] = config.dataset.shard ? config::shard_range(batches.size(), *config.dataset.shard)
                                                               : std::pair<std::size_t, std::size_t>{0, batches.size()};
    const auto batch_start = [&](std::size_t b) { return b < batches.size() ? batches[b].first_sample : info.samples; };
    const std::size_t begin = batch_start(first_batch), end = batch_start(end_batch);  // this run's samples
    RunPoint first;  // where this run's samples start: the samples, rows and tokens before them
    RunPoint total;  // this run's own samples and tokens
    for (std::size_t b = 0; b < end_batch; ++b) (b < first_batch ? first : total) += batches[b].count;

    // One run per directory: an unfinished dataset run (progress.json) is continued in
    // place; a finished or other run is refused, or replaced with [output] overwrite.
    RunDirectoryOptions directory_options;
    directory_options.overwrite = config.output.overwrite || options.overwrite;
    if (options.skip_if_current)
        directory_options.not_needed = [&](const std::filesystem::path&) { return current_result(config, config::config_hash(config)); };
    directory_options.holder = "ember extract --dataset";
    directory_options.inputs = input_paths(config);
    directory_options.resumable = dataset_run_resumable;
    RunDirectoryWriter writer(config.output.dir, directory_options);
    if (holds_dataset_failure_record(writer.dir())) std::filesystem::remove(writer.dir() / "run.json");
    std::string sae_digests;  // a changed SAE file starts the run over, like a changed config
    for (const InputFile& input : inputs)
        if (input.role == "sae") sae_digests += input.sha256;
    const std::string run_key = sha256_hex(config::canonical_json(config) + info.sha256 + sae_digests);
    std::vector<ArrayPlan> plans = plan_arrays(shape, model.model->config(), longest);
    plan_sae_arrays(saes, config.output.sae_output, plans);
    DatasetOutputs out(writer.dir(), std::move(plans), any_target, run_key);
    start_sae_arrays(out);

    runtime::SessionOptions session_options;
    session_options.route = *route;
    if (const auto kv_type = kernels::kv_type_from_name(config.model.kv_type)) session_options.kv_type = *kv_type;
    session_options.context_length = config.model.ctx;
    if (config.model.ctx == 0) {
        // The cache holds one evaluation at a time (a reset between them): sized to the
        // largest, in llama.cpp's steps of 256 positions (the attention's padded length, and
        // so its sums, are those of any longer context), not to the model's whole context.
        const std::size_t needed = (std::max<std::size_t>(pack_tokens, longest) + 255) / 256 * 256;
        session_options.context_length = std::min(needed, runtime::default_context_length(model.model->config()));
    }
    session_options.threads = threads;
    session_options.max_batch = std::max<std::size_t>(longest, batch_tokens);
    session_options.all_logits = shape.needs_all_logits() || any_target;
    runtime::Session session(*model.model, session_options);
    const SaeEncoders encoders(saes, *route, threads);
    // A packed evaluation holds its samples' K/V side by side: it fits the context.
    if (pack_tokens > session.context_length()) throw Error("the batches were planned for a longer context than the session's");

    DatasetResult result;
    result.dir = writer.dir();
    RunPoint point = out.resumed() ? out.resumed_at() : first;
    const RunPoint at_start = point;
    result.resumed_samples = point.samples - first.samples;
    const auto start = Clock::now();
    const bool progress = options.progress && ::isatty(STDERR_FILENO);

    DatasetReader reader(file);
    Sample sample;
    for (std::size_t i = 0; i < point.samples && reader.next(sample); ++i) {}  // another shard's, or finished earlier
    const auto next_sample = [&] { return reader.next(sample) && sample.index < end; };
    DatasetRecords appender(out, model.tokenizer);
    std::optional<Prepared> pending;  // read, but beyond the previous batch
    while (true) {
        // One batch: consecutive samples of at most pack_tokens tokens in all (a longer
        // sample alone); with experiments, each sample still has an evaluation of its own.
        std::vector<Prepared> batch;
        std::size_t tokens = 0;
        while (pending || next_sample()) {
            Prepared p = pending ? std::move(*pending) : prepare(request, std::move(sample), file);
            pending.reset();
            const std::size_t n = p.evaluated_rows;
            if (!batch.empty() && tokens + n > pack_tokens) {
                pending = std::move(p);
                break;
            }
            tokens += n;
            batch.push_back(std::move(p));
        }
        if (batch.empty()) break;
        std::vector<SampleRows> rows(batch.size());
        std::vector<SampleRows*> evaluated;
        for (std::size_t i = 0; i < batch.size(); ++i) {
            rows[i].prepared = &batch[i];
            if (batch[i].selection) evaluated.push_back(&rows[i]);
        }
        // A packed evaluation computes no attention pattern (models::attend): then each sample alone too.
        if (options.experiments || evaluated.size() == 1 || shape.has(hooks::Stage::AttentionPattern)) {
            for (SampleRows* r : evaluated)
                evaluate_sample(session, model, *route, threads, options.experiments, *r,
                                sample_name(r->prepared->sample, file));
        } else if (!evaluated.empty()) {
            evaluate_packed(session, model, *route, threads, evaluated);
        }
        // The batch's rows in one product per SAE; each row's features are the same bits in
        // any batch (SaeEncoders::encode), so packing changes none.
        std::vector<const Extractor*> extractors;
        for (SampleRows* r : evaluated) extractors.push_back(&*r->extractor);
        for (std::size_t i = 0; i < saes.size(); ++i) {
            std::vector<std::vector<float>> features = encoders.selected_features(i, extractors);
            for (std::size_t k = 0; k < evaluated.size(); ++k) evaluated[k]->sae_features.push_back(std::move(features[k]));
        }
        for (const SampleRows& r : rows) appender.append(r, point);
        out.checkpoint(point);
        ++result.batches;
        if (progress) draw_progress(point - first, total, (at_start - first).tokens,
                                    std::chrono::duration<double>(Clock::now() - start).count());
        if (options.on_batch) options.on_batch(point.samples);
    }
    if (progress) fmt::print(stderr, "\n");

    // The inputs as they were read (else nothing is renamed into place), the arrays' headers
    // made true, every file renamed into place, the manifest last.
    check_inputs_unchanged(inputs, model.file.mapping());
    out.finish();
    const RunPoint own = point - first;
    json::array recorded_inputs = inputs_json(inputs);
    if (options.experiments) add_read_inputs(recorded_inputs, options.experiments->snapshot());
    json::object manifest{
        {"schema_version", kManifestSchemaVersion},
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
          {"layers", json::value_from(shape.layers)},
          {"select", config.dataset.select},
          {"rows", "row r of every array is line r of rows.jsonl: its sample, position, token and byte span"},
          {"evaluation", "each sample at positions from 0, attending only to its own tokens; several samples "
                         "may share one packed evaluation (batch_tokens), which changes no value; without "
                         "experiments, attention patterns, logits or a target, a sample's rows after its last "
                         "selected one are not evaluated (samples.jsonl evaluated_tokens), which changes no "
                         "value either"}}},
        {"dataset",
         {{"path", file.string()},
          {"sha256", info.sha256},
          {"bytes", info.bytes},
          {"samples", own.samples},
          {"skipped", own.skipped},
          {"rows", own.rows},
          {"tokens", own.tokens},
          {"evaluated_tokens", own.evaluated}}},
        {"selection", {{"default", config.dataset.select}, {"on_empty", config.dataset.skip_empty ? "skip" : "error"}}},
        {"batch_tokens", batch_tokens},
        {"model", model_record(model.path, model.file, model.model->config(), model.sha256)},
        {"backend", {{"route", session.backend().route()}, {"variant", session.backend().variant()}}},
        {"route", session.backend().route()},
        {"threads", threads},
        {"config_hash", config::config_hash(config)},
        {"config", config::to_json(config)},
        {"inputs", std::move(recorded_inputs)},
        {"trace", nullptr},
    };
    dataset_manifest_arrays(out, shape, saes, config.output.sae_output, manifest);
    if (config.dataset.shard) {  // last: ember merge takes it off
        manifest["shard"] = shard_record(*config.dataset.shard, info.samples, {begin, end}, batches.size(),
                                         {first_batch, end_batch}, first.rows, manifest.at("config").as_object(),
                                         info.sha256, model.sha256);
    }
    writer.commit(std::move(manifest));

    result.samples = own.samples;
    result.skipped = own.skipped;
    result.rows = own.rows;
    result.tokens = own.tokens;
    result.tokens_this_run = point.tokens - at_start.tokens;
    result.evaluated = own.evaluated;
    result.evaluated_this_run = point.evaluated - at_start.evaluated;
    result.arrays = out.plans().size() + (any_target ? 1 : 0);
    result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return result;
}

}  // namespace ember::extract
