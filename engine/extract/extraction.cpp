#include "extract/extraction.hpp"

#include <fmt/format.h>

#include <boost/json/serialize.hpp>
#include <boost/json/value_from.hpp>

#include <chrono>
#include <fstream>
#include <iterator>

#include "extract/capture_entry.hpp"
#include "record/strict_json.hpp"
#include "common/error.hpp"
#include "common/sha256_file.hpp"
#include "record/inputs_record.hpp"
#include "extract/logit_lens.hpp"
#include "extract/sae_extraction.hpp"
#include "extract/target_scoring.hpp"
#include "runtime/prompt.hpp"
#include "runtime/threads.hpp"

namespace ember::extract {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); }

json::object tensor_contract(const Selection& s) {
    json::array stages;
    for (hooks::Stage stage : kStages)
        if (s.has(stage)) stages.push_back(json::value(hooks::stage_name(stage)));
    return {
        {"phase", "prefill"},
        {"stages", std::move(stages)},
        {"layers", json::value_from(s.layers)},
        {"positions", json::value_from(s.positions)},
        {"select", s.spec},
        {"partial", json::value_from(s.partial)},
        {"rows", "one row per selected prompt position, ascending; position p is tokenizer.token_ids[p] "
                 "(attention_pattern: [positions, n_head, n_kv], [i, h] is head h of positions[i])"},
        {"columns", "the stage's features: n_embd for before_layer, after_attention, after_mlp, after_layer and "
                    "before_logits, n_head * head_dim for head_outputs, n_ff for mlp_activation, the prompt's "
                    "positions for attention_pattern, n_vocab for after_logits"},
        {"values", "float32 exactly as the engine computed them (no normalization, no rounding)"},
    };
}

}  // namespace

json::object score_prompt_target(runtime::Session& session, const LoadedModel& model, const runtime::EncodedPrompt& prompt,
                                 const config::PromptSection& section, hooks::ActiveHooks* hooks, bool stepwise) {
    const tokenizer::Tokenizer& tok = model.tokenizer;
    // A conversation: the target continues its rendering (the prompt as rendered, not rewritten).
    const TargetTokens t = prompt.chat ? encode_chat_with_target(model, section, *section.target, "--target")
                                       : encode_with_target(tok, prompt, *section.target, section, "--target");
    session.reset();
    if (t.evaluated.ids.size() > session.context_length())
        throw Error(fmt::format("--target: the prompt and the target, {} tokens, do not fit in the context of {} tokens (--ctx)",
                                t.evaluated.ids.size(), session.context_length()));
    const std::span<const std::int32_t> ids = t.evaluated.ids;
    if (!stepwise)
        return target_record(tok, ids, t.prompt_tokens, t.target,
                             score_target(ids, t.prompt_tokens, session.prefill(ids, /*all_logits=*/true, hooks)));
    TargetScore score;
    kernels::ConstRows row = session.prefill(ids.first(t.prompt_tokens), false, hooks);  // [1, n_vocab]
    for (std::size_t j = t.prompt_tokens; j < ids.size(); ++j) {
        score.logprobs.push_back(token_logprob(row.data, row.cols, ids[j]));
        score.logprob += score.logprobs.back();
        if (j + 1 < ids.size()) row = session.decode(ids[j], hooks);
    }
    return target_record(tok, ids, t.prompt_tokens, t.target, score);
}

