#include "attribution/atp.hpp"

#include <fmt/format.h>

#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "attribution/sae_gradient.hpp"
#include "common/error.hpp"
#include "features/sae_splicer.hpp"
#include "runtime/prompt.hpp"
#include "runtime/session.hpp"

namespace ember::attribution {
namespace {

namespace json = boost::json;
using hooks::Stage;

// One unit of one site: its estimate and which columns of which array row it covers.
struct Unit {
    const SiteArray* array = nullptr;
    std::size_t position_index = 0;  // into the selection's positions
    std::size_t index = 0;           // head, neuron, or 0 (the whole row)
    double estimate = 0.0;
    std::optional<double> effect;    // measured by --verify-top
};

const char* unit_kind(Stage s) {
    switch (s) {
        case Stage::HeadOutputs:
        case Stage::AttentionPattern: return "head";
        case Stage::MlpActivation: return "neuron";
        case Stage::SaeFeatures: return "feature";
        default: return "position";
    }
}

std::size_t units_per_position(const SiteArray& a, const models::ModelConfig& c) {
    if (a.stage == Stage::HeadOutputs) return c.layers[*a.layer].n_head;
    if (a.stage == Stage::AttentionPattern) return a.rows_per_position;
    if (a.stage == Stage::MlpActivation || a.stage == Stage::SaeFeatures) return a.cols;
    return 1;
}

// [first, first + count) of the site's tensor row a unit covers (head_outputs: the head's D values).
std::pair<std::size_t, std::size_t> unit_columns(const Unit& u, const models::ModelConfig& c) {
    const SiteArray& a = *u.array;
    if (a.stage == Stage::HeadOutputs) {
        const std::size_t D = c.layers[*a.layer].head_dim;
        return {u.index * D, D};
    }
    if (a.stage == Stage::MlpActivation || a.stage == Stage::SaeFeatures) return {u.index, 1};
    return {0, a.cols};
}

// Patches one unit with the corrupted run's values on the reference route.
class PatchUnit final : public hooks::ActiveHooks {
public:
    PatchUnit(Stage stage, std::optional<std::uint32_t> layer, std::size_t row, std::size_t first, const float* values,
              std::size_t count)
        : stage_(stage), layer_(layer.value_or(hooks::kNoLayer)), row_(row), first_(first), values_(values), count_(count) {}
    void stage(Stage stage, const hooks::EvalInfo&, std::uint32_t layer, hooks::TensorView t) override {
        if (stage != stage_ || layer != layer_) return;
        std::copy_n(values_, count_, t.data + row_ * t.cols + first_);
    }
    bool wants(Stage stage) const override { return stage == stage_; }

private:
    Stage stage_;
    std::uint32_t layer_;
    std::size_t row_, first_;
    const float* values_;
    std::size_t count_;
};

// The metric over every run on the reference route, with `hooks` (or none), behind the
// SAE's splice when one is loaded (unedited, it changes no bit).
double route_metric(const runtime::LoadedModel& model, const std::vector<Continuation>& runs, hooks::ActiveHooks* hooks,
                    std::size_t threads, const features::Sae* sae) {
    std::optional<features::SaeSplicer> splicer;
    if (sae) {
        splicer.emplace(std::vector<features::SplicedSae>{{sae, true}}, hooks);
        hooks = &*splicer;
    }
    double total = 0.0;
    for (const Continuation& run : runs) {
        runtime::SessionOptions o;
        o.route = runtime::Route::Reference;
        o.threads = threads;
        o.max_batch = run.evaluated.ids.size();
        o.all_logits = true;
        o.context_length = std::max<std::size_t>(run.evaluated.ids.size(), 1);
        runtime::Session session(*model.model, o);
        const kernels::ConstRows logits = session.prefill(run.evaluated.ids, true, hooks);
        std::vector<float> rows;
        for (const MetricTerm& t : run.metric.terms)
            rows.insert(rows.end(), logits.row(t.row), logits.row(t.row) + logits.cols);
        total += run.sign * run.metric.evaluate(kernels::ConstRows(rows.data(), run.metric.terms.size(), logits.cols), nullptr);
    }
    return total;
}

// path_gradient at the sae_features site: the features moved along the path by the splice
// (sae_gradient.hpp), f' = f + alpha (f_corrupt - f) on the prompt's rows, f = encode(site)
// (the clean features: the site upstream is the clean run's); the features' gradient from
// the site's, with the clean site's out_scale. A transcoder's delta waits for its output
// site, and the gradient is read there.
std::vector<float> sae_path_gradient(const GradientModel& gm, const std::vector<Continuation>& runs,
                                     const SiteArrays& arrays, const SiteArray& a, const features::Sae& sae,
                                     const Matrix& corrupt, std::size_t steps, tbb::task_arena& arena) {
    const hooks::HookSite& in = sae.site;
    const hooks::HookSite& out = sae.output_site ? *sae.output_site : sae.site;
    std::vector<double> sum(a.gradient.size(), 0.0);
    std::vector<float> rows;
    for (std::size_t k = 0; k < steps; ++k) {
        const double alpha = (static_cast<double>(k) + 0.5) / static_cast<double>(steps);
        features::RowNorm norm;  // the site's normalization (the clean run's: the same in every call)
        std::vector<float> delta;  // [T, d_out] what the splice adds at the output site
        const SiteEdit edit = [&](Stage stage, std::uint32_t l, kernels::Rows t) {
            if (sae.is_transcoder() && stage == out.stage && l == *out.layer) {
                for (std::size_t r = 0; r < t.rows; ++r)
                    for (std::size_t c = 0; c < t.cols; ++c) t.row(r)[c] += delta[r * t.cols + c];
                return;
            }
            if (stage != in.stage || l != *in.layer) return;
            std::vector<float> x(t.rows * t.cols);
            for (std::size_t r = 0; r < t.rows; ++r) std::copy_n(t.row(r), t.cols, x.data() + r * t.cols);
            std::vector<float> f(t.rows * sae.d_sae);
            features::RowNorm n;
            features::encode(sae, x.data(), t.rows, f.data(), n);
            std::vector<float> edited = f;
            for (std::size_t i = 0; i < corrupt.rows * sae.d_sae; ++i)
                edited[i] = static_cast<float>(f[i] + alpha * (corrupt.values[i] - f[i]));
            delta.assign(t.rows * sae.d_out, 0.0f);
            features::splice_delta(sae, f.data(), edited.data(), t.rows, n, delta.data());
            norm = std::move(n);
            if (sae.is_transcoder()) return;
            for (std::size_t r = 0; r < t.rows; ++r)
                for (std::size_t c = 0; c < t.cols; ++c) t.row(r)[c] += delta[r * t.cols + c];
        };
        for (const Continuation& run : runs) {
            arena.execute([&] {
                const Tape tape = gm.forward(run.evaluated.ids, run.metric.rows(), edit);
                Matrix dlogits;
                run.metric.evaluate(tape.logits.view(), &dlogits);
                gm.backward(tape, dlogits.view(), [&](const Site& site) {
                    if (site.stage != out.stage || site.layer != out.layer) return;
                    const Matrix g = feature_gradient(sae, site.gradient, norm.out_scale);
                    arrays.select_rows(a, g.view(), rows);
                    for (std::size_t i = 0; i < rows.size(); ++i) sum[i] += run.sign * rows[i];
                });
            });
        }
    }
    std::vector<float> mean(sum.size());
    for (std::size_t i = 0; i < sum.size(); ++i) mean[i] = static_cast<float>(sum[i] / static_cast<double>(steps));
    return mean;
}

// The mean gradient at site `a` along the path from the clean activation to the corrupted
// one (every prompt row of the site), in the SiteArray's layout.
std::vector<float> path_gradient(const GradientModel& gm, const std::vector<Continuation>& runs, const SiteArrays& arrays,
                                 const SiteArray& a, const Matrix& clean, const Matrix& corrupt, std::size_t steps,
                                 tbb::task_arena& arena) {
    if (a.stage == Stage::AttentionPattern || a.stage == Stage::BeforeLogits)
        throw Error(fmt::format("--method ig interpolates a site through an edit of the forward pass; {} cannot be "
                                "edited there: choose other stages",
                                hooks::stage_name(a.stage)));
    const kernels::ConstRows from = clean.view();   // [T, cols]
    const kernels::ConstRows to = corrupt.view();   // [P, cols]
    std::vector<double> sum(a.gradient.size(), 0.0);
    std::vector<float> rows;
    for (std::size_t k = 0; k < steps; ++k) {
        const double alpha = (static_cast<double>(k) + 0.5) / static_cast<double>(steps);
        const SiteEdit edit = [&](Stage stage, std::uint32_t layer, kernels::Rows t) {
            if (stage != a.stage || layer != *a.layer) return;
            for (std::size_t row = 0; row < to.rows; ++row)
                for (std::size_t col = 0; col < t.cols; ++col)
                    t.row(row)[col] = static_cast<float>(from.row(row)[col] + alpha * (to.row(row)[col] - from.row(row)[col]));
        };
        for (const Continuation& run : runs) {
            arena.execute([&] {
                const Tape tape = gm.forward(run.evaluated.ids, run.metric.rows(), edit);
                Matrix dlogits;
                run.metric.evaluate(tape.logits.view(), &dlogits);
                gm.backward(tape, dlogits.view(), [&](const Site& site) {
                    if (site.stage != a.stage || site.layer != a.layer) return;
                    arrays.select_rows(a, site.gradient, rows);
                    for (std::size_t i = 0; i < rows.size(); ++i) sum[i] += run.sign * rows[i];
                });
            });
        }
    }
    std::vector<float> mean(sum.size());
    for (std::size_t i = 0; i < sum.size(); ++i) mean[i] = static_cast<float>(sum[i] / static_cast<double>(steps));
    return mean;
}

std::vector<double> ranks(const std::vector<double>& v) {
    std::vector<std::size_t> order(v.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
    std::vector<double> r(v.size());
    for (std::size_t i = 0; i < order.size();) {
        std::size_t j = i;
        while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
        for (std::size_t k = i; k <= j; ++k) r[order[k]] = (static_cast<double>(i) + static_cast<double>(j)) / 2.0;
        i = j + 1;
    }
    return r;
}

}  // namespace

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size() || a.size() < 2) return std::numeric_limits<double>::quiet_NaN();
    const std::vector<double> ra = ranks(a), rb = ranks(b);
    const double n = static_cast<double>(a.size());
    const double mean = (n - 1) / 2.0;
    double sab = 0, saa = 0, sbb = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        sab += (ra[i] - mean) * (rb[i] - mean);
        saa += (ra[i] - mean) * (ra[i] - mean);
        sbb += (rb[i] - mean) * (rb[i] - mean);
    }
    if (saa == 0 || sbb == 0) return std::numeric_limits<double>::quiet_NaN();
    return sab / std::sqrt(saa * sbb);
}

