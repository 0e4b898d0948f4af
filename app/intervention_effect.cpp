#include "intervention_effect.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.hpp"
#include "extract/target_scoring.hpp"

namespace ember::app {
namespace {

namespace json = boost::json;

// log softmax of a row, in double.
std::vector<double> log_softmax(std::span<const float> row) {
    double max = -std::numeric_limits<double>::infinity();
    for (float v : row) max = std::max(max, static_cast<double>(v));
    double sum = 0;
    for (float v : row) sum += std::exp(static_cast<double>(v) - max);
    const double log_z = max + std::log(sum);
    std::vector<double> out(row.size());
    for (std::size_t i = 0; i < row.size(); ++i) out[i] = static_cast<double>(row[i]) - log_z;
    return out;
}

}  // namespace

void LastLogitsTap::stage(hooks::Stage stage, const hooks::EvalInfo& eval, std::uint32_t layer, hooks::TensorView tensor) {
    if (downstream_ && downstream_->wants(stage)) downstream_->stage(stage, eval, layer, tensor);
    if (stage != hooks::Stage::AfterLogits || eval.phase != hooks::Phase::Prefill || !logits_.empty() || tensor.rows == 0)
        return;
    const float* last = tensor.data + (tensor.rows - 1) * tensor.cols;  // [rows, n_vocab]: the prompt's last position
    logits_.assign(last, last + tensor.cols);
}

bool LastLogitsTap::wants(hooks::Stage stage) const {
    return stage == hooks::Stage::AfterLogits || (downstream_ && downstream_->wants(stage));
}

json::object effect_json(std::span<const float> edited, std::span<const float> unedited, const tokenizer::Tokenizer& tok,
                         const std::optional<TargetPair>& target) {
    if (edited.size() != unedited.size() || edited.empty())
        throw Error(fmt::format("the run's effect: {} logits with the experiments, {} without", edited.size(), unedited.size()));
    const std::vector<double> p = log_softmax(unedited), q = log_softmax(edited);
    double kl = 0;  // sum_i P(i) (log P(i) - log Q(i))
    for (std::size_t i = 0; i < p.size(); ++i)
        if (std::isfinite(p[i])) kl += std::exp(p[i]) * (p[i] - q[i]);
    const auto top = static_cast<std::int32_t>(std::max_element(unedited.begin(), unedited.end()) - unedited.begin());
    json::object top_token{{"id", top}};
    if (static_cast<std::size_t>(top) < tok.vocab_size())
        for (auto& [k, v] : extract::piece_fields(tok, top)) top_token[k] = v;
    top_token["edited_logit"] = edited[static_cast<std::size_t>(top)];
    top_token["unedited_logit"] = unedited[static_cast<std::size_t>(top)];
    top_token["logit_diff"] = static_cast<double>(edited[static_cast<std::size_t>(top)]) - unedited[static_cast<std::size_t>(top)];
    json::object out{{"against", "the same prompt evaluated without the run's experiments and SAEs"},
                     {"position", "the prompt's last: the next-token distribution the generation sampled from"},
                     {"kl_unedited_edited", kl},
                     {"top_token", std::move(top_token)}};
    if (target)
        out["target"] = {{"edited_logprob", target->edited},
                         {"unedited_logprob", target->unedited},
                         {"delta", target->edited - target->unedited}};
    return out;
}

}  // namespace ember::app
