// `ember attribute`'s run (docs/attribution.md): a prompt and a metric on its
// continuation, one forward and one backward pass on the reference route, and per chosen
// stage, layer and prompt position the gradient of the metric and the activation it was
// taken at, written as .npy files into a run directory with a sealed manifest
// (extract/run_directory). With a corrupted prompt, the attribution-patching estimate
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
#include "extract/manifest.hpp"
#include "extract/selection.hpp"
#include "runtime/loaded_model.hpp"

namespace ember::attribution {

// The stages a gradient is defined at, in firing order (after_logits is the metric's own
// input: its gradient is the metric's derivative, metric.hpp).
bool has_gradient(hooks::Stage stage);

struct AttributeRequest {
    std::string prompt;
    config::AddBos add_bos = config::AddBos::Auto;
    bool special = false;  // --special: special-token texts in prompt, target and corrupt parsed
    MetricKind metric = MetricKind::LogProb;
    std::string target;
    std::optional<std::string> contrast;  // logit-diff's B
    config::OutputSection output;         // stages, layers, positions / select; dir, overwrite
    std::optional<std::string> corrupt;   // attribution patching against this prompt
    std::size_t verify_top = 0;           // real patching of the K top sites
    bool integrated_gradients = false;    // --method ig: the path integral instead of the gradient at the clean run
    std::size_t ig_steps = 16;            // --steps: midpoints of the path from clean to corrupt
    std::size_t threads = 1;
    boost::json::object request_record;   // what the command line asked, for the manifest
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
    extract::EncodedPrompt evaluated;  // prompt + target, as tokenized together
    std::size_t prompt_tokens = 0;     // the first rows: the prompt's own tokens
    double sign = 1.0;                 // +1, or -1 for logit-diff's contrast with several tokens
    Metric metric;
};

// The evaluations `request` needs, checked: a target that tokenizes to nothing, a token
// straddling the prompt's end, a one-token metric given a longer target, a contrast
// whose prompt tokens differ: ember::Error saying which.
std::vector<Continuation> continuations(const tokenizer::Tokenizer& tok, const AttributeRequest& request);

// Runs the request on `model` (which must be the one `gradient_model` was built from).
// Throws ember::Error; a failure leaves no manifest in the directory.
AttributeResult run_attribution(const runtime::LoadedModel& model, const GradientModel& gradient_model,
                                const AttributeRequest& request);

}  // namespace ember::attribution