CorruptPrompt aligned_corrupt_prompt(const tokenizer::Tokenizer& tok, const AttributeRequest& r, std::size_t prompt_tokens,
                                     const extract::Selection& selection) {
    CorruptPrompt corrupt{r.corrupt_ids ? runtime::encode_ids(tok, *r.corrupt_ids, "--corrupt-ids")
                                        : runtime::encode_prompt(tok, *r.corrupt, r.add_bos, r.special),
                          {}};
    if (!r.corrupt_select) {
        if (corrupt.encoded.ids.size() != prompt_tokens)
            throw Error(fmt::format("--corrupt: the corrupted prompt is {} tokens and the clean prompt {}: attribution "
                                    "patching puts position p of one into position p of the other, so they must align "
                                    "(give a corrupted prompt of {} tokens, or corrupt_select: a spec choosing its rows)",
                                    corrupt.encoded.ids.size(), prompt_tokens, prompt_tokens));
        corrupt.positions = selection.positions;
        return corrupt;
    }
    // By text, as patch's source_select / target_select: the k-th selected row onto the k-th.
    if (selection.has(Stage::AttentionPattern))
        throw Error("corrupt_select: attention_pattern's columns are the prompt's positions, which differ between two "
                    "prompts aligned by text; choose other stages, or align the prompts token for token");
    if (r.integrated_gradients)
        throw Error("corrupt_select: --method ig interpolates whole sites between prompts of the same length; align the "
                    "prompts token for token, or use --method atp");
    const selection::Resolved rows = extract::select_positions(*r.corrupt_select, corrupt.encoded.text, corrupt.encoded.tokens);
    if (rows.rows.size() != selection.positions.size())
        throw Error(fmt::format("corrupt_select '{}' selects {} row(s) of the corrupted prompt{}, but the selection '{}' "
                                "selects {} row(s) of the clean prompt: attribution patching puts the k-th of one onto "
                                "the k-th of the other, so it needs the same number on both sides",
                                r.corrupt_select->to_string(), rows.rows.size(),
                                rows.rows.empty() ? " (" + rows.why_empty + ")" : std::string(), selection.spec,
                                selection.positions.size()));
    for (const selection::Selected& row : rows.rows) corrupt.positions.push_back(row.position);
    return corrupt;
}

