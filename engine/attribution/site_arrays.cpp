#include "attribution/site_arrays.hpp"

#include <fmt/format.h>

#include <boost/json.hpp>

#include "record/manifest.hpp"

namespace ember::attribution {

namespace json = boost::json;
using hooks::Stage;

std::string SiteArray::file_stem() const {
    return layer ? fmt::format("{}.layer{}", hooks::stage_name(stage), *layer) : std::string(hooks::stage_name(stage));
}

SiteArrays::SiteArrays(extract::Selection selection, const models::ModelConfig& c, std::size_t prompt_tokens)
    : selection_(std::move(selection)), prompt_tokens_(prompt_tokens) {
    const std::size_t n = selection_.positions.size();
    for (Stage stage : extract::kStages) {
        if (!selection_.has(stage)) continue;
        if (!hooks::is_layer_stage(stage)) {
            arrays_.push_back({stage, std::nullopt, c.n_embd, 1, std::vector<float>(n * c.n_embd), {}});
            continue;
        }
        for (std::uint32_t l : selection_.layers) {
            const models::LayerConfig& L = c.layers[l];
            SiteArray a{stage, l, c.n_embd, 1, {}, {}};
            if (stage == Stage::HeadOutputs) a.cols = std::size_t{L.n_head} * L.head_dim;
            if (stage == Stage::MlpActivation) a.cols = L.n_ff;
            if (stage == Stage::AttentionPattern) {
                a.cols = prompt_tokens;
                a.rows_per_position = L.n_head;
            }
            a.gradient.assign(a.rows(n) * a.cols, 0.0f);
            arrays_.push_back(std::move(a));
        }
    }
}

std::optional<std::size_t> SiteArrays::index_of(Stage stage, std::optional<std::uint32_t> layer) const {
    for (std::size_t i = 0; i < arrays_.size(); ++i)
        if (arrays_[i].stage == stage && arrays_[i].layer == layer) return i;
    return std::nullopt;
}

SiteArray* SiteArrays::find(Stage stage, std::optional<std::uint32_t> layer) {
    const std::optional<std::size_t> i = index_of(stage, layer);
    return i ? &arrays_[*i] : nullptr;
}

void SiteArrays::select_rows(const SiteArray& a, kernels::ConstRows tensor, std::vector<float>& out) const {
    select_rows(a, tensor, selection_.positions, out);
}

void SiteArrays::select_rows(const SiteArray& a, kernels::ConstRows tensor, const std::vector<std::size_t>& positions,
                             std::vector<float>& out) const {
    out.assign(a.rows(positions.size()) * a.cols, 0.0f);
    if (a.stage == Stage::AttentionPattern) {
        const std::size_t H = a.rows_per_position;
        const std::size_t T = tensor.rows / H;  // the evaluated rows
        for (std::size_t i = 0; i < positions.size(); ++i)
            for (std::size_t h = 0; h < H; ++h)
                std::copy_n(tensor.row(h * T + positions[i]), a.cols, out.data() + (i * H + h) * a.cols);
        return;
    }
    for (std::size_t i = 0; i < positions.size(); ++i) std::copy_n(tensor.row(positions[i]), a.cols, out.data() + i * a.cols);
}

void SiteArrays::add_gradient(const Site& site, double sign) {
    SiteArray* a = find(site.stage, site.layer);
    if (!a) return;
    std::vector<float> rows;
    select_rows(*a, site.gradient, rows);
    for (std::size_t i = 0; i < rows.size(); ++i) a->gradient[i] += static_cast<float>(sign * rows[i]);
}

void SiteArrays::add_sae_features(std::uint32_t layer, std::size_t d_sae) {
    SiteArray a{Stage::SaeFeatures, layer, d_sae, 1, {}, {}};
    a.gradient.assign(a.rows(selection_.positions.size()) * a.cols, 0.0f);
    arrays_.push_back(std::move(a));
}

void SiteArrays::take_activation(const Site& site) {
    if (SiteArray* a = find(site.stage, site.layer)) select_rows(*a, site.activation, a->activation);
}

void SiteArrays::keep_tensor(const Site& site, std::vector<Matrix>& tensors) const {
    const std::optional<std::size_t> i = index_of(site.stage, site.layer);
    if (!i) return;
    const kernels::ConstRows t = site.activation;
    tensors[*i] = {t.rows, t.cols, std::vector<float>(t.data, t.data + t.rows * t.cols)};
}

json::array SiteArrays::write(record::RunDirectoryWriter& writer, const std::string& prefix, std::string_view metric,
                              double value) const {
    json::array entries;
    const std::size_t n = selection_.positions.size();
    for (const SiteArray& a : arrays_) {
        const std::vector<std::size_t> shape = a.shape(n);
        for (const bool gradient : {true, false}) {
            const std::vector<float>& values = gradient ? a.gradient : a.activation;
            const std::string name = prefix + a.file_stem() + (gradient ? ".grad.npy" : ".npy");
            const record::FileRecord file = writer.write_npy_f32(name, values.data(), shape);
            json::object e{
                {"file", file.name},
                {"kind", gradient ? "gradient" : "activation"},
                {"stage", hooks::stage_name(a.stage)},
                {"layer", a.layer ? json::value(*a.layer) : json::value(nullptr)},
                {"phase", "prefill"},
                {"positions", json::value_from(selection_.positions)},
                {"shape", json::value_from(shape)},
                {"dtype", "float32"},
                {"rows", a.stage == Stage::AttentionPattern
                             ? "prompt positions, in the order of 'positions': [i, h] is head h of positions[i]"
                             : "prompt positions, in the order of 'positions'"},
                {"columns", a.stage == Stage::AttentionPattern ? "the prompt's positions 0 .. n_tokens - 1 (0 where masked)"
                            : a.stage == Stage::SaeFeatures    ? "the SAE's features (d_sae)"
                                                               : "the stage's features"},
                {"values_sha256", record::values_sha256(values)},
            };
            if (a.stage == Stage::AttentionPattern) e["layout"] = "[positions, n_head, n_kv]";
            if (gradient) {
                e["metric"] = metric;
                e["metric_value"] = value;
                e["of"] = prefix + a.file_stem() + ".npy";
            }
            entries.push_back(std::move(e));
        }
    }
    return entries;
}

}  // namespace ember::attribution
