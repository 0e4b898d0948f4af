#include "extract/dataset_records.hpp"

#include <fmt/format.h>

#include <boost/json.hpp>

#include <algorithm>
#include <limits>
#include <numeric>

#include "record/strict_json.hpp"
#include "common/error.hpp"
#include "extract/sae_extraction.hpp"
#include "extract/target_scoring.hpp"
#include "runtime/prompt.hpp"

namespace ember::extract {
namespace json = boost::json;

void DatasetRecords::append(const SampleRows& s, RunPoint& point) {
    const Prepared& p = *s.prepared;
    const std::size_t first_row = point.rows;
    const std::size_t n_rows = s.extractor ? s.extractor->selection().positions.size() : 0;
    if (s.extractor) {
        append_arrays(s);
        append_rows(s, first_row);
    }
    json::array spans;
    for (std::size_t i = 0; i < p.prompt_tokens; ++i) spans.push_back({p.evaluated.tokens[i].start, p.evaluated.tokens[i].end});
    json::object sample{
        {"index", p.sample.index},
        {"id", p.sample.id},
        {"line", p.sample.line},
        {"text", p.sample.text},
        {"n_tokens", p.prompt_tokens},
        {"evaluated_tokens", p.evaluated_rows},
        {"first_row", first_row},
        {"row_count", n_rows},
        {"select", s.extractor ? json::value(s.extractor->selection().spec) : json::value(nullptr)},
        {"skipped", p.skipped.empty() ? json::value(nullptr) : json::value(p.skipped)},
        {"metadata", p.sample.metadata},
        {"token_ids", json::value_from(std::vector<std::int32_t>(p.evaluated.ids.begin(),
                                                                  p.evaluated.ids.begin() + p.prompt_tokens))},
        {"byte_spans", std::move(spans)},
    };
    if (p.evaluated.chat) {  // a conversation: its provenance and each prompt token's message
        sample["chat"] = *p.evaluated.chat;
        json::array owners = runtime::token_messages_json(p.evaluated);
        owners.resize(p.prompt_tokens);
        sample["token_messages"] = std::move(owners);
    }
    out_.samples().write(strict_json(sample) + "\n");
    if (out_.targets_npy()) append_target(s);
    point.rows += n_rows;
    point.samples += 1;
    point.tokens += p.evaluated.ids.size();
    point.evaluated += p.evaluated_rows;
    point.skipped += p.skipped.empty() ? 0 : 1;
}

void DatasetRecords::append_arrays(const SampleRows& s) {
    const Extractor& ex = *s.extractor;
    const std::vector<const Capture*> captures = ex.captures();
    for (std::size_t i = 0; i < out_.plans().size(); ++i) {
        const ArrayPlan& plan = out_.plans()[i];
        const std::size_t rows = ex.selection().positions.size();
        switch (plan.source) {
            case ArrayPlan::Source::Stage:
                for (const Capture* c : captures) {
                    if (c->stage != plan.stage || c->layer != plan.layer) continue;
                    if (plan.rows_per_row > 1) {
                        append_padded(i, *c, rows);
                        continue;
                    }
                    if (c->values.size() != rows * plan.cols)
                        throw Error(fmt::format("{}: {} values for {} rows of {} columns", plan.name, c->values.size(),
                                                rows, plan.cols));
                    out_.array(i).append(c->values.data(), rows);
                }
                break;
            case ArrayPlan::Source::Logits: out_.array(i).append(ex.logits()->values.data(), rows); break;
            case ArrayPlan::Source::LensIds:
            case ArrayPlan::Source::LensLogits:
                for (const LensLayer& l : s.lens) {
                    if (l.layer != *plan.layer) continue;
                    if (plan.source == ArrayPlan::Source::LensIds) out_.array(i).append(l.ids.data(), rows);
                    else out_.array(i).append(l.logits.data(), rows);
                }
                break;
            case ArrayPlan::Source::SaeDense: out_.array(i).append(s.sae_features.at(plan.sae).data(), rows); break;
            case ArrayPlan::Source::SaeIndptr: {
                // indptr, indices, values: three plans in a row; the row ends count every earlier nonzero.
                const std::vector<float>& dense = s.sae_features.at(plan.sae);  // [rows, d_sae]
                if (rows == 0) break;
                record::NpyAppender& indices = out_.array(i + 1);
                SparseRows sparse;
                append_sparse(dense.data(), rows, dense.size() / rows, static_cast<std::int64_t>(indices.rows()), sparse);
                out_.array(i).append(sparse.indptr.data(), rows);
                indices.append(sparse.indices.data(), sparse.indices.size());
                out_.array(i + 2).append(sparse.values.data(), sparse.values.size());
                break;
            }
            case ArrayPlan::Source::SaeIndices:
            case ArrayPlan::Source::SaeValues: break;  // with SaeIndptr
        }
    }
}

// attention_pattern: [rows, n_head, n_kv] of one sample, each head's weights padded with
// zeros to the array's width.
void DatasetRecords::append_padded(std::size_t array, const Capture& c, std::size_t rows) {
    const ArrayPlan& plan = out_.plans()[array];
    const std::size_t n = rows * plan.rows_per_row;
    if (c.rows_per_position != plan.rows_per_row || c.cols > plan.cols || c.values.size() != n * c.cols)
        throw Error(fmt::format("{}: {} values for {} rows of at most {} columns", plan.name, c.values.size(), n, plan.cols));
    std::vector<float> padded(n * plan.cols, 0.0f);
    for (std::size_t r = 0; r < n; ++r)
        std::copy_n(c.values.begin() + static_cast<std::ptrdiff_t>(r * c.cols), c.cols,
                    padded.begin() + static_cast<std::ptrdiff_t>(r * plan.cols));
    out_.array(array).append(padded.data(), rows);
}

void DatasetRecords::append_rows(const SampleRows& s, std::size_t first_row) {
    const Prepared& p = *s.prepared;
    const Selection& sel = s.extractor->selection();
    std::string lines;
    for (std::size_t i = 0; i < sel.positions.size(); ++i) {
        const std::size_t pos = sel.positions[i];
        const tokenizer::Token& t = p.evaluated.tokens[pos];
        json::object row{{"row", first_row + i},   {"sample", p.sample.index}, {"id", p.sample.id},
                         {"position", pos},        {"token", t.id},            {"byte_start", t.start},
                         {"byte_end", t.end},      {"partial", static_cast<bool>(sel.partial[i])},
                         {"select", sel.spec}};
        for (auto& [k, v] : piece_fields(tok_, t.id)) row[k] = v;
        if (const auto& c = p.evaluated.conversation) {  // which message the token belongs to; null: template text
            const std::int32_t m = c->token_messages[pos];
            row["message"] = m < 0 ? json::value(nullptr) : json::value(m);
            row["role"] = m < 0 ? json::value(nullptr) : json::value(c->roles[static_cast<std::size_t>(m)]);
        }
        if (!s.lens.empty()) {
            json::object lens;
            for (const LensLayer& l : s.lens) {
                json::array pieces;
                for (std::size_t j = 0; j < l.k; ++j) pieces.push_back(record::piece_text(tok_.piece(l.ids[i * l.k + j], true)));
                lens[std::to_string(l.layer)] = std::move(pieces);
            }
            row["logit_lens_pieces"] = std::move(lens);
        }
        lines += strict_json(row);
        lines += '\n';
    }
    out_.rows().write(lines);
}

void DatasetRecords::append_target(const SampleRows& s) {
    const Prepared& p = *s.prepared;
    double sum = std::numeric_limits<double>::quiet_NaN();
    if (p.sample.target && s.extractor) {
        const TargetScore score{s.target, std::accumulate(s.target.begin(), s.target.end(), 0.0)};
        json::object line{{"sample", p.sample.index}, {"id", p.sample.id}};
        for (auto& [k, v] : target_record(tok_, p.evaluated.ids, p.prompt_tokens, *p.sample.target, score)) line[k] = v;
        sum = score.logprob;
        out_.targets_jsonl()->write(strict_json(line) + "\n");
    }
    out_.targets_npy()->append(&sum, 1);
}

}  // namespace ember::extract
