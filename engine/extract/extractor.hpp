// Extraction as a hooks::ActiveHooks: during the prefill evaluation of the prompt, copies
// the selected rows of every selected (stage, layer) out of the engine's activations.
// It only reads; the forward pass computes exactly what it computes without it.
//
// Layer stages see every prompt row; the logits stages see the rows whose logits the
// evaluation computes (all of them when Selection::needs_all_logits(), which the caller
// passes to Session::prefill, else the last). Decode evaluations are not recorded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "extract/resolved_selection.hpp"
#include "hooks/hooks.hpp"

namespace ember::extract {

// The rows of one (stage, layer) at the selected positions: [positions.size(), cols],
// except attention_pattern: [positions.size(), n_head, n_tokens], [i, h] holding head h
// of the token at positions[i] (values position-major: row i * n_head + h of the flat
// [rows(), cols] buffer). The hook hands the pattern head-major instead ([n_head * T,
// n_kv], row h * T + t, plugin.h); the Extractor reorders it as it copies.
struct Capture {
    hooks::Stage stage = hooks::Stage::AfterLayer;
    std::optional<std::uint32_t> layer;  // none for the logits stages
    std::vector<std::size_t> positions;  // ascending
    std::size_t cols = 0;
    std::size_t rows_per_position = 1;   // attention_pattern: n_head
    std::vector<float> values;           // row-major
    std::size_t rows() const { return positions.size() * rows_per_position; }
    // The array's shape: {positions, cols}, or attention_pattern's {positions, n_head, cols}.
    std::vector<std::size_t> shape() const {
        if (rows_per_position == 1) return {positions.size(), cols};
        return {positions.size(), rows_per_position, cols};
    }
    std::size_t rows_seen = 0;           // rows copied so far
};

class Extractor final : public hooks::ActiveHooks {
public:
    // With a logit lens, after_layer rows of the chosen layers are kept for it even when
    // after_layer is not a selected stage (lens_sources()).
    explicit Extractor(Selection selection);

    void stage(hooks::Stage stage, const hooks::EvalInfo& eval, std::uint32_t layer, hooks::TensorView tensor) override;
    bool wants(hooks::Stage stage) const override;

    // Throws ember::Error when a selected site was not seen with every selected position
    // (the prefill did not run, or was evaluated without the logits it needed).
    void check_complete() const;

    const Selection& selection() const { return selection_; }
    // Selected captures in stage order, then layer order.
    std::vector<const Capture*> captures() const;
    // The logits dump (Selection::logits): after_logits rows of the last or every position.
    const Capture* logits() const { return logits_ ? &*logits_ : nullptr; }
    // after_layer rows for the logit lens, one per chosen layer (empty without a lens).
    const std::vector<Capture>& lens_sources() const { return lens_; }
    // The rows of Selection::sae_sites[i] at the selected positions ([positions, width]).
    const Capture& sae_site_rows(std::size_t i) const { return sae_sites_.at(i); }

private:
    void record(hooks::Stage stage, std::optional<std::uint32_t> layer, const hooks::EvalInfo& eval,
                hooks::TensorView view);

    Selection selection_;
    std::vector<std::vector<Capture>> layer_stages_;  // [stage id][index in selection_.layers]
    std::vector<Capture> logits_stages_;              // before_logits, after_logits
    std::optional<Capture> logits_;
    std::vector<Capture> lens_;
    std::vector<Capture> sae_sites_;  // one per Selection::sae_sites
};

}  // namespace ember::extract
