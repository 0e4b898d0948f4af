#include "extract/sae_extraction.hpp"

#include <fmt/format.h>

#include <boost/json/value_from.hpp>

#include <algorithm>

#include "common/error.hpp"
#include "kernels/fast/thread_pool.hpp"  // header-only but its constructor (fast builds construct one)
#include "features/sae_loader.hpp"

namespace ember::extract {
namespace {

namespace json = boost::json;

}  // namespace

std::vector<features::Sae> load_extraction_saes(const config::RunConfig& config, const models::ModelConfig& model,
                                                std::vector<record::InputFile>& inputs) {
    std::vector<features::Sae> saes;
    const features::SiteWidths widths = features::site_widths(model);
    for (std::size_t i = 0; i < config.saes.size(); ++i) {
        const config::SaeEntry& entry = config.saes[i];
        features::Sae sae = features::load_sae(entry.path, {entry.site});
        features::fit_sae_to_model(sae, widths);
        if (!sae.site.layer && sae.site.stage != hooks::Stage::BeforeLogits)
            throw Error(fmt::format("{}: an SAE at {} ('{}'): extraction reads SAEs at layer stages and before_logits",
                                    sae.path.string(), hooks::site_text(sae.site), sae.hook_name));
        for (const features::SaeInput& file : sae.inputs) {
            record::InputFile input = record::input_file("sae", file.path);
            input.key = fmt::format("saes[{}]", i);
            inputs.push_back(std::move(input));
        }
        saes.push_back(std::move(sae));
    }
    return saes;
}

std::vector<hooks::HookSite> sae_sites(const std::vector<features::Sae>& saes) {
    std::vector<hooks::HookSite> sites;
    for (const features::Sae& sae : saes) sites.push_back(sae.site);
    return sites;
}

SaeEncoders::SaeEncoders(const std::vector<features::Sae>& saes, runtime::Route route, std::size_t threads) : saes_(saes) {
#ifndef EMBER_NO_FAST_ROUTE
    if (route != runtime::Route::Fast) return;
    for (const features::Sae& sae : saes) fast_.push_back(std::make_unique<features::FastEncoder>(sae));
    pool_ = std::make_unique<kernels::fast::ThreadPool>(static_cast<int>(std::clamp<std::size_t>(threads, 1, 1024)));
#else
    (void)route, (void)threads;
#endif
}

SaeEncoders::~SaeEncoders() = default;

std::vector<float> SaeEncoders::encode(std::size_t i, const float* x, std::size_t R) const {
    const features::Sae& sae = saes_.at(i);
    std::vector<float> features(R * sae.d_sae);  // [R, d_sae]
    if (R == 0) return features;
    features::RowNorm norm;
#ifndef EMBER_NO_FAST_ROUTE
    if (!fast_.empty()) {
        fast_[i]->encode(x, R, features.data(), norm, *pool_);  // each row's bits whatever R (fast_encoder.hpp)
        return features;
    }
#endif
    features::encode(sae, x, R, features.data(), norm);  // the reference: row by row in double
    return features;
}

std::vector<float> SaeEncoders::selected_features(std::size_t i, const Extractor& extractor) const {
    return selected_features(i, std::vector<const Extractor*>{&extractor}).front();
}

std::vector<std::vector<float>> SaeEncoders::selected_features(std::size_t i,
                                                               const std::vector<const Extractor*>& extractors) const {
    const features::Sae& sae = saes_.at(i);
    std::vector<float> rows;  // every extractor's rows, [sum R, d_in]
    for (const Extractor* x : extractors) {
        const Capture& c = x->sae_site_rows(i);  // [R, d_in]
        if (c.rows() > 0 && c.cols != sae.d_in)
            throw Error(fmt::format("SAE '{}' at {}: the site is {} wide, the SAE reads {}", sae.name,
                                    hooks::site_text(sae.site), c.cols, sae.d_in));
        rows.insert(rows.end(), c.values.begin(), c.values.end());
    }
    const std::vector<float> all = encode(i, rows.data(), rows.size() / sae.d_in);
    std::vector<std::vector<float>> out;
    std::size_t at = 0;
    for (const Extractor* x : extractors) {
        const std::size_t n = x->sae_site_rows(i).rows() * sae.d_sae;
        out.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(at), all.begin() + static_cast<std::ptrdiff_t>(at + n));
        at += n;
    }
    return out;
}

void append_sparse(const float* dense, std::size_t rows, std::size_t d_sae, std::int64_t base, SparseRows& out) {
    std::int64_t nnz = base;
    for (std::size_t r = 0; r < rows; ++r) {
        const float* row = dense + r * d_sae;
        for (std::size_t j = 0; j < d_sae; ++j) {
            if (row[j] == 0.0f) continue;
            out.indices.push_back(static_cast<std::int32_t>(j));
            out.values.push_back(row[j]);
            ++nnz;
        }
        out.indptr.push_back(nnz);
    }
}

std::string sae_file_name(std::size_t i, std::string_view part) {
    return part.empty() ? fmt::format("sae_features.sae{}.npy", i) : fmt::format("sae_features.sae{}.{}.npy", i, part);
}

