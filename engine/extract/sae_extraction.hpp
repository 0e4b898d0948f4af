// SAE features as extraction output (`ember extract --sae DIR`, [[sae]] in an extraction's
// run config; docs/features.md, "Extracting features"; docs/formats.md, "SAE features").
//
// The Extractor keeps each SAE's site rows at the selected positions
// (Selection::sae_sites); after the prefill they are encoded, row by row, into the
// features of those rows, written dense or sparse:
//
//   dense   sae_features.saeI.npy          float32 [R, d_sae]
//   sparse  sae_features.saeI.indptr.npy   int64   [R + 1]   row r's features are
//           sae_features.saeI.indices.npy  int32   [nnz]     indices[indptr[r]:indptr[r+1]]
//           sae_features.saeI.values.npy   float32 [nnz]     (ascending), values likewise
//
// (scipy.sparse.csr_matrix((values, indices, indptr), shape=(R, d_sae)) reads it.) Nothing
// is spliced: an extraction reads the features, it does not edit them (`ember run` with
// [[sae]] does). The manifest lists them under "sae_features" (sae_manifest_entry).
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/run_config.hpp"
#include "extract/dataset_outputs.hpp"
#include "extract/extractor.hpp"
#include "record/inputs_record.hpp"
#include "record/run_directory.hpp"
#include "features/fast_encoder.hpp"
#include "features/sae.hpp"
#include "models/model_config.hpp"
#include "runtime/session.hpp"

namespace ember::extract {

// The run's [[sae]] entries, loaded and checked against the model (their sites must be
// layer stages); each file an SAE was read from appended to `inputs` (role "sae").
std::vector<features::Sae> load_extraction_saes(const config::RunConfig& config, const models::ModelConfig& model,
                                                std::vector<record::InputFile>& inputs);

// The sites the SAEs read, for Selection::sae_sites.
std::vector<hooks::HookSite> sae_sites(const std::vector<features::Sae>& saes);

// The run's encoders: on the fast route features::FastEncoder (parallel, double sums,
// features/fast_encoder.hpp), on the reference route the reference encoder.
class SaeEncoders {
public:
    SaeEncoders(const std::vector<features::Sae>& saes, runtime::Route route, std::size_t threads);
    ~SaeEncoders();
    SaeEncoders(const SaeEncoders&) = delete;
    SaeEncoders& operator=(const SaeEncoders&) = delete;

    // SAE `i`'s features [R, d_sae] of rows x [R, d_in]. Each row's are the same bits
    // whatever other rows it is encoded with (both encoders sum each product in one fixed order).
    std::vector<float> encode(std::size_t i, const float* x, std::size_t R) const;
    // The features of the rows the extractor kept for SAE `i` (Selection::sae_sites[i]).
    std::vector<float> selected_features(std::size_t i, const Extractor& extractor) const;
    // The same for several extractors' rows at once (a dataset batch's samples: one product
    // for all of them), one [rows, d_sae] array per extractor.
    std::vector<std::vector<float>> selected_features(std::size_t i, const std::vector<const Extractor*>& extractors) const;

private:
    const std::vector<features::Sae>& saes_;
    std::vector<std::unique_ptr<features::FastEncoder>> fast_;  // empty on the reference route
    std::unique_ptr<kernels::fast::ThreadPool> pool_;
};

// Rows [R, d_sae] in CSR form, appended: indptr gets R entries (each row's end, counted
// from `base` nonzeros before), indices and values each row's nonzero features ascending.
struct SparseRows {
    std::vector<std::int64_t> indptr;
    std::vector<std::int32_t> indices;
    std::vector<float> values;
};
void append_sparse(const float* dense, std::size_t rows, std::size_t d_sae, std::int64_t base, SparseRows& out);

// "sae_features.sae0.npy" (part empty), "sae_features.sae0.indptr.npy" (part "indptr").
std::string sae_file_name(std::size_t i, std::string_view part = {});

// What the manifest says about SAE `i`: its stage, site and layer, the SAE (name, path,
// format, architecture, widths, the SHA-256 of its weights and of every file read) and
// the layout; `rows` and `nnz` the array's, `rows_meaning` what its rows are.
boost::json::object sae_manifest_entry(std::size_t i, const features::Sae& sae, config::SaeOutput layout,
                                       std::size_t rows, std::size_t nnz, std::string_view rows_meaning);

// A single-prompt extraction's SAE arrays, written; their manifest entries.
boost::json::array write_sae_features(record::RunDirectoryWriter& writer, const Extractor& extractor,
                                      const std::vector<features::Sae>& saes, const SaeEncoders& encoders,
                                      config::SaeOutput layout);

// A dataset run's arrays for the SAEs (dataset_outputs.hpp): per SAE, dense, or indptr,
// indices and values in a row (DatasetRecords appends the three together).
void plan_sae_arrays(const std::vector<features::Sae>& saes, config::SaeOutput layout, std::vector<ArrayPlan>& out);
// CSR's leading indptr entry (0) in each sparse SAE array that has no entry yet: once per
// run, a resumed run keeps its own.
void start_sae_arrays(DatasetOutputs& out);

}  // namespace ember::extract
