#include "attribution/attribution.hpp"

#include <fmt/format.h>
#include <oneapi/tbb/task_arena.h>

#include <boost/json.hpp>

#include <chrono>
#include <map>

#include "attribution/atp.hpp"
#include "attribution/sae_gradient.hpp"
#include "attribution/site_arrays.hpp"
#include "common/error.hpp"
#include "record/run_directory.hpp"
#include "runtime/prompt.hpp"
#include "extract/target_scoring.hpp"

namespace ember::attribution {
namespace {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;
using hooks::Stage;

double ms_since(Clock::time_point start) { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); }

// prompt + target tokenized together, split where the prompt's bytes end (as a dataset's
// target scoring splits them, extract/dataset_extraction.cpp).
Continuation split_continuation(const tokenizer::Tokenizer& tok, const AttributeRequest& r, const std::string& target,
                                const char* option) {
    if (target.empty()) throw Error(fmt::format("{} is empty: there is nothing to score", option));
    Continuation c;
    if (r.ids) {
        // Token ids: the target's tokens after them, split from the ids' text as --target on extract splits them.
        config::PromptSection section;
        section.ids = r.ids;
        section.special = r.special;
        extract::TargetTokens t =
            extract::encode_with_target(tok, request_prompt(tok, r), target, section, fmt::format("{} '{}'", option, target));
        c.evaluated = std::move(t.evaluated);
        c.prompt_tokens = t.prompt_tokens;
        return c;
    }
    c.evaluated = runtime::encode_prompt(tok, r.prompt + target, r.add_bos, r.special);
    const std::size_t end = r.prompt.size();
    for (const tokenizer::Token& t : c.evaluated.tokens) {
        if (t.start < end && t.end > end)
            throw Error(fmt::format("{} '{}': token {} (bytes {}-{}) straddles the end of the prompt and the start of the "
                                    "target: tokenized together they do not split there",
                                    option, target, t.id, t.start, t.end));
        if (t.start < end || (t.start == t.end && t.start == 0)) ++c.prompt_tokens;
    }
    if (c.prompt_tokens == c.evaluated.tokens.size())
        throw Error(fmt::format("{} '{}' tokenizes to nothing after the prompt: there is no token to score", option, target));
    if (c.prompt_tokens == 0) throw Error("the prompt has no tokens");
    return c;
}

std::size_t target_tokens(const Continuation& c) { return c.evaluated.ids.size() - c.prompt_tokens; }

// The terms of a summed log-probability: row j - 1 predicts token j, for every target token j.
Metric logprob_metric(const Continuation& c) {
    Metric m{MetricKind::LogProb, {}};
    for (std::size_t j = c.prompt_tokens; j < c.evaluated.ids.size(); ++j) m.terms.push_back({j - 1, c.evaluated.ids[j], -1});
    return m;
}

void require_one_token(const Continuation& c, const std::string& target, const char* option, MetricKind kind) {
    if (target_tokens(c) != 1)
        throw Error(fmt::format("{} '{}' is {} tokens after the prompt; --metric {} reads one token", option, target,
                                target_tokens(c), metric_name(kind)));
}

}  // namespace

runtime::EncodedPrompt request_prompt(const tokenizer::Tokenizer& tok, const AttributeRequest& r) {
    if (r.ids) return runtime::encode_ids(tok, *r.ids, "--ids");
    runtime::EncodedPrompt p;
    p.text = r.prompt;
    return p;
}

bool has_gradient(Stage stage) { return hooks::is_tensor_stage(stage) && stage != Stage::AfterLogits; }

