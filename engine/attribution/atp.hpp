// Attribution patching (AtP, Nanda 2023; Kramar et al. 2024): the linear estimate of what
// patching one site's activation from a corrupted prompt into the clean run does to the
// metric, (a_corrupt - a_clean) . dM/da, for every chosen site at once from the one
// backward pass of the clean run. Summed over columns per unit: per position (the residual
// stages and before_logits), per (position, head) (head_outputs, attention_pattern), per
// (position, neuron) (mlp_activation, one column each).
//
// With --method ig (integrated gradients, Sundararajan et al. 2017), dM/da is replaced by
// its mean along the straight path from the clean to the corrupted activation of the whole
// site (every prompt row), at the midpoints of `ig_steps` steps: each step one forward with
// the site set to a_clean + alpha (a_corrupt - a_clean) and one backward. The estimates of a
// site's units then sum to about M(site corrupted) - M(clean) (completeness).
//
// Writes STAGE.layerN.atp.npy ([positions, units per position]) and attribution.jsonl (every
// unit, ranked by |estimate|); with verify_top = K, the K top units are patched for real on
// the reference route (a Session with a hook writing the corrupted values) and each line
// records the true effect next to the estimate, with the Spearman correlation over them.
#pragma once

#include <oneapi/tbb/task_arena.h>

#include <boost/json/value.hpp>

#include <vector>

#include "attribution/attribution.hpp"
#include "attribution/site_arrays.hpp"

namespace ember::attribution {

// The corrupted prompt as tokenized and, per selected clean position, the row of it patched
// there: with request.corrupt_select the k-th row that spec selects in the corrupted prompt
// (the counts must agree), else the same position (the prompts must have as many tokens).
// ember::Error naming both counts (or both specs) otherwise: called before anything is written.
CorruptPrompt aligned_corrupt_prompt(const tokenizer::Tokenizer& tok, const AttributeRequest& request,
                                     std::size_t prompt_tokens, const extract::Selection& selection);

// Writes STAGE.layerN.atp.npy and attribution.jsonl (each name starting with `prefix`).
// `clean_tensors`: with --method ig, the clean run's whole tensor at every chosen site
// (SiteArrays::keep_tensor). Returns the manifest's "attribution_patching".
boost::json::value write_attribution_patching(record::RunDirectoryWriter& writer, const std::string& prefix,
                                              const runtime::LoadedModel& model, const GradientModel& gm,
                                              const AttributeRequest& request, const std::vector<Continuation>& runs,
                                              const CorruptPrompt& corrupt, const SiteArrays& arrays,
                                              const std::vector<Matrix>& clean_tensors, double clean_metric,
                                              tbb::task_arena& arena);

// Spearman's rank correlation of two equally long series (average ranks for ties); NaN
// for fewer than two values or a constant series.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace ember::attribution