namespace {

// The arrays of one extraction, written, and their manifest entries.
struct WrittenArrays {
    json::value tensor_contract = nullptr;
    json::array tensors;
    json::value logits = nullptr;
    json::value lens = nullptr;
};

WrittenArrays write_arrays(record::RunDirectoryWriter& writer, const Extractor& extractor, const LoadedModel& model,
                           runtime::Route route, std::size_t threads) {
    extractor.check_complete();
    const Selection& s = extractor.selection();
    WrittenArrays out;
    out.tensor_contract = tensor_contract(s);
    for (const Capture* c : extractor.captures()) {
        const record::FileRecord file = writer.write_npy_f32(capture_file_name(*c), c->values.data(), c->shape());
        out.tensors.push_back(tensor_entry(*c, file));
    }
    if (const Capture* c = extractor.logits()) {
        const record::FileRecord file = writer.write_npy_f32("logits.npy", c->values.data(), {c->positions.size(), c->cols});
        json::object entry = tensor_entry(*c, file);
        entry["stage"] = "logits";
        out.logits = std::move(entry);
    }
    if (s.lens_top_k > 0) {
        json::array layers;
        for (const LensLayer& l : logit_lens(*model.model, route, threads, extractor.lens_sources(), s.lens_top_k)) {
            const std::vector<std::size_t> shape = {l.positions.size(), l.k};
            const record::FileRecord ids = writer.write_npy_i32(fmt::format("logit_lens.layer{}.ids.npy", l.layer), l.ids.data(), shape);
            const record::FileRecord values =
                writer.write_npy_f32(fmt::format("logit_lens.layer{}.logits.npy", l.layer), l.logits.data(), shape);
            // The ids' pieces, [positions][k]: text when valid UTF-8, else null.
            json::array pieces;
            for (std::size_t p = 0; p < l.positions.size(); ++p) {
                json::array row;
                for (std::size_t j = 0; j < l.k; ++j) row.push_back(record::piece_text(model.tokenizer.piece(l.ids[p * l.k + j], true)));
                pieces.push_back(std::move(row));
            }
            const record::FileRecord pieces_file =
                writer.write_text(fmt::format("logit_lens.layer{}.pieces.json", l.layer), strict_json(pieces) + "\n");
            layers.push_back({{"layer", l.layer},
                              {"ids_file", ids.name},
                              {"logits_file", values.name},
                              {"pieces_file", pieces_file.name},
                              {"positions", json::value_from(l.positions)},
                              {"shape", json::value_from(shape)}});
        }
        out.lens = json::object{
            {"top_k", s.lens_top_k},
            {"source", "after_layer rows through the final norm and the LM head (soft-capped where the model is)"},
            {"order", "best first; equal logits by lower id; NaN last"},
            {"ids_dtype", "int32"},
            {"logits_dtype", "float32"},
            {"layers", std::move(layers)},
        };
    }
    return out;
}

}  // namespace

void write_extraction(record::RunDirectoryWriter& writer, const Extractor* extractor, const LoadedModel& model,
                      const runtime::EncodedPrompt& prompt, const RunRecord& run, runtime::Route route, std::size_t threads,
                      const std::function<void()>& before_manifest) {
    WrittenArrays arrays = extractor ? write_arrays(writer, *extractor, model, route, threads) : WrittenArrays{};
    if (before_manifest) before_manifest();

    json::value trace = nullptr;
    if (run.trace) {
        json::object t{{"path", run.trace->path.string()},
                       {"operations", run.trace->operations},
                       {"evaluations", run.trace->evaluations},
                       {"fingerprint", run.trace->fingerprint},
                       {"file", nullptr}};
        const fs::path in_dir = fs::absolute(run.trace->path).lexically_normal().lexically_relative(writer.output_dir());
        if (!in_dir.empty() && *in_dir.begin() != "..") t["file"] = in_dir.generic_string();
        trace = std::move(t);
    }

    json::object manifest{
        {"schema_version", record::kManifestSchemaVersion},
        {"kind", run.kind},
        {"run_id", run.run_id.empty() ? json::value(nullptr) : json::value(run.run_id)},
        {"layout", "one .npy per (stage, layer): STAGE.layerN.npy for layer stages, STAGE.npy for the logits stages; "
                   "logits.npy; logit_lens.layerN.ids.npy and .logits.npy; manifest.json last"},
        {"dtype", "float32"},
        {"output_format", {{"format", "npy"}, {"version", "1.0"}, {"order", "C"}, {"byte_order", "little"}}},
        {"tensor_contract", std::move(arrays.tensor_contract)},
        {"model", record::model_record(model.path, model.file, model.model->config(), model.sha256)},
        {"tokenizer", record::tokenizer_record(model.tokenizer, prompt)},
        {"backend", {{"route", run.route}, {"variant", run.variant}, {"threads", run.threads}}},
        {"route", run.route},
        {"config_hash", run.config_hash},
        {"config", run.config},
        {"inputs", run.inputs},
        {"samples", json::array{record::sample_record(prompt)}},
        {"tensors", std::move(arrays.tensors)},
        {"logits", std::move(arrays.logits)},
        {"logit_lens", std::move(arrays.lens)},
        {"trace", std::move(trace)},
    };
    if (!run.lifecycle.is_null()) manifest["lifecycle"] = run.lifecycle;
    if (!run.sae_features.is_null()) manifest["sae_features"] = run.sae_features;
    if (run.target) {
        // The files and fields of a dataset run's targets, for its one sample.
        json::object line{{"sample", 0}, {"id", nullptr}};
        for (const auto& [k, v] : *run.target) line[k] = v;
        writer.write_text("targets.jsonl", strict_json(line) + "\n");
        const double sum = run.target->at("logprob").as_double();
        writer.write_npy_f64("targets.npy", &sum, {1});
        manifest["targets"] = {{"file", "targets.npy"},
                               {"shape", json::array{1}},
                               {"dtype", "float64"},
                               {"values", "per sample: the summed log-probability of its target (NaN: no target)"},
                               {"tokens", "targets.jsonl"}};
    }
    writer.commit(std::move(manifest));
}