std::vector<Continuation> continuations(const tokenizer::Tokenizer& tok, const AttributeRequest& r) {
    Continuation a = split_continuation(tok, r, r.target, "--target");
    if (r.metric == MetricKind::LogProb) {
        if (r.contrast) throw Error("--contrast goes with --metric logit-diff");
        a.metric = logprob_metric(a);
        return {std::move(a)};
    }
    if (r.metric == MetricKind::Prob) {
        if (r.contrast) throw Error("--contrast goes with --metric logit-diff");
        require_one_token(a, r.target, "--target", r.metric);
        a.metric = {MetricKind::Prob, {{a.prompt_tokens - 1, a.evaluated.ids[a.prompt_tokens], -1}}};
        a.evaluated.ids.resize(a.prompt_tokens);  // the prompt alone: the target is read, not evaluated
        a.evaluated.tokens.resize(a.prompt_tokens);
        return {std::move(a)};
    }
    if (!r.contrast) throw Error("--metric logit-diff needs --contrast B (the token or target subtracted)");
    Continuation b = split_continuation(tok, r, *r.contrast, "--contrast");
    if (a.prompt_tokens != b.prompt_tokens ||
        !std::equal(a.evaluated.ids.begin(), a.evaluated.ids.begin() + a.prompt_tokens, b.evaluated.ids.begin()))
        throw Error("--target and --contrast change how the prompt itself is tokenized: the two runs would not share the "
                    "prompt's tokens");
    if (target_tokens(a) == 1 && target_tokens(b) == 1) {
        // One row: M = z[a] - z[b] (the log-probabilities' difference, the normalizer cancelling).
        a.metric = {MetricKind::LogitDiff, {{a.prompt_tokens - 1, a.evaluated.ids[a.prompt_tokens], b.evaluated.ids[b.prompt_tokens]}}};
        a.evaluated.ids.resize(a.prompt_tokens);
        a.evaluated.tokens.resize(a.prompt_tokens);
        return {std::move(a)};
    }
    // Several tokens: M = log p(A) - log p(B), two teacher-forced evaluations sharing the prompt's rows.
    a.metric = logprob_metric(a);
    b.metric = logprob_metric(b);
    b.sign = -1.0;
    return {std::move(a), std::move(b)};
}

PreparedAttribution prepare_attribution(const runtime::LoadedModel& model, const GradientModel& gm,
                                        const AttributeRequest& r) {
    const models::ModelConfig& c = gm.config();
    PreparedAttribution p;
    p.runs = continuations(model.tokenizer, r);
    const Continuation& first = p.runs.front();
    const std::span<const tokenizer::Token> prompt_tokens(first.evaluated.tokens.data(), first.prompt_tokens);
    const std::string prompt_text = request_prompt(model.tokenizer, r).text;
    p.selection = extract::resolve(r.output, c, prompt_text, prompt_tokens, r.select ? &*r.select : nullptr);
    for (Stage s : extract::kStages) {
        if (p.selection.has(s) && !has_gradient(s))
            throw Error(fmt::format("stage {} has no gradient here: the metric reads the logits directly (its gradient "
                                    "there is the metric's own); the stages with gradients are the tensor stages before it",
                                    hooks::stage_name(s)));
    }
    if (r.sae) check_sae_for_gradients(*r.sae);
    if (r.has_corrupt()) p.corrupt = aligned_corrupt_prompt(model.tokenizer, r, first.prompt_tokens, p.selection);
    if (r.integrated_gradients) {
        for (Stage s : {Stage::AttentionPattern, Stage::BeforeLogits})
            if (p.selection.has(s))
                throw Error(fmt::format("--method ig interpolates a site through an edit of the forward pass; {} cannot "
                                        "be edited there: choose other stages",
                                        hooks::stage_name(s)));
    }
    return p;
}

