#include "attribution/attribution.hpp"

#include <fmt/format.h>
#include <oneapi/tbb/task_arena.h>

#include <boost/json.hpp>

#include <chrono>
#include <map>

#include "attribution/atp.hpp"
#include "attribution/site_arrays.hpp"
#include "common/error.hpp"
#include "extract/run_directory.hpp"

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
    c.evaluated = extract::encode_prompt(tok, r.prompt + target, r.add_bos, r.special);
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

AttributeResult run_attribution(const runtime::LoadedModel& model, const GradientModel& gm, const AttributeRequest& r) {
    const models::ModelConfig& c = gm.config();
    const std::vector<Continuation> runs = continuations(model.tokenizer, r);
    const Continuation& first = runs.front();
    const std::span<const tokenizer::Token> prompt_tokens(first.evaluated.tokens.data(), first.prompt_tokens);
    const extract::Selection selection = extract::resolve(r.output, c, r.prompt, prompt_tokens);
    for (Stage s : extract::kStages) {
        if (selection.has(s) && !has_gradient(s))
            throw Error(fmt::format("stage {} has no gradient here: the metric reads the logits directly (its gradient "
                                    "there is the metric's own); the stages with gradients are the tensor stages before it",
                                    hooks::stage_name(s)));
    }
    if (r.corrupt) aligned_corrupt_prompt(model.tokenizer, r, first.prompt_tokens);  // before anything is written
    if (r.integrated_gradients) {
        for (Stage s : {Stage::AttentionPattern, Stage::BeforeLogits})
            if (selection.has(s))
                throw Error(fmt::format("--method ig interpolates a site through an edit of the forward pass; {} cannot "
                                        "be edited there: choose other stages",
                                        hooks::stage_name(s)));
    }
    extract::RunDirectoryWriter writer(r.output.dir, {r.output.overwrite, "ember attribute", {}, {}});

    tbb::task_arena arena(static_cast<int>(std::max<std::size_t>(1, r.threads)));
    AttributeResult result;
    SiteArrays arrays(selection, c, first.prompt_tokens);
    std::optional<Tape> clean;  // the first evaluation's tape (its prompt rows are every run's)
    arena.execute([&] {
        for (const Continuation& run : runs) {
            auto start = Clock::now();
            Tape tape = gm.forward(run.evaluated.ids, run.metric.rows());
            result.forward_ms += ms_since(start);
            Matrix dlogits;
            const double value = run.metric.evaluate(tape.logits.view(), &dlogits);
            result.metric += run.sign * value;
            start = Clock::now();
            gm.backward(tape, dlogits.view(), [&](const Site& site) { arrays.add_gradient(site, run.sign); });
            result.backward_ms += ms_since(start);
            if (!clean) clean = std::move(tape);
        }
        arrays.take_activations(*clean);
    });

    json::array tensors = arrays.write(writer, metric_name(first.metric.kind), result.metric);
    json::value atp = nullptr;
    if (r.corrupt) atp = write_attribution_patching(writer, model, gm, r, runs, arrays, *clean, result.metric, arena);

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
    json::object manifest{
        {"schema_version", extract::kManifestSchemaVersion},
        {"kind", "ember.attribution"},
        {"layout", "per (stage, layer): STAGE.layerN.grad.npy (kind gradient) and STAGE.layerN.npy (kind activation); "
                   "before_logits.grad.npy and before_logits.npy; with --corrupt attribution.jsonl and "
                   "STAGE.layerN.atp.npy; manifest.json last"},
        {"dtype", "float32"},
        {"output_format", {{"format", "npy"}, {"version", "1.0"}, {"order", "C"}, {"byte_order", "little"}}},
        {"model", extract::model_record(model.path, model.file, c, model.sha256)},
        {"tokenizer", extract::tokenizer_record(model.tokenizer, [&] {
             extract::EncodedPrompt p = first.evaluated;  // the prompt's own tokens
             p.text = r.prompt;
             p.tokens.resize(first.prompt_tokens);
             p.ids.resize(first.prompt_tokens);
             return p;
         }())},
        {"backend", {{"route", "reference"}, {"variant", "gradient-reference"}, {"threads", r.threads}}},
        {"route", "reference"},
        {"request", r.request_record},
        {"metric",
         {{"name", metric_name(r.metric)},
          {"value", result.metric},
          {"target", r.target},
          {"contrast", r.contrast ? json::value(*r.contrast) : json::value(nullptr)},
          {"definition", metric_definition(r.metric, runs.size())},
          {"evaluations", std::move(evaluations)}}},
        {"tensors", std::move(tensors)},
        {"attribution_patching", std::move(atp)},
        {"timing", {{"forward_ms", result.forward_ms}, {"backward_ms", result.backward_ms}}},
    };
    writer.commit(std::move(manifest));
    result.dir = writer.output_dir();
    result.prompt_tokens = first.prompt_tokens;
    result.evaluated_tokens = first.evaluated.ids.size();
    for (const extract::FileRecord& f : writer.files()) result.arrays += f.name.ends_with(".npy");
    return result;
}

}  // namespace ember::attribution
