#include "extract/resolved_selection.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "common/error.hpp"

namespace ember::extract {
namespace {

std::vector<std::string> split_commas(const std::string& text) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (true) {
        const std::size_t comma = text.find(',', start);
        out.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) return out;
        start = comma + 1;
    }
}

// "0,3,7" -> {0, 3, 7}; UsageError naming the option otherwise.
std::vector<std::uint32_t> parse_indices(const std::string& text, const char* option) {
    std::vector<std::uint32_t> out;
    for (const std::string& item : split_commas(text)) {
        std::uint32_t v = 0;
        const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
        if (item.empty() || ec != std::errc() || end != item.data() + item.size())
            throw UsageError(fmt::format("--{} '{}': '{}' is not a non-negative integer", option, text, item));
        if (std::find(out.begin(), out.end(), v) != out.end())
            throw UsageError(fmt::format("--{} '{}': {} is given twice", option, text, v));
        out.push_back(v);
    }
    return out;
}

}  // namespace

bool Selection::has_layer(std::uint32_t layer) const {
    return std::binary_search(layers.begin(), layers.end(), layer);
}

bool Selection::needs_all_logits() const {
    if (logits == config::LogitsDump::All) return true;
    const bool logits_stage = has(hooks::Stage::BeforeLogits) || has(hooks::Stage::AfterLogits) ||
                              logits == config::LogitsDump::Selected;
    return logits_stage && !(positions.size() == 1 && positions[0] + 1 == n_tokens);
}

namespace {

Selection resolve_common(const config::OutputSection& output, const models::ModelConfig& model, std::size_t n_tokens) {
    if (n_tokens == 0) throw Error("the prompt has no tokens");
    const std::uint32_t n_layers = model.n_layers;
    if (output.logit_lens > model.n_vocab) {
        throw Error(fmt::format("output.logit_lens = {} is larger than the vocabulary ({} tokens)", output.logit_lens,
                                model.n_vocab));
    }
    Selection s;
    s.n_tokens = n_tokens;
    for (const std::string& name : output.stages) {
        if (name == hooks::stage_name(hooks::Stage::SaeFeatures))
            throw Error("output.stages: sae_features is not extracted as a stage (its width is the SAE's): load the "
                        "SAE (--sae DIR, [[sae]]) and its features are extracted");
        bool known = false;
        for (hooks::Stage stage : kStages) {
            if (hooks::stage_name(stage) != name) continue;
            s.stages[hooks::index_of(stage)] = true;
            known = true;
        }
        if (!known) throw Error(fmt::format("output.stages: unknown stage '{}'", name));
    }
    if (output.layers) {
        for (std::uint32_t l : *output.layers) {
            if (l >= n_layers)
                throw Error(fmt::format("output.layers names layer {} but the model has {} layers (0-{})", l, n_layers,
                                        n_layers - 1));
            s.layers.push_back(l);
        }
        std::sort(s.layers.begin(), s.layers.end());
        s.layers.erase(std::unique(s.layers.begin(), s.layers.end()), s.layers.end());
    } else {
        for (std::uint32_t l = 0; l < n_layers; ++l) s.layers.push_back(l);
    }
    s.logits = output.logits;
    s.lens_top_k = output.logit_lens;
    return s;
}

}  // namespace

Selection resolve(const config::OutputSection& output, const models::ModelConfig& model, std::size_t n_tokens) {
    Selection s = resolve_common(output, model, n_tokens);
    switch (output.positions.kind) {
        case config::PositionSelection::Kind::Spec:
            throw Error(fmt::format("output.select '{}' needs the prompt's text", output.positions.spec));
        case config::PositionSelection::Kind::All:
            for (std::size_t p = 0; p < n_tokens; ++p) s.positions.push_back(p);
            break;
        case config::PositionSelection::Kind::Last: s.positions.push_back(n_tokens - 1); break;
        case config::PositionSelection::Kind::List:
            for (std::uint32_t p : output.positions.list) {
                if (p >= n_tokens)
                    throw Error(fmt::format("output.positions names position {} but the prompt has {} tokens (0-{})", p,
                                            n_tokens, n_tokens - 1));
                s.positions.push_back(p);
            }
            std::sort(s.positions.begin(), s.positions.end());
            s.positions.erase(std::unique(s.positions.begin(), s.positions.end()), s.positions.end());
            break;
    }
    s.partial.assign(s.positions.size(), false);
    const auto& p = output.positions;
    selection::Spec spec;
    spec.kind = p.kind == config::PositionSelection::Kind::All    ? selection::Kind::All
                : p.kind == config::PositionSelection::Kind::Last ? selection::Kind::Last
                                                                  : selection::Kind::Indices;
    spec.indices.assign(p.list.begin(), p.list.end());
    s.spec = spec.to_string();
    return s;
}

