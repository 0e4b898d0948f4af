#include "attribution/metric.hpp"

#include <cassert>
#include <cmath>
#include <limits>

namespace ember::attribution {
namespace {

constexpr struct {
    MetricKind kind;
    std::string_view name;
} kMetricNames[] = {{MetricKind::LogProb, "logprob"}, {MetricKind::LogitDiff, "logit-diff"}, {MetricKind::Prob, "prob"}};

// softmax of one row in double, and its log-sum-exp.
double softmax(const float* z, std::size_t n, std::vector<double>& p) {
    double max = -std::numeric_limits<double>::infinity();
    for (std::size_t v = 0; v < n; ++v) max = std::max(max, static_cast<double>(z[v]));
    double sum = 0;
    p.resize(n);
    for (std::size_t v = 0; v < n; ++v) sum += (p[v] = std::exp(static_cast<double>(z[v]) - max));
    for (std::size_t v = 0; v < n; ++v) p[v] /= sum;
    return max + std::log(sum);
}

}  // namespace

std::string_view metric_name(MetricKind kind) {
    for (const auto& m : kMetricNames)
        if (m.kind == kind) return m.name;
    return "?";
}

std::optional<MetricKind> metric_from_name(std::string_view name) {
    for (const auto& m : kMetricNames)
        if (m.name == name) return m.kind;
    return std::nullopt;
}

std::string metric_definition(MetricKind kind, std::size_t evaluations) {
    switch (kind) {
        case MetricKind::LogProb:
            return "sum over the target's tokens j of log p(token j | the tokens before it), teacher-forced in one "
                   "evaluation of prompt + target";
        case MetricKind::LogitDiff:
            return evaluations == 1 ? "logit[target] - logit[contrast] at the prompt's last position (one token each)"
                                    : "log p(target) - log p(contrast), each summed over its tokens, teacher-forced in "
                                      "two evaluations that share the prompt's rows";
        case MetricKind::Prob: return "softmax(logits)[target] at the prompt's last position (one token)";
    }
    return "";
}

std::vector<std::size_t> Metric::rows() const {
    std::vector<std::size_t> out;
    for (const MetricTerm& t : terms) out.push_back(t.row);
    return out;
}

double Metric::evaluate(kernels::ConstRows logits, Matrix* dlogits) const {
    assert(logits.rows == terms.size());
    const std::size_t V = logits.cols;
    if (dlogits) *dlogits = Matrix::zeros(logits.rows, V);
    std::vector<double> p;
    double total = 0.0;
    for (std::size_t i = 0; i < terms.size(); ++i) {
        const float* z = logits.row(i);
        const MetricTerm& t = terms[i];
        float* dz = dlogits ? dlogits->values.data() + i * V : nullptr;
        switch (kind) {
            case MetricKind::LogProb: {
                const double lse = softmax(z, V, p);
                total += static_cast<double>(z[t.target]) - lse;
                if (dz) {
                    for (std::size_t v = 0; v < V; ++v) dz[v] = static_cast<float>(-p[v]);
                    dz[t.target] = static_cast<float>(1.0 - p[t.target]);
                }
                break;
            }
            case MetricKind::LogitDiff:
                total += static_cast<double>(z[t.target]) - static_cast<double>(z[t.contrast]);
                if (dz) {
                    dz[t.target] += 1.0f;
                    dz[t.contrast] -= 1.0f;
                }
                break;
            case MetricKind::Prob: {
                softmax(z, V, p);
                const double pa = p[t.target];
                total += pa;
                if (dz) {
                    for (std::size_t v = 0; v < V; ++v) dz[v] = static_cast<float>(-pa * p[v]);
                    dz[t.target] = static_cast<float>(pa * (1.0 - pa));
                }
                break;
            }
        }
    }
    return total;
}

}  // namespace ember::attribution
