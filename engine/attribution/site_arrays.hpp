// The chosen sites of an attribution run (stages x layers x selected prompt positions):
// the gradient summed over the run's evaluations, the activation it was taken at, and how
// both are written (STAGE.layerN.grad.npy / STAGE.layerN.npy, manifest entries).
//
// Rows: one per selected prompt position, ascending (attention_pattern: n_head rows per
// position, row i * n_head + h for head h, and the prompt's positions as columns), as
// `ember extract` lays out the same stage.
#pragma once

#include <boost/json/array.hpp>

#include <optional>
#include <string_view>
#include <vector>

#include "attribution/gradient_model.hpp"
#include "extract/run_directory.hpp"
#include "extract/selection.hpp"

namespace ember::attribution {

struct SiteArray {
    hooks::Stage stage = hooks::Stage::AfterLayer;
    std::optional<std::uint32_t> layer;  // none for before_logits
    std::size_t cols = 0;
    std::size_t rows_per_position = 1;   // attention_pattern: n_head
    std::vector<float> gradient;         // [positions * rows_per_position, cols]
    std::vector<float> activation;       // the same shape

    std::size_t rows(std::size_t positions) const { return positions * rows_per_position; }
    std::string file_stem() const;       // "after_layer.layer3", "before_logits"
};

// The tape's tensor at a site: [T, cols] (attention_pattern [H * T, T], row h * T + t).
kernels::ConstRows site_activation(const Tape& tape, hooks::Stage stage, std::optional<std::uint32_t> layer);

class SiteArrays {
public:
    SiteArrays(extract::Selection selection, const models::ModelConfig& config, std::size_t prompt_tokens);

    // Adds sign * the site's gradient rows to its array, when the site is chosen.
    void add_gradient(const Site& site, double sign);
    // Copies the chosen rows of every site's activation from the tape.
    void take_activations(const Tape& tape);
    // The chosen rows of `tensor` (a site's tape layout) into `out` (a SiteArray's layout).
    void select_rows(const SiteArray& a, kernels::ConstRows tensor, std::vector<float>& out) const;

    // Writes both arrays of every site; returns their manifest entries.
    boost::json::array write(extract::RunDirectoryWriter& writer, std::string_view metric, double value) const;

    const std::vector<SiteArray>& arrays() const { return arrays_; }
    const extract::Selection& selection() const { return selection_; }
    std::size_t prompt_tokens() const { return prompt_tokens_; }

private:
    SiteArray* find(hooks::Stage stage, std::optional<std::uint32_t> layer);

    extract::Selection selection_;
    std::size_t prompt_tokens_ = 0;
    std::vector<SiteArray> arrays_;
};

}  // namespace ember::attribution