json::value write_attribution_patching(record::RunDirectoryWriter& writer, const std::string& prefix,
                                       const runtime::LoadedModel& model, const GradientModel& gm,
                                       const AttributeRequest& r, const std::vector<Continuation>& runs,
                                       const CorruptPrompt& corrupt, const SiteArrays& arrays,
                                       const std::vector<Matrix>& clean_tensors, double clean_metric,
                                       tbb::task_arena& arena) {
    const models::ModelConfig& c = gm.config();
    // Per site: the corrupted run's chosen rows (and, for integrated gradients, its whole tensor).
    std::vector<std::vector<float>> corrupt_rows(arrays.arrays().size());
    std::vector<Matrix> corrupt_tensors(clean_tensors.size());
    arena.execute([&] {
        gm.forward(corrupt.encoded.ids, {}, {}, with_sae_features(r.sae, [&](const Site& site) {
            const std::optional<std::size_t> s = arrays.index_of(site.stage, site.layer);
            if (!s) return;
            arrays.select_rows(arrays.arrays()[*s], site.activation, corrupt.positions, corrupt_rows[*s]);
            if (!corrupt_tensors.empty()) arrays.keep_tensor(site, corrupt_tensors);
        }));
    });

    // Per site: the estimate of every unit.
    const std::vector<std::size_t>& positions = arrays.selection().positions;
    std::vector<Unit> units;
    json::array files;
    for (std::size_t s = 0; s < arrays.arrays().size(); ++s) {
        const SiteArray& a = arrays.arrays()[s];
        const std::vector<float> gradient =
            !r.integrated_gradients ? a.gradient
            : a.stage == Stage::SaeFeatures
                ? sae_path_gradient(gm, runs, arrays, a, *r.sae, corrupt_tensors[s], r.ig_steps, arena)
                : path_gradient(gm, runs, arrays, a, clean_tensors[s], corrupt_tensors[s], r.ig_steps, arena);
        const std::size_t per = units_per_position(a, c);
        std::vector<float> estimates(positions.size() * per);
        for (std::size_t i = 0; i < positions.size(); ++i) {
            for (std::size_t u = 0; u < per; ++u) {
                Unit unit{&a, i, u, 0.0, std::nullopt};
                // attention_pattern: unit u is array row i * H + u; the others: row i, some columns.
                const std::size_t row = a.stage == Stage::AttentionPattern ? i * a.rows_per_position + u : i;
                const auto [first, count] = a.stage == Stage::AttentionPattern ? std::pair<std::size_t, std::size_t>{0, a.cols}
                                                                                 : unit_columns(unit, c);
                double e = 0.0;
                for (std::size_t k = first; k < first + count; ++k) {
                    const std::size_t at = row * a.cols + k;
                    e += (static_cast<double>(corrupt_rows[s][at]) - a.activation[at]) * gradient[at];
                }
                unit.estimate = e;
                estimates[i * per + u] = static_cast<float>(e);
                units.push_back(unit);
            }
        }
        const record::FileRecord f = writer.write_npy_f32(prefix + a.file_stem() + ".atp.npy", estimates.data(), {positions.size(), per});
        files.push_back({{"file", f.name},
                         {"kind", "atp_estimate"},
                         {"stage", hooks::stage_name(a.stage)},
                         {"layer", a.layer ? json::value(*a.layer) : json::value(nullptr)},
                         {"shape", {positions.size(), per}},
                         {"rows", "prompt positions, in the order of 'positions'"},
                         {"columns", fmt::format("one per {}", unit_kind(a.stage))}});
    }
    std::stable_sort(units.begin(), units.end(), [](const Unit& a, const Unit& b) { return std::abs(a.estimate) > std::abs(b.estimate); });

    // --verify-top K: the K top units a hook can write (attention_pattern is a read-only copy).
    std::vector<double> verified_estimates, verified_effects;
    double route_clean = std::numeric_limits<double>::quiet_NaN();
    if (r.verify_top > 0) {
        route_clean = route_metric(model, runs, nullptr, r.threads, r.sae);
        std::size_t done = 0;
        for (Unit& u : units) {
            if (done == r.verify_top) break;
            if (u.array->stage == Stage::AttentionPattern) continue;
            const std::size_t s = static_cast<std::size_t>(u.array - arrays.arrays().data());
            const auto [first, count] = unit_columns(u, c);
            PatchUnit patch(u.array->stage, u.array->layer, positions[u.position_index], first,
                            corrupt_rows[s].data() + u.position_index * u.array->cols + first, count);
            u.effect = route_metric(model, runs, &patch, r.threads, r.sae) - route_clean;
            verified_estimates.push_back(u.estimate);
            verified_effects.push_back(*u.effect);
            ++done;
        }
    }

    std::string lines;
    for (std::size_t rank = 0; rank < units.size(); ++rank) {
        const Unit& u = units[rank];
        const std::size_t position = positions[u.position_index];
        json::object line{{"rank", rank + 1},
                          {"stage", hooks::stage_name(u.array->stage)},
                          {"layer", u.array->layer ? json::value(*u.array->layer) : json::value(nullptr)},
                          {"position", position},
                          {"unit", unit_kind(u.array->stage)},
                          {"index", u.index},
                          {"estimate", u.estimate}};
        if (u.effect) line["effect"] = *u.effect;
        lines += json::serialize(line) + "\n";
    }
    const record::FileRecord table = writer.write_text(prefix + "attribution.jsonl", lines);
    const double rho = spearman(verified_estimates, verified_effects);
    return json::object{
        {"method", r.integrated_gradients ? "ig" : "atp"},
        {"ig_steps", r.integrated_gradients ? json::value(r.ig_steps) : json::value(nullptr)},
        {"corrupt_prompt", corrupt.encoded.text},  // --corrupt-ids: the ids' pieces joined
        {"corrupt_token_ids", json::value_from(corrupt.encoded.ids)},
        {"corrupt_select", r.corrupt_select ? json::value(r.corrupt_select->to_string()) : json::value(nullptr)},
        {"corrupt_positions", json::value_from(corrupt.positions)},
        {"estimate", r.integrated_gradients ? "(a_corrupt - a_clean) . mean over the path's midpoints of dM/da, the whole "
                                              "site interpolated, summed over the unit's columns"
                                            : "(a_corrupt - a_clean) . dM/da, summed over the unit's columns"},
        {"table", table.name},
        {"units", units.size()},
        {"arrays", std::move(files)},
        {"verified", verified_effects.size()},
        {"clean_metric", clean_metric},
        {"route_clean_metric", std::isnan(route_clean) ? json::value(nullptr) : json::value(route_clean)},
        {"spearman_verified", std::isnan(rho) ? json::value(nullptr) : json::value(rho)},
    };
}

}  // namespace ember::attribution
