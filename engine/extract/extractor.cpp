#include "extract/extractor.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.hpp"

namespace ember::extract {
namespace {

Capture empty_capture(hooks::Stage stage, std::optional<std::uint32_t> layer, std::vector<std::size_t> positions) {
    Capture c;
    c.stage = stage;
    c.layer = layer;
    c.positions = std::move(positions);
    return c;
}

// Copies the rows of `view` (positions first_position, +1, ...) that `capture` wants,
// in the capture's position order.
void copy_rows(Capture& capture, std::size_t first_position, hooks::TensorView view) {
    if (capture.values.empty()) {
        capture.cols = view.cols;
        capture.values.resize(capture.positions.size() * view.cols);
    }
    if (capture.cols != view.cols) {
        throw Error(fmt::format("extraction: {} changed width from {} to {}", hooks::stage_name(capture.stage),
                                capture.cols, view.cols));
    }
    for (std::size_t i = 0; i < capture.positions.size(); ++i) {
        const std::size_t p = capture.positions[i];
        if (p < first_position || p >= first_position + view.rows) continue;
        const float* row = view.data + (p - first_position) * view.cols;
        std::copy(row, row + view.cols, capture.values.begin() + static_cast<std::ptrdiff_t>(i * view.cols));
        ++capture.rows_seen;
    }
}

// attention_pattern's rows [n_head * T, n_kv] (the hook's head-major row h * T + t) at
// the capture's positions, as [positions.size(), n_head, n_kv] (flat row i * n_head + h).
void copy_pattern_rows(Capture& capture, const hooks::EvalInfo& eval, hooks::TensorView view) {
    const std::size_t T = eval.n_tokens;
    const std::size_t n_head = view.rows / T;
    if (capture.values.empty()) {
        capture.cols = view.cols;
        capture.rows_per_position = n_head;
        capture.values.resize(capture.positions.size() * n_head * view.cols);
    }
    if (capture.cols != view.cols || capture.values.size() != capture.positions.size() * n_head * view.cols) {
        throw Error(fmt::format("extraction: attention_pattern changed shape to [{}, {}]", view.rows, view.cols));
    }
    for (std::size_t i = 0; i < capture.positions.size(); ++i) {
        const std::size_t p = capture.positions[i];
        if (p < eval.start_position || p >= eval.start_position + T) continue;
        for (std::size_t h = 0; h < n_head; ++h) {
            const float* row = view.data + (h * T + p - eval.start_position) * view.cols;
            std::copy(row, row + view.cols,
                      capture.values.begin() + static_cast<std::ptrdiff_t>((i * n_head + h) * view.cols));
        }
        ++capture.rows_seen;
    }
}

std::size_t logits_stage_index(hooks::Stage s) { return s == hooks::Stage::BeforeLogits ? 0 : 1; }

}  // namespace

Extractor::Extractor(Selection selection) : selection_(std::move(selection)) {
    layer_stages_.resize(hooks::kStageCount);
    for (hooks::Stage stage : kStages) {
        if (!selection_.has(stage)) continue;
        if (is_layer_stage(stage)) {
            for (std::uint32_t l : selection_.layers)
                layer_stages_[hooks::index_of(stage)].push_back(empty_capture(stage, l, selection_.positions));
        }
    }
    for (hooks::Stage stage : {hooks::Stage::BeforeLogits, hooks::Stage::AfterLogits})
        logits_stages_.push_back(empty_capture(stage, std::nullopt, selection_.positions));
    if (selection_.logits != config::LogitsDump::None) {
        std::vector<std::size_t> positions;
        if (selection_.logits == config::LogitsDump::Last) positions.push_back(selection_.n_tokens - 1);
        else if (selection_.logits == config::LogitsDump::Selected) positions = selection_.positions;
        else for (std::size_t p = 0; p < selection_.n_tokens; ++p) positions.push_back(p);
        logits_ = empty_capture(hooks::Stage::AfterLogits, std::nullopt, std::move(positions));
    }
    if (selection_.lens_top_k > 0) {
        for (std::uint32_t l : selection_.layers)
            lens_.push_back(empty_capture(hooks::Stage::AfterLayer, l, selection_.positions));
    }
    for (const hooks::HookSite& site : selection_.sae_sites) {
        if (site.layer ? !is_layer_stage(site.stage) || site.stage == hooks::Stage::AttentionPattern
                       : site.stage != hooks::Stage::BeforeLogits)
            throw Error(fmt::format("extraction: an SAE at {} is not extracted (layer stages and before_logits only)",
                                    hooks::site_text(site)));
        sae_sites_.push_back(empty_capture(site.stage, site.layer, selection_.positions));
    }
}

void Extractor::record(hooks::Stage stage, std::optional<std::uint32_t> layer, const hooks::EvalInfo& eval,
                       hooks::TensorView view) {
    if (eval.phase != hooks::Phase::Prefill) return;
    if (!layer) {
        // The logits stages see the last row, or every row with all_logits.
        const std::size_t first = eval.all_logits ? eval.start_position : eval.start_position + eval.n_tokens - 1;
        if (selection_.has(stage)) copy_rows(logits_stages_[logits_stage_index(stage)], first, view);
        if (stage == hooks::Stage::AfterLogits && logits_) copy_rows(*logits_, first, view);
        for (Capture& c : sae_sites_)
            if (c.stage == stage && !c.layer) copy_rows(c, first, view);
        return;
    }
    for (Capture& c : sae_sites_)
        if (c.stage == stage && c.layer == layer) copy_rows(c, eval.start_position, view);
    if (!selection_.has_layer(*layer)) return;
    const auto index = static_cast<std::size_t>(
        std::lower_bound(selection_.layers.begin(), selection_.layers.end(), *layer) - selection_.layers.begin());
    if (selection_.has(stage)) {
        Capture& capture = layer_stages_[hooks::index_of(stage)][index];
        if (stage == hooks::Stage::AttentionPattern) copy_pattern_rows(capture, eval, view);
        else copy_rows(capture, eval.start_position, view);
    }
    if (stage == hooks::Stage::AfterLayer && !lens_.empty()) copy_rows(lens_[index], eval.start_position, view);
}

void Extractor::stage(hooks::Stage stage, const hooks::EvalInfo& eval, std::uint32_t layer, hooks::TensorView tensor) {
    record(stage, layer == hooks::kNoLayer ? std::nullopt : std::optional<std::uint32_t>(layer), eval, tensor);
}

bool Extractor::wants(hooks::Stage stage) const {
    if (selection_.has(stage)) return true;
    for (const hooks::HookSite& site : selection_.sae_sites)
        if (site.stage == stage) return true;
    if (stage == hooks::Stage::AfterLayer) return !lens_.empty();
    return stage == hooks::Stage::AfterLogits && logits_.has_value();
}

std::vector<const Capture*> Extractor::captures() const {
    std::vector<const Capture*> out;
    for (hooks::Stage stage : kStages) {
        if (!selection_.has(stage)) continue;
        if (is_layer_stage(stage)) {
            for (const Capture& c : layer_stages_[hooks::index_of(stage)]) out.push_back(&c);
        } else {
            out.push_back(&logits_stages_[logits_stage_index(stage)]);
        }
    }
    return out;
}

void Extractor::check_complete() const {
    auto check = [](const Capture& c) {
        if (c.rows_seen != c.positions.size()) {
            throw Error(fmt::format("extraction: {}{} saw {} of its {} positions in the prefill",
                                    hooks::stage_name(c.stage),
                                    c.layer ? fmt::format(" of layer {}", *c.layer) : std::string(), c.rows_seen,
                                    c.positions.size()));
        }
    };
    for (const Capture* c : captures()) check(*c);
    if (logits_) check(*logits_);
    for (const Capture& c : lens_) check(c);
    for (const Capture& c : sae_sites_) check(c);
}

}  // namespace ember::extract
