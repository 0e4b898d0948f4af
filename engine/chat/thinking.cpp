#include "chat/thinking.hpp"

#include <algorithm>

namespace ember::chat {

std::optional<ThinkingMarkers> thinking_markers(std::string_view template_source) {
    // The template may write a marker split in two literals ('<|channel>thought\n' is one
    // in Gemma 4's, but its escape '\n' is two characters of the source): compare the
    // marker up to its first newline.
    const auto written = [&](std::string_view marker) {
        return template_source.find(marker.substr(0, marker.find('\n'))) != std::string_view::npos;
    };
    for (const ThinkingMarkers& m : kThinkingMarkers)
        if (written(m.open) && written(m.close)) return m;
    return std::nullopt;
}

Reply split_reply(std::string_view prompt, std::string_view generated, const ThinkingMarkers& m) {
    Reply r;
    const std::size_t last_open = prompt.rfind(m.open), last_close = prompt.rfind(m.close);
    const bool starts_inside = last_open != std::string_view::npos &&
                               (last_close == std::string_view::npos || last_close < last_open);
    std::size_t begin = 0;  // where the thinking text starts in `generated`
    std::size_t open_at = 0;
    if (!starts_inside) {
        open_at = generated.find(m.open);
        if (open_at == std::string_view::npos) {
            r.answer = std::string(generated);
            return r;
        }
        begin = open_at + m.open.size();
    }
    const std::size_t close_at = generated.find(m.close, begin);
    r.thinking_closed = close_at != std::string_view::npos;
    const std::size_t end = r.thinking_closed ? close_at : generated.size();
    r.thinking = std::string(generated.substr(begin, end - begin));
    r.answer = std::string(generated.substr(0, open_at));
    if (r.thinking_closed) r.answer += generated.substr(close_at + m.close.size());
    return r;
}

std::vector<std::int32_t> hidden_marker_tokens(const tokenizer::Tokenizer& tok, const ThinkingMarkers& markers) {
    tokenizer::EncodeOptions options;
    options.parse_special = true;
    options.add_special = false;
    options.add_bos = false;
    std::vector<std::int32_t> out;
    for (const std::string_view marker : {markers.open, markers.close})
        for (const std::int32_t id : tok.encode_ids(marker, options))
            if (tok.piece(id).empty() && !tok.is_end_of_generation(id) &&
                marker.find(tok.token_text(id)) != std::string_view::npos)
                out.push_back(id);
    return out;
}

std::string marked_text(const tokenizer::Tokenizer& tok, std::span<const std::int32_t> tokens, const ThinkingMarkers& markers) {
    const std::vector<std::int32_t> shown = hidden_marker_tokens(tok, markers);
    std::string out;
    for (const std::int32_t id : tokens) out += tok.piece(id, std::find(shown.begin(), shown.end(), id) != shown.end());
    return out;
}

}  // namespace ember::chat