json::object write_attribution(record::RunDirectoryWriter& writer, const std::string& prefix,
                               const runtime::LoadedModel& model, const GradientModel& gm, const AttributeRequest& r,
                               const PreparedAttribution& p, AttributeResult& result) {
    const models::ModelConfig& c = gm.config();
    const std::vector<Continuation>& runs = p.runs;
    const Continuation& first = runs.front();
    tbb::task_arena arena(static_cast<int>(std::max<std::size_t>(1, r.threads)));
    SiteArrays arrays(p.selection, c, first.prompt_tokens);
    if (r.sae) arrays.add_sae_features(*r.sae->site.layer, r.sae->d_sae);
    // With integrated gradients, the chosen sites' whole tensors of the clean run (the path's start).
    std::vector<Matrix> clean_tensors(r.integrated_gradients ? arrays.arrays().size() : 0);
    double metric = 0.0;
    arena.execute([&] {
        for (const Continuation& run : runs) {
            const bool first_run = &run == &runs.front();  // its prompt rows are every run's
            auto start = Clock::now();
            const Tape tape = gm.forward(run.evaluated.ids, run.metric.rows());
            result.forward_ms += ms_since(start);
            Matrix dlogits;
            const double value = run.metric.evaluate(tape.logits.view(), &dlogits);
            metric += run.sign * value;
            start = Clock::now();
            gm.backward(tape, dlogits.view(), with_sae_features(r.sae, [&](const Site& site) {
                arrays.add_gradient(site, run.sign);
                if (!first_run) return;
                arrays.take_activation(site);
                if (!clean_tensors.empty()) arrays.keep_tensor(site, clean_tensors);
            }));
            result.backward_ms += ms_since(start);
        }
    });
    result.metric = metric;

    json::array tensors = arrays.write(writer, prefix, metric_name(first.metric.kind), metric);
    json::value atp = nullptr;
    if (p.corrupt)
        atp = write_attribution_patching(writer, prefix, model, gm, r, runs, *p.corrupt, arrays, clean_tensors, metric, arena);

    json::array evaluations;
    for (const Continuation& run : runs) {
        json::array terms;
        for (const MetricTerm& t : run.metric.terms) {
            json::object term{{"row", t.row}, {"token", t.target}};
            if (t.contrast >= 0) term["contrast"] = t.contrast;
            terms.push_back(std::move(term));
        }
        evaluations.push_back({{"token_ids", json::value_from(run.evaluated.ids)},
                               {"prompt_tokens", run.prompt_tokens},
                               {"sign", run.sign},
                               {"terms", std::move(terms)}});
    }
    result.prompt_tokens = first.prompt_tokens;
    result.evaluated_tokens = first.evaluated.ids.size();
    return {
        {"tokenizer", record::tokenizer_record(model.tokenizer, [&] {
             runtime::EncodedPrompt prompt = first.evaluated;  // the prompt's own tokens
             prompt.text = request_prompt(model.tokenizer, r).text;
             prompt.tokens.resize(first.prompt_tokens);
             prompt.ids.resize(first.prompt_tokens);
             return prompt;
         }())},
        {"metric",
         {{"name", metric_name(r.metric)},
          {"value", metric},
          {"target", r.target},
          {"contrast", r.contrast ? json::value(*r.contrast) : json::value(nullptr)},
          {"definition", metric_definition(r.metric, runs.size())},
          {"evaluations", std::move(evaluations)}}},
        {"tensors", std::move(tensors)},
        {"attribution_patching", std::move(atp)},
    };
}

json::object manifest_head(const runtime::LoadedModel& model, const AttributeRequest& r, std::string_view kind,
                           std::string_view layout) {
    json::object head{
        {"schema_version", record::kManifestSchemaVersion},
        {"kind", kind},
        {"run_id", nullptr},  // a configured run's (run_record), null from the command line as ember extract's
        {"layout", layout},
        {"dtype", "float32"},
        {"output_format", {{"format", "npy"}, {"version", "1.0"}, {"order", "C"}, {"byte_order", "little"}}},
        {"model", record::model_record(model.path, model.file, model.model->config(), model.sha256)},
        {"backend", {{"route", "reference"}, {"variant", "gradient-reference"}, {"threads", r.threads}}},
        {"route", "reference"},
        {"request", r.request_record},
    };
    for (const auto& kv : r.run_record) head[kv.key()] = kv.value();
    return head;
}

AttributeResult run_attribution(const runtime::LoadedModel& model, const GradientModel& gm, const AttributeRequest& r) {
    const PreparedAttribution prepared = prepare_attribution(model, gm, r);  // before anything is written
    record::RunDirectoryWriter writer(r.output.dir, {r.output.overwrite, "ember attribute", {}, {}});
    AttributeResult result;
    json::object manifest = manifest_head(
        model, r, "ember.attribution",
        "per (stage, layer): STAGE.layerN.grad.npy (kind gradient) and STAGE.layerN.npy (kind activation); "
        "before_logits.grad.npy and before_logits.npy; with --corrupt attribution.jsonl and STAGE.layerN.atp.npy; "
        "manifest.json last");
    for (auto& kv : write_attribution(writer, "", model, gm, r, prepared, result)) manifest[kv.key()] = std::move(kv.value());
    manifest["timing"] = {{"forward_ms", result.forward_ms}, {"backward_ms", result.backward_ms}};
    writer.commit(std::move(manifest));
    result.dir = writer.output_dir();
    for (const record::FileRecord& f : writer.files()) result.arrays += f.name.ends_with(".npy");
    return result;
}

}  // namespace ember::attribution