json::object sae_manifest_entry(std::size_t i, const features::Sae& sae, config::SaeOutput layout, std::size_t rows,
                                std::size_t nnz, std::string_view rows_meaning) {
    json::array files;
    for (const features::SaeInput& f : sae.inputs) files.push_back({{"path", f.path.string()}, {"sha256", f.sha256}});
    json::object record{{"name", sae.name},
                        {"path", sae.path.string()},
                        {"format", sae.format},
                        {"architecture", features::architecture_name(sae.architecture)},
                        {"transcoder", sae.is_transcoder()},
                        {"hook_name", sae.hook_name},
                        {"d_in", sae.d_in},
                        {"d_sae", sae.d_sae},
                        // the weights file's: the last one read (cfg.json comes first)
                        {"sha256", sae.inputs.empty() ? json::value(nullptr) : json::value(sae.inputs.back().sha256)},
                        {"files", std::move(files)}};
    json::object entry{{"stage", hooks::stage_name(hooks::Stage::SaeFeatures)},
                       {"layer", sae.site.layer ? json::value(*sae.site.layer) : json::value(nullptr)},
                       {"site", hooks::site_text(sae.site)},
                       {"index", i},
                       {"sae", std::move(record)},
                       {"phase", "prefill"},
                       {"shape", {rows, sae.d_sae}},
                       {"rows", rows_meaning},
                       {"columns", "the SAE's features 0 .. d_sae - 1, as its encoder computes them from the site"}};
    if (layout == config::SaeOutput::Dense) {
        entry["layout"] = "dense";
        entry["file"] = sae_file_name(i);
        entry["dtype"] = "float32";
    } else {
        entry["layout"] = "sparse";
        entry["format"] = "csr";
        entry["nnz"] = nnz;
        entry["files"] = {{"indptr", sae_file_name(i, "indptr")},
                          {"indices", sae_file_name(i, "indices")},
                          {"values", sae_file_name(i, "values")}};
        entry["dtypes"] = {{"indptr", "int64"}, {"indices", "int32"}, {"values", "float32"}};
        entry["meaning"] = "row r's nonzero features are indices[indptr[r]:indptr[r + 1]] (ascending) with "
                           "values[indptr[r]:indptr[r + 1]]; indptr[0] = 0, indptr[R] = nnz";
    }
    return entry;
}

json::array write_sae_features(record::RunDirectoryWriter& writer, const Extractor& extractor,
                               const std::vector<features::Sae>& saes, const SaeEncoders& encoders,
                               config::SaeOutput layout) {
    extractor.check_complete();
    json::array entries;
    const std::size_t R = extractor.selection().positions.size();
    for (std::size_t i = 0; i < saes.size(); ++i) {
        const features::Sae& sae = saes[i];
        const std::vector<float> dense = encoders.selected_features(i, extractor);
        std::size_t nnz = 0;
        if (layout == config::SaeOutput::Dense) {
            writer.write_npy_f32(sae_file_name(i), dense.data(), {R, sae.d_sae});
        } else {
            SparseRows sparse;
            sparse.indptr.push_back(0);
            append_sparse(dense.data(), R, sae.d_sae, 0, sparse);
            nnz = sparse.values.size();
            writer.write_npy_i64(sae_file_name(i, "indptr"), sparse.indptr.data(), {sparse.indptr.size()});
            writer.write_npy_i32(sae_file_name(i, "indices"), sparse.indices.data(), {nnz});
            writer.write_npy_f32(sae_file_name(i, "values"), sparse.values.data(), {nnz});
        }
        json::object entry = sae_manifest_entry(i, sae, layout, R, nnz, "prompt positions, in the order of 'positions'");
        entry["positions"] = json::value_from(extractor.selection().positions);
        entries.push_back(std::move(entry));
    }
    return entries;
}

void plan_sae_arrays(const std::vector<features::Sae>& saes, config::SaeOutput layout, std::vector<ArrayPlan>& out) {
    for (std::size_t i = 0; i < saes.size(); ++i) {
        const hooks::HookSite& site = saes[i].site;
        if (layout == config::SaeOutput::Dense) {
            out.push_back({sae_file_name(i), ArrayPlan::Source::SaeDense, site.stage, site.layer, "<f4", saes[i].d_sae, 1, i});
            continue;
        }
        out.push_back({sae_file_name(i, "indptr"), ArrayPlan::Source::SaeIndptr, site.stage, site.layer, "<i8", 0, 1, i});
        out.push_back({sae_file_name(i, "indices"), ArrayPlan::Source::SaeIndices, site.stage, site.layer, "<i4", 0, 1, i});
        out.push_back({sae_file_name(i, "values"), ArrayPlan::Source::SaeValues, site.stage, site.layer, "<f4", 0, 1, i});
    }
}

void start_sae_arrays(DatasetOutputs& out) {
    for (std::size_t i = 0; i < out.plans().size(); ++i) {
        if (out.plans()[i].source != ArrayPlan::Source::SaeIndptr || out.array(i).rows() > 0) continue;
        const std::int64_t zero = 0;  // CSR's leading indptr entry, once per run (a resumed run has it)
        out.array(i).append(&zero, 1);
    }
}

}  // namespace ember::extract
