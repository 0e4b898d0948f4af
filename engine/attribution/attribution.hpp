// `ember attribute`'s run (docs/attribution.md): a prompt and a metric on its
// continuation, one forward and one backward pass on the reference route, and per chosen
// stage, layer and prompt position the gradient of the metric and the activation it was
// taken at, written as .npy files into a run directory with a sealed manifest
// (record/run_directory). With a corrupted prompt, the attribution-patching estimate
// (a_corrupt - a_clean) . grad of every site, ranked (atp.hpp).
#pragma once

#include <boost/json/object.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "attribution/gradient_model.hpp"
#include "attribution/metric.hpp"
#include "config/run_config.hpp"
#include "record/manifest.hpp"
#include "extract/resolved_selection.hpp"
#include "features/sae.hpp"
#include "runtime/loaded_model.hpp"
#include "runtime/prompt.hpp"

namespace ember::attribution {

// The stages a gradient is defined at, in firing order (after_logits is the metric's own
// input: its gradient is the metric's derivative, metric.hpp).
bool has_gradient(hooks::Stage stage);

struct AttributeRequest {
    std::string prompt;
    // --ids: the prompt as token ids (checked against the vocabulary, no BOS added; its
    // text the ids' pieces joined). The target and contrast are tokenized as the
    // continuation of that text and appended (extract::encode_with_target).
    std::optional<std::vector<std::int32_t>> ids;
    config::AddBos add_bos = config::AddBos::Auto;
    bool special = false;  // --special: special-token texts in prompt, target and corrupt parsed
    MetricKind metric = MetricKind::LogProb;
    std::string target;
    std::optional<std::string> contrast;  // logit-diff's B
    config::OutputSection output;         // stages, layers, positions / select; dir, overwrite
    std::optional<std::string> corrupt;   // attribution patching against this prompt
    std::optional<std::vector<std::int32_t>> corrupt_ids;  // --corrupt-ids: the corrupted prompt as token ids
    bool has_corrupt() const { return corrupt || corrupt_ids; }
    // The rows of the corrupted prompt that patch the selected rows of the clean one, the
    // k-th onto the k-th (as patch's source_select / target_select); none: position p onto p.
    std::optional<selection::Spec> corrupt_select;
    std::optional<selection::Spec> select;  // a dataset sample's own spec, over output.positions
    // --sae: an SAE spliced at its site; its features are the sae_features site (the
    // site's layer, the selected positions; attribution/sae_gradient.hpp).
    const features::Sae* sae = nullptr;
    std::size_t verify_top = 0;           // real patching of the K top sites
    bool integrated_gradients = false;    // --method ig: the path integral instead of the gradient at the clean run
    std::size_t ig_steps = 16;            // --steps: midpoints of the path from clean to corrupt
    std::size_t threads = 1;
    boost::json::object request_record;   // what the command line asked, for the manifest
    // From a run config (`ember run`, a sweep): the manifest's run_id, config, config_hash
    // and inputs (what `ember verify` and a sweep's skip read); empty from the command line.
    boost::json::object run_record;
};

struct AttributeResult {
    std::filesystem::path dir;
    double metric = 0.0;
    std::size_t prompt_tokens = 0;
    std::size_t evaluated_tokens = 0;
    std::size_t arrays = 0;
    double forward_ms = 0.0;
    double backward_ms = 0.0;
};

// One evaluation the metric is read from: the prompt's tokens followed by a target's.
struct Continuation {
    runtime::EncodedPrompt evaluated;  // prompt + target, as tokenized together
    std::size_t prompt_tokens = 0;     // the first rows: the prompt's own tokens
    double sign = 1.0;                 // +1, or -1 for logit-diff's contrast with several tokens
    Metric metric;
};

// The prompt as `request` gives it: its text (an ids prompt: the ids' pieces joined, each
// token's span its piece, ember::Error naming an id outside the vocabulary by its index).
runtime::EncodedPrompt request_prompt(const tokenizer::Tokenizer& tok, const AttributeRequest& request);

// The evaluations `request` needs, checked: a target that tokenizes to nothing, a token
// straddling the prompt's end, a one-token metric given a longer target, a contrast
// whose prompt tokens differ: ember::Error saying which.
std::vector<Continuation> continuations(const tokenizer::Tokenizer& tok, const AttributeRequest& request);

// The corrupted prompt of attribution patching and, per selected clean position, the row of
// it patched there.
struct CorruptPrompt {
    runtime::EncodedPrompt encoded;
    std::vector<std::size_t> positions;  // parallel to the selection's positions
};

// A request checked against the model and its prompt, before anything is written: the
// evaluations, the selection, the aligned corrupted prompt. ember::Error saying what is wrong.
struct PreparedAttribution {
    std::vector<Continuation> runs;
    extract::Selection selection;
    std::optional<CorruptPrompt> corrupt;
};
PreparedAttribution prepare_attribution(const runtime::LoadedModel& model, const GradientModel& gradient_model,
                                        const AttributeRequest& request);

// One prompt's attribution written into `writer`, every file name starting with `prefix`
// ("" for a run of its own, "sample3." in a dataset run); adds to `result`'s numbers and
// returns the manifest's members for it: tokenizer, metric, tensors, attribution_patching.
boost::json::object write_attribution(record::RunDirectoryWriter& writer, const std::string& prefix,
                                      const runtime::LoadedModel& model, const GradientModel& gradient_model,
                                      const AttributeRequest& request, const PreparedAttribution& prepared,
                                      AttributeResult& result);

// The members every attribution manifest starts with (schema, kind, model, route, request).
boost::json::object manifest_head(const runtime::LoadedModel& model, const AttributeRequest& request, std::string_view kind,
                                  std::string_view layout);

// Runs the request on `model` (which must be the one `gradient_model` was built from).
// Throws ember::Error; a failure leaves no manifest in the directory.
AttributeResult run_attribution(const runtime::LoadedModel& model, const GradientModel& gradient_model,
                                const AttributeRequest& request);

}  // namespace ember::attribution
