// The scalar an attribution differentiates, read from the logits of some rows, with its
// gradient with respect to those logits (docs/attribution.md, "Metrics"). Sums in double.
//
//   logprob     M = sum_j log p(target_j | tokens before it)   (teacher forcing, as a dataset's
//               target scoring: logits[j-1][t_j] - logsumexp(logits[j-1]))
//               dM/dz_{j-1} = onehot(t_j) - softmax(z_{j-1})
//   logit-diff  M = z[a] - z[b] at the prompt's last row         dM/dz = onehot(a) - onehot(b)
//   prob        M = p(a) = softmax(z)[a] at the prompt's last row dM/dz = p(a) (onehot(a) - p)
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attribution/gradient_model.hpp"

namespace ember::attribution {

enum class MetricKind { LogProb, LogitDiff, Prob };

std::string_view metric_name(MetricKind kind);
std::optional<MetricKind> metric_from_name(std::string_view name);

// What the manifest says the metric is, in words.
std::string metric_definition(MetricKind kind, std::size_t evaluations);

// What the metric reads: for row r (an evaluated row), its token `target` and, for
// logit-diff, the `contrast` token.
struct MetricTerm {
    std::size_t row = 0;
    std::int32_t target = 0;
    std::int32_t contrast = -1;  // logit-diff only
};

struct Metric {
    MetricKind kind = MetricKind::LogProb;
    std::vector<MetricTerm> terms;  // ascending rows

    std::vector<std::size_t> rows() const;
    // logits: [terms.size(), n_vocab], row i for terms[i]. Returns M; fills dlogits (same shape).
    double evaluate(kernels::ConstRows logits, Matrix* dlogits) const;
};

}  // namespace ember::attribution