ExtractionResult run_extraction(const LoadedModel& model, const config::RunConfig& config,
                                const ExtractionOptions& options) {
    const auto route = runtime::route_from_name(config.model.route);
    if (!route) throw Error(fmt::format("model.route '{}' is not one of reference, fast", config.model.route));
    // Hashed before they are read: a change while the run reads them fails it (check_inputs_unchanged).
    std::vector<record::InputFile> inputs = record::collect_inputs(config, model.sha256, model.file.mapping()->state());
    const std::vector<features::Sae> saes = load_extraction_saes(config, model.model->config(), inputs);
    const runtime::EncodedPrompt prompt = runtime::encode_run_prompt(model, config.prompt);
    Selection selection = resolve(config.output, model.model->config(), prompt.text, prompt.tokens, nullptr,
                                  prompt.conversation ? &*prompt.conversation : nullptr);
    selection.sae_sites = sae_sites(saes);
    const std::size_t threads = runtime::effective_threads(config.model.threads);

    // One writer per directory; an earlier run is refused, or replaced with --overwrite.
    record::RunDirectoryWriter writer(config.output.dir,
                              {config.output.overwrite || options.overwrite, "ember extract", {}, {}, record::input_paths(config)});
    writer.on_file_written = options.on_file_written;

    std::optional<trace::Journal> journal;
    runtime::SessionOptions session_options;
    session_options.route = *route;
    if (const auto kv_type = kernels::kv_type_from_name(config.model.kv_type)) session_options.kv_type = *kv_type;
    session_options.context_length = config.model.ctx;
    session_options.threads = threads;
    session_options.max_batch = prompt.ids.size();
    session_options.all_logits = selection.needs_all_logits();
    if (config.tracing.enabled) session_options.observer = &journal.emplace(writer.place(config.tracing.path));
    runtime::Session session(*model.model, session_options);

    Extractor extractor(selection);
    auto start = Clock::now();
    session.prefill(prompt.ids, selection.needs_all_logits(), &extractor);
    ExtractionResult result;
    result.prefill_ms = ms_since(start);
    if (journal) {
        result.trace = journal->finish();
        result.trace->path = config.tracing.path;
    }

    // The target in an evaluation of its own: the extraction's arrays are those without it.
    if (config.prompt.target) result.target = score_prompt_target(session, model, prompt, config.prompt);

    record::check_inputs_unchanged(inputs, model.file.mapping());
    start = Clock::now();
    RunRecord run;
    run.target = result.target;
    run.route = session.backend().route();
    run.variant = session.backend().variant();
    run.config_hash = config::config_hash(config);
    run.config = config::to_json(config);
    run.trace = result.trace;
    run.inputs = record::inputs_json(inputs);
    run.threads = threads;
    if (!saes.empty()) {
        const SaeEncoders encoders(saes, *route, threads);
        run.sae_features = write_sae_features(writer, extractor, saes, encoders, config.output.sae_output);
    }
    write_extraction(writer, &extractor, model, prompt, run, *route, threads);
    result.write_ms = ms_since(start);
    result.dir = writer.output_dir();
    result.n_tokens = prompt.ids.size();
    for (const record::FileRecord& f : writer.files()) result.arrays += f.name.ends_with(".npy");
    return result;
}

}  // namespace ember::extract