selection::Resolved select_positions(const selection::Spec& spec, std::string_view text,
                                     std::span<const tokenizer::Token> tokens,
                                     const selection::Conversation* conversation) {
    std::vector<selection::TokenSpan> spans;
    spans.reserve(tokens.size());
    for (const tokenizer::Token& t : tokens) spans.push_back({t.start, t.end});
    return selection::resolve(spec, text, spans, conversation);
}

Selection resolve(const config::OutputSection& output, const models::ModelConfig& model, std::string_view text,
                  std::span<const tokenizer::Token> tokens, const selection::Spec* spec,
                  const selection::Conversation* conversation) {
    if (!spec && output.positions.kind != config::PositionSelection::Kind::Spec) return resolve(output, model, tokens.size());
    Selection s = resolve_common(output, model, tokens.size());
    const selection::Spec parsed = spec ? *spec : selection::parse(output.positions.spec);
    if (parsed.scope != selection::Scope::None && !conversation)
        throw Error(fmt::format("selection '{}': {} is a message scope, and the prompt is not a chat prompt (give --chat "
                                "VARS.json, [prompt] messages, or a dataset line with \"messages\")",
                                parsed.to_string(), parsed.scope_text()));
    const selection::Resolved r = select_positions(parsed, text, tokens, conversation);
    if (r.rows.empty()) throw Error(fmt::format("selection '{}' selects nothing: {}", parsed.to_string(), r.why_empty));
    for (const selection::Selected& row : r.rows) {
        s.positions.push_back(row.position);
        s.partial.push_back(row.partial);
    }
    s.spec = parsed.to_string();
    return s;
}

selection::Spec parse_spec(const std::string& text, const char* option) {
    try {
        return selection::parse(text);
    } catch (const selection::SpecError& e) {
        throw UsageError(fmt::format("--{}: {}", option, e.what()));
    }
}

void parse_select(const std::string& text, config::OutputSection& output) {
    output.positions = {config::PositionSelection::Kind::Spec, {}, parse_spec(text, "select").to_string()};
}

void parse_stages(const std::string& text, config::OutputSection& output) {
    output.stages.clear();
    for (const std::string& name : split_commas(text)) {
        const bool known = std::any_of(kStages.begin(), kStages.end(), [&](hooks::Stage s) { return hooks::stage_name(s) == name; });
        if (!known) {
            std::string list;
            for (hooks::Stage s : kStages) list += fmt::format("{}{}", list.empty() ? "" : ", ", hooks::stage_name(s));
            throw UsageError(fmt::format("--stages '{}': unknown stage '{}' (one of {})", text, name, list));
        }
        if (std::find(output.stages.begin(), output.stages.end(), name) != output.stages.end())
            throw UsageError(fmt::format("--stages '{}': '{}' is given twice", text, name));
        output.stages.push_back(name);
    }
}

void parse_layers(const std::string& text, config::OutputSection& output) {
    if (text == "all") output.layers.reset();
    else output.layers = parse_indices(text, "layers");
}

void parse_positions(const std::string& text, config::OutputSection& output) {
    if (text == "all") output.positions = {config::PositionSelection::Kind::All, {}, {}};
    else if (text == "last") output.positions = {config::PositionSelection::Kind::Last, {}, {}};
    else output.positions = {config::PositionSelection::Kind::List, parse_indices(text, "positions"), {}};
}

void parse_logits(const std::string& text, config::OutputSection& output) {
    if (text == "none") output.logits = config::LogitsDump::None;
    else if (text == "last") output.logits = config::LogitsDump::Last;
    else if (text == "all") output.logits = config::LogitsDump::All;
    else if (text == "selected") output.logits = config::LogitsDump::Selected;
    else throw UsageError(fmt::format("--logits '{}' is not one of none, last, all, selected", text));
}

}  // namespace ember::extract
