// The chosen sites of an attribution run (stages x layers x selected prompt positions):
// the gradient summed over the run's evaluations, the activation it was taken at, and how
// both are written (STAGE.layerN.grad.npy / STAGE.layerN.npy, manifest entries).
//
// Rows: one per selected prompt position, ascending (attention_pattern: [positions,
// n_head, prompt positions], [i, h] head h of positions[i]; flat row i * n_head + h in
// memory), as `ember extract` lays out the same stage.
#pragma once

#include <boost/json/array.hpp>

#include <optional>
#include <string_view>
#include <vector>

#include "attribution/gradient_model.hpp"
#include "record/run_directory.hpp"
#include "extract/resolved_selection.hpp"

namespace ember::attribution {

struct SiteArray {
    hooks::Stage stage = hooks::Stage::AfterLayer;
    std::optional<std::uint32_t> layer;  // none for before_logits
    std::size_t cols = 0;
    std::size_t rows_per_position = 1;   // attention_pattern: n_head
    std::vector<float> gradient;         // [positions * rows_per_position, cols]
    std::vector<float> activation;       // the same shape

    std::size_t rows(std::size_t positions) const { return positions * rows_per_position; }
    // The file's shape: {positions, cols}, attention_pattern {positions, n_head, cols}.
    std::vector<std::size_t> shape(std::size_t positions) const {
        if (rows_per_position == 1) return {positions, cols};
        return {positions, rows_per_position, cols};
    }
    std::string file_stem() const;       // "after_layer.layer3", "before_logits"
};

class SiteArrays {
public:
    SiteArrays(extract::Selection selection, const models::ModelConfig& config, std::size_t prompt_tokens);

    // Adds sign * the site's gradient rows to its array, when the site is chosen.
    void add_gradient(const Site& site, double sign);
    // The sae_features site of an SAE read at `layer` (d_sae columns), at the selected positions.
    void add_sae_features(std::uint32_t layer, std::size_t d_sae);
    // Copies the chosen rows of the site's activation, when the site is chosen.
    void take_activation(const Site& site);
    // The index in arrays() of the chosen site, or none.
    std::optional<std::size_t> index_of(hooks::Stage stage, std::optional<std::uint32_t> layer) const;
    // Keeps the whole activation tensor of a chosen site ([T, cols]) in tensors[index_of(site)]
    // (tensors sized as arrays()): integrated gradients' path ends.
    void keep_tensor(const Site& site, std::vector<Matrix>& tensors) const;
    // The chosen rows of `tensor` (a site's tape layout) into `out` (a SiteArray's layout).
    void select_rows(const SiteArray& a, kernels::ConstRows tensor, std::vector<float>& out) const;

    // The chosen rows `positions` of `tensor` (a site's tape layout) into `out`.
    void select_rows(const SiteArray& a, kernels::ConstRows tensor, const std::vector<std::size_t>& positions,
                     std::vector<float>& out) const;

    // Writes both arrays of every site, each file name starting with `prefix`; returns their
    // manifest entries.
    boost::json::array write(record::RunDirectoryWriter& writer, const std::string& prefix, std::string_view metric,
                             double value) const;

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
