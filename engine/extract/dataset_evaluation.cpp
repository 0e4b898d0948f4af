#include "extract/dataset_evaluation.hpp"

#include <fmt/format.h>

#include <memory>
#include <span>

#include "common/error.hpp"
#include "experiments/experiment_runner.hpp"
#include "extract/logit_lens.hpp"
#include "extract/target_scoring.hpp"
#include "hooks/hook_chain.hpp"

namespace ember::extract {
namespace {

using runtime::LoadedModel;

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

}  // namespace

std::string sample_name(const Sample& s, const std::filesystem::path& file) {
    return fmt::format("{}:{}: sample {}", file.string(), s.line, s.id_text());
}

std::vector<SampleRows> evaluate_batch(const BatchEvaluation& e, const std::vector<Prepared>& batch) {
    std::vector<SampleRows> rows(batch.size());
    std::vector<SampleRows*> evaluated;
    for (std::size_t i = 0; i < batch.size(); ++i) {
        rows[i].prepared = &batch[i];
        if (batch[i].selection) evaluated.push_back(&rows[i]);
    }
    // A packed evaluation computes no attention pattern (models::attend): then each sample alone too.
    if (e.experiments || evaluated.size() == 1 || e.attention_pattern) {
        for (SampleRows* r : evaluated)
            evaluate_sample(e.session, e.model, e.route, e.threads, e.experiments, *r, sample_name(r->prepared->sample, e.file));
    } else if (!evaluated.empty()) {
        evaluate_packed(e.session, e.model, e.route, e.threads, evaluated);
    }
    // The batch's rows in one product per SAE; each row's features are the same bits in
    // any batch (SaeEncoders::encode), so packing changes none.
    std::vector<const Extractor*> extractors;
    for (SampleRows* r : evaluated) extractors.push_back(&*r->extractor);
    for (std::size_t i = 0; i < e.n_saes; ++i) {
        std::vector<std::vector<float>> features = e.encoders.selected_features(i, extractors);
        for (std::size_t k = 0; k < evaluated.size(); ++k) evaluated[k]->sae_features.push_back(std::move(features[k]));
    }
    return rows;
}

}  // namespace ember::extract
