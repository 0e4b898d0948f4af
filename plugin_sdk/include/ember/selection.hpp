// Selection specs: which prompt positions a request means, anchored to the prompt's text
// (docs/extraction.md, "Selection specs"). Header-only and standard C++ only, so the engine
// and the plugins (which build against the SDK alone) parse and resolve specs the same way.
//
//   all | first | last                  every token / the first / the last
//   3,5,-1                              positions; a negative one counts from the end
//   bytes:A-B                           every token whose byte span overlaps [A, B)
//   chars:A-B                           the same in code points of the UTF-8 prompt
//   substring:TEXT  substring:TEXT#K    every token overlapping the first (K-th) occurrence
//                                       (K from 1 to kMaxOccurrence; a TEXT ending in '#'
//                                       and an integer is written in the JSON form)
//   ...:first | ...:last                only the first / last token of what the spec selects
//
// In a chat prompt (docs/chat.md) a spec may be scoped to messages, written before it with '/':
//   message:N                           the tokens of messages[N] (negative: from the end)
//   role:R  role:R:K                    of every message with role R / of the K-th of them
//                                       (from 0; negative from the end: -1 is the last)
//   role:user:-1/substring:جذر          the first occurrence of the text inside the last user message
// Inside a scope, positions (all, first, last, 3,-1) count the scope's tokens (the tokens the
// token-to-message map gives to the message), and bytes:/chars: count the message's own text:
// the bytes the rendering copied from it, joined in order. A substring is found within one
// stretch of copied text. A scope on a prompt that is not a chat prompt selects nothing and
// says so.
//
// As JSON (a dataset's "select"): a string in the form above, or an object with exactly one
// of "substring" (a string), "bytes" / "chars" ([A, B]), "indices" ([3, 5, -1]) or
// "position" ("all" | "first" | "last"), and optionally "occurrence" (K >= 1, substring
// only) and "take" ("all" | "first" | "last"); a scope is "message" (N) or "role" (R) with
// optionally "role_index" (K), and alone it means the scope's every token:
//   {"substring": "كتب", "occurrence": 2, "take": "last"}
//   {"role": "user", "role_index": -1, "substring": "جذر"}
//
// Occurrences of a substring are counted left to right without overlap. A token that only
// partly covers the anchored bytes (a span reaching outside [A, B)) is selected and marked
// partial. Tokens that cover no byte (BOS, a space the tokenizer added) are never selected
// by an anchored spec. Resolving never throws: an empty result says why in `why_empty`.
#pragma once

#include <ember/experiment_config.hpp>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ember::selection {

class SpecError : public std::invalid_argument {
public:
    explicit SpecError(const std::string& message) : std::invalid_argument(message) {}
};

enum class Kind { All, First, Last, Indices, Bytes, Chars, Substring };
enum class Take { All, First, Last };
enum class Scope { None, Message, Role };

// The largest occurrence K a substring spec may ask for (a prompt of 2^31 bytes could not
// hold more); #0, #-1 and anything above this are refused.
inline constexpr std::size_t kMaxOccurrence = 2147483647;

struct Spec {
    Kind kind = Kind::All;
    std::vector<std::int64_t> indices;  // Kind::Indices, as written
    std::size_t begin = 0, end = 0;     // Kind::Bytes / Kind::Chars: [begin, end)
    std::string text;                   // Kind::Substring
    std::size_t occurrence = 1;         // Kind::Substring: 1-based
    Take take = Take::All;
    Scope scope = Scope::None;
    std::int64_t message = 0;                // Scope::Message: the index (negative: from the end)
    std::string role;                        // Scope::Role
    std::optional<std::int64_t> role_index;  // Scope::Role: which of the role's messages; none: all

    // "message:N", "role:R", "role:R:K"; "" when unscoped.
    std::string scope_text() const {
        if (scope == Scope::Message) return "message:" + std::to_string(message);
        if (scope == Scope::Role) return "role:" + role + (role_index ? ":" + std::to_string(*role_index) : "");
        return "";
    }

    // The text form (parse(to_string()) gives the spec back).
    std::string to_string() const {
        std::string s;
        switch (kind) {
            case Kind::All: s = "all"; break;
            case Kind::First: s = "first"; break;
            case Kind::Last: s = "last"; break;
            case Kind::Indices:
                for (std::size_t i = 0; i < indices.size(); ++i) s.append(i ? "," : "").append(std::to_string(indices[i]));
                break;
            case Kind::Bytes:
            case Kind::Chars:
                s.append(kind == Kind::Bytes ? "bytes:" : "chars:").append(std::to_string(begin));
                s.append("-").append(std::to_string(end));
                break;
            case Kind::Substring:
                s = "substring:" + text;
                if (occurrence != 1 || text.find('#') != std::string::npos) s.append("#").append(std::to_string(occurrence));
                break;
        }
        if (scope != Scope::None) s = scope_text() + (kind == Kind::All ? "" : "/" + s);
        if (take == Take::First) s += ":first";
        if (take == Take::Last) s += ":last";
        return s;
    }
};

// A token of the prompt: its byte span [start, end) in the prompt's UTF-8 bytes.
struct TokenSpan {
    std::size_t start = 0;
    std::size_t end = 0;
};

struct Selected {
    std::size_t position = 0;
    bool partial = false;  // the token reaches outside the anchored bytes
};

struct Resolved {
    std::vector<Selected> rows;  // ascending positions
    std::string why_empty;       // when rows is empty
};

// A chat prompt's messages, as a scope needs them (docs/chat.md, "The token-to-message map").
struct MessageBytes {
    std::size_t begin = 0, end = 0;  // prompt bytes [begin, end) the rendering copied from the message
    std::int32_t message = 0;
};
struct Conversation {
    std::vector<std::string> roles;            // roles[i]: messages[i]'s
    std::vector<MessageBytes> bytes;           // ascending, not overlapping
    std::vector<std::int32_t> token_messages;  // per token: its message, -1 for template text
};

namespace detail {

// "-1", "0", "123": a sign at most and digits (what #K after a substring is taken to be).
inline bool looks_like_integer(std::string_view s) {
    if (!s.empty() && (s.front() == '-' || s.front() == '+')) s.remove_prefix(1);
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

inline bool parse_unsigned(std::string_view s, std::size_t& out) {
    if (s.empty()) return false;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size();
}

inline void parse_range(std::string_view body, const std::string& spec, Spec& out) {
    const std::size_t dash = body.find('-');
    if (dash == std::string_view::npos || !parse_unsigned(body.substr(0, dash), out.begin) ||
        !parse_unsigned(body.substr(dash + 1), out.end))
        throw SpecError("selection '" + spec + "': expected A-B with non-negative integers A < B");
    if (out.begin >= out.end) throw SpecError("selection '" + spec + "': the range is empty (A must be below B)");
}

inline void parse_indices(std::string_view body, const std::string& spec, Spec& out) {
    std::size_t start = 0;
    while (true) {
        const std::size_t comma = body.find(',', start);
        const std::string_view item = body.substr(start, comma == std::string_view::npos ? body.npos : comma - start);
        std::int64_t v = 0;
        const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
        if (item.empty() || ec != std::errc() || end != item.data() + item.size())
            throw SpecError("selection '" + spec + "': '" + std::string(item) +
                            "' is not all, first, last, an index list, bytes:, chars: or substring:");
        if (std::find(out.indices.begin(), out.indices.end(), v) != out.indices.end())
            throw SpecError("selection '" + spec + "': index " + std::to_string(v) + " is given twice");
        out.indices.push_back(v);
        if (comma == std::string_view::npos) return;
        start = comma + 1;
    }
}

// The byte offset of code point `n` (n == the count: the text's size); npos past the end.
inline std::size_t byte_of_char(std::string_view text, std::size_t n) {
    std::size_t seen = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if ((static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) continue;  // continuation byte
        if (seen++ == n) return i;
    }
    return seen == n ? text.size() : std::string_view::npos;
}

inline std::size_t count_chars(std::string_view text) {
    return static_cast<std::size_t>(std::count_if(
        text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

inline bool parse_signed(std::string_view s, std::int64_t& out) {
    if (!s.empty() && s.front() == '+') return false;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

// "message:N", "role:R" or "role:R:K" into `out`.
inline void parse_scope(std::string_view scope, const std::string& spec, Spec& out) {
    if (scope.starts_with("message:")) {
        out.scope = Scope::Message;
        if (!parse_signed(scope.substr(8), out.message))
            throw SpecError("selection '" + spec + "': message:N needs an integer N (negative: from the end)");
        return;
    }
    out.scope = Scope::Role;
    std::string_view role = scope.substr(5);
    const std::size_t colon = role.rfind(':');
    if (colon != std::string_view::npos && looks_like_integer(role.substr(colon + 1))) {
        std::int64_t k = 0;
        if (!parse_signed(role.substr(colon + 1), k))
            throw SpecError("selection '" + spec + "': role:R:K needs an integer K (negative: from the end)");
        out.role_index = k;
        role = role.substr(0, colon);
    }
    if (role.empty()) throw SpecError("selection '" + spec + "': role: needs a role name (role:user, role:user:-1)");
    out.role = std::string(role);
}

}  // namespace detail

// The text form. SpecError naming the spec on anything else.
inline Spec parse(std::string_view text) {
    const std::string whole(text);
    Spec s;
    std::string_view body = text;
    // The take suffix first: a substring may itself contain ':'.
    for (const auto& [suffix, take] : {std::pair<std::string_view, Take>{":last", Take::Last}, {":first", Take::First}}) {
        if (body.size() > suffix.size() && body.substr(body.size() - suffix.size()) == suffix) {
            body.remove_suffix(suffix.size());
            s.take = take;
            break;
        }
    }
    if (body.starts_with("message:") || body.starts_with("role:")) {  // a scope, then '/' and a spec inside it
        const std::size_t slash = body.find('/');
        detail::parse_scope(body.substr(0, slash), whole, s);
        if (slash == std::string_view::npos) return s;  // the scope's every token
        body.remove_prefix(slash + 1);
        if (body.starts_with("message:") || body.starts_with("role:"))
            throw SpecError("selection '" + whole + "': one message scope at most");
        if (body.empty()) throw SpecError("selection '" + whole + "': nothing after the scope's '/'");
    }
    if (body == "all") s.kind = Kind::All;
    else if (body == "first") s.kind = Kind::First;
    else if (body == "last") s.kind = Kind::Last;
    else if (body.starts_with("bytes:")) {
        s.kind = Kind::Bytes;
        detail::parse_range(body.substr(6), whole, s);
    } else if (body.starts_with("chars:")) {
        s.kind = Kind::Chars;
        detail::parse_range(body.substr(6), whole, s);
    } else if (body.starts_with("substring:")) {
        s.kind = Kind::Substring;
        body.remove_prefix(10);
        const std::size_t hash = body.rfind('#');
        if (hash != std::string_view::npos && detail::looks_like_integer(body.substr(hash + 1))) {
            // #0, #-1 and a K too large for any prompt are refused alike, never read as text.
            if (!detail::parse_unsigned(body.substr(hash + 1), s.occurrence) || s.occurrence < 1 ||
                s.occurrence > kMaxOccurrence)
                throw SpecError("selection '" + whole + "': the occurrence #K must be an integer from 1 to " +
                                std::to_string(kMaxOccurrence) + " (occurrences count from 1)");
            body = body.substr(0, hash);
        }
        if (body.empty()) throw SpecError("selection '" + whole + "': the substring is empty");
        s.text = std::string(body);
    } else {
        s.kind = Kind::Indices;
        detail::parse_indices(body, whole, s);
    }
    return s;
}

// The JSON form: a string (parse()) or an object (see the header). SpecError naming the key.
inline Spec from_json(const JsonValue& value) {
    if (value.is_string()) return parse(value.as_string());
    if (!value.is_object()) throw SpecError("select must be a string or an object");
    Spec s;
    int kinds = 0;
    auto range = [&](const JsonValue& v, const char* key) {
        if (!v.is_array() || v.items().size() != 2 || !v.items()[0].is_integer() || !v.items()[1].is_integer() ||
            v.items()[0].as_integer() < 0 || v.items()[0].as_integer() >= v.items()[1].as_integer())
            throw SpecError(std::string("select.") + key + " must be [A, B] with integers 0 <= A < B");
        s.begin = static_cast<std::size_t>(v.items()[0].as_integer());
        s.end = static_cast<std::size_t>(v.items()[1].as_integer());
    };
    auto take_of = [](const JsonValue& v, const char* key) {
        const std::string t = v.is_string() ? v.as_string() : "";
        if (t == "all") return Kind::All;
        if (t == "first") return Kind::First;
        if (t == "last") return Kind::Last;
        throw SpecError(std::string("select.") + key + " must be \"all\", \"first\" or \"last\"");
    };
    for (std::size_t i = 0; i < value.keys().size(); ++i) {
        const std::string& key = value.keys()[i];
        const JsonValue& v = value.items()[i];
        if (key == "substring") {
            if (!v.is_string() || v.as_string().empty()) throw SpecError("select.substring must be a non-empty string");
            s.kind = Kind::Substring, s.text = v.as_string(), ++kinds;
        } else if (key == "bytes") {
            s.kind = Kind::Bytes, range(v, "bytes"), ++kinds;
        } else if (key == "chars") {
            s.kind = Kind::Chars, range(v, "chars"), ++kinds;
        } else if (key == "indices") {
            if (!v.is_array() || v.items().empty()) throw SpecError("select.indices must be a non-empty array of integers");
            for (const JsonValue& item : v.items()) {
                if (!item.is_integer()) throw SpecError("select.indices must be a non-empty array of integers");
                if (std::find(s.indices.begin(), s.indices.end(), item.as_integer()) != s.indices.end())
                    throw SpecError("select.indices: index " + std::to_string(item.as_integer()) + " is given twice");
                s.indices.push_back(item.as_integer());
            }
            s.kind = Kind::Indices, ++kinds;
        } else if (key == "position") {
            s.kind = take_of(v, "position"), ++kinds;
        } else if (key == "occurrence") {
            if (!v.is_integer() || v.as_integer() < 1 || static_cast<std::uint64_t>(v.as_integer()) > kMaxOccurrence)
                throw SpecError("select.occurrence must be an integer from 1 to " + std::to_string(kMaxOccurrence));
            s.occurrence = static_cast<std::size_t>(v.as_integer());
        } else if (key == "take") {
            const Kind k = take_of(v, "take");
            s.take = k == Kind::First ? Take::First : k == Kind::Last ? Take::Last : Take::All;
        } else if (key == "message") {
            if (!v.is_integer()) throw SpecError("select.message must be an integer (negative: from the end)");
            s.scope = Scope::Message, s.message = v.as_integer();
        } else if (key == "role") {
            if (!v.is_string() || v.as_string().empty()) throw SpecError("select.role must be a non-empty string");
            s.scope = Scope::Role, s.role = v.as_string();
        } else if (key == "role_index") {
            if (!v.is_integer()) throw SpecError("select.role_index must be an integer (negative: from the end)");
            s.role_index = v.as_integer();
        } else {
            throw SpecError("select: unknown key '" + key + "'");
        }
    }
    if (value.find("message") && value.find("role")) throw SpecError("select: \"message\" and \"role\" are two scopes; give one");
    if (s.role_index && s.scope != Scope::Role) throw SpecError("select.role_index needs \"role\"");
    if (kinds == 0 && s.scope != Scope::None) kinds = 1;  // a scope alone: its every token
    if (kinds != 1)
        throw SpecError("select needs exactly one of \"substring\", \"bytes\", \"chars\", \"indices\", \"position\"");
    if (s.occurrence != 1 && s.kind != Kind::Substring) throw SpecError("select.occurrence needs \"substring\"");
    return s;
}

namespace detail {
inline Resolved resolve_scoped(const Spec& spec, std::string_view text, std::span<const TokenSpan> tokens,
                               const Conversation* conversation);
}  // namespace detail

// The positions `spec` selects in a prompt of `text` whose tokens are `tokens` (spans in
// order, tiling the text; zero-width tokens allowed). A scoped spec needs `conversation`,
// the chat prompt's messages.
inline Resolved resolve(const Spec& spec, std::string_view text, std::span<const TokenSpan> tokens,
                        const Conversation* conversation = nullptr) {
    if (spec.scope != Scope::None) return detail::resolve_scoped(spec, text, tokens, conversation);
    Resolved r;
    const std::size_t n = tokens.size();
    if (n == 0) {
        r.why_empty = "the prompt has no tokens";
        return r;
    }
    auto anchored = [&](std::size_t begin, std::size_t end) {  // tokens overlapping [begin, end)
        for (std::size_t p = 0; p < n; ++p) {
            const TokenSpan& t = tokens[p];
            if (t.start < t.end && t.start < end && t.end > begin) r.rows.push_back({p, t.start < begin || t.end > end});
        }
        if (r.rows.empty()) r.why_empty = "no token covers bytes " + std::to_string(begin) + "-" + std::to_string(end);
    };
    switch (spec.kind) {
        case Kind::All:
            for (std::size_t p = 0; p < n; ++p) r.rows.push_back({p, false});
            break;
        case Kind::First: r.rows.push_back({0, false}); break;
        case Kind::Last: r.rows.push_back({n - 1, false}); break;
        case Kind::Indices: {
            std::vector<std::size_t> positions;
            for (std::int64_t i : spec.indices) {
                const std::int64_t p = i < 0 ? static_cast<std::int64_t>(n) + i : i;
                if (p < 0 || p >= static_cast<std::int64_t>(n)) {
                    r.why_empty = "index " + std::to_string(i) + " is outside the prompt's " + std::to_string(n) + " tokens";
                    return r;
                }
                positions.push_back(static_cast<std::size_t>(p));
            }
            std::sort(positions.begin(), positions.end());
            if (std::adjacent_find(positions.begin(), positions.end()) != positions.end()) {
                r.why_empty = "two indices name the same position";
                return r;
            }
            for (std::size_t p : positions) r.rows.push_back({p, false});
            break;
        }
        case Kind::Bytes:
            if (spec.end > text.size()) {
                r.why_empty = "bytes " + std::to_string(spec.begin) + "-" + std::to_string(spec.end) +
                              " reach past the prompt's " + std::to_string(text.size()) + " bytes";
                return r;
            }
            anchored(spec.begin, spec.end);
            break;
        case Kind::Chars: {
            const std::size_t begin = detail::byte_of_char(text, spec.begin);
            const std::size_t end = detail::byte_of_char(text, spec.end);
            if (begin == std::string_view::npos || end == std::string_view::npos) {
                r.why_empty = "chars " + std::to_string(spec.begin) + "-" + std::to_string(spec.end) +
                              " reach past the prompt's " + std::to_string(detail::count_chars(text)) + " code points";
                return r;
            }
            anchored(begin, end);
            break;
        }
        case Kind::Substring: {
            std::size_t at = std::string_view::npos, from = 0;
            for (std::size_t k = 0; k < spec.occurrence; ++k) {
                at = text.find(spec.text, from);
                if (at == std::string_view::npos) break;
                from = at + spec.text.size();
            }
            if (at == std::string_view::npos) {
                r.why_empty = "'" + spec.text + "' occurs fewer than " + std::to_string(spec.occurrence) + " time(s)";
                return r;
            }
            anchored(at, at + spec.text.size());
            break;
        }
    }
    if (spec.take == Take::First && r.rows.size() > 1) r.rows.resize(1);
    if (spec.take == Take::Last && r.rows.size() > 1) r.rows.erase(r.rows.begin(), r.rows.end() - 1);
    return r;
}

namespace detail {

// The messages a scope names (chosen[i]: messages[i] is in it), or why none is.
inline std::vector<bool> scope_messages(const Spec& spec, const Conversation& c, std::string& why) {
    const auto n = static_cast<std::int64_t>(c.roles.size());
    std::vector<bool> chosen(c.roles.size(), false);
    const auto pick = [&](std::int64_t k, std::int64_t count) { return k < 0 ? count + k : k; };
    if (spec.scope == Scope::Message) {
        const std::int64_t m = pick(spec.message, n);
        if (m < 0 || m >= n) why = "the prompt has " + std::to_string(n) + " message(s)";
        else chosen[static_cast<std::size_t>(m)] = true;
        return chosen;
    }
    std::vector<std::size_t> with_role;
    for (std::size_t i = 0; i < c.roles.size(); ++i)
        if (c.roles[i] == spec.role) with_role.push_back(i);
    const auto count = static_cast<std::int64_t>(with_role.size());
    if (with_role.empty()) {
        why = "the prompt has no '" + spec.role + "' message";
    } else if (!spec.role_index) {
        for (std::size_t i : with_role) chosen[i] = true;
    } else if (const std::int64_t k = pick(*spec.role_index, count); k < 0 || k >= count) {
        why = "the prompt has " + std::to_string(count) + " '" + spec.role + "' message(s)";
    } else {
        chosen[with_role[static_cast<std::size_t>(k)]] = true;
    }
    return chosen;
}

// Bytes, chars and substrings inside a scope: the prompt bytes they anchor to (`pieces`,
// ascending), or why none. `stretches` are the scope's copied bytes, adjacent ones merged.
inline void anchor_in_scope(const Spec& spec, std::string_view text, const std::vector<MessageBytes>& stretches,
                            std::vector<std::pair<std::size_t, std::size_t>>& pieces, std::string& why) {
    const std::string name = spec.scope_text();
    if (spec.kind == Kind::Substring) {
        std::size_t seen = 0;
        for (const MessageBytes& st : stretches) {
            const std::string_view part = text.substr(st.begin, st.end - st.begin);
            for (std::size_t from = 0, at = 0; (at = part.find(spec.text, from)) != std::string_view::npos;
                 from = at + spec.text.size()) {
                if (++seen < spec.occurrence) continue;
                pieces.push_back({st.begin + at, st.begin + at + spec.text.size()});
                return;
            }
        }
        why = "'" + spec.text + "' occurs fewer than " + std::to_string(spec.occurrence) + " time(s) in " + name;
        return;
    }
    std::string joined;  // the scope's own text
    for (const MessageBytes& st : stretches) joined.append(text.substr(st.begin, st.end - st.begin));
    std::size_t begin = spec.begin, end = spec.end;
    if (spec.kind == Kind::Chars) {
        begin = byte_of_char(joined, spec.begin), end = byte_of_char(joined, spec.end);
        if (begin == std::string_view::npos || end == std::string_view::npos) {
            why = "chars " + std::to_string(spec.begin) + "-" + std::to_string(spec.end) + " reach past the " +
                  std::to_string(count_chars(joined)) + " code points of " + name;
            return;
        }
    } else if (end > joined.size()) {
        why = "bytes " + std::to_string(begin) + "-" + std::to_string(end) + " reach past the " +
              std::to_string(joined.size()) + " bytes of " + name;
        return;
    }
    std::size_t offset = 0;  // of the stretch in `joined`
    for (const MessageBytes& st : stretches) {
        const std::size_t length = st.end - st.begin;
        const std::size_t b = std::max(begin, offset), e = std::min(end, offset + length);
        if (b < e) pieces.push_back({st.begin + b - offset, st.begin + e - offset});
        offset += length;
    }
}

inline Resolved resolve_scoped(const Spec& spec, std::string_view text, std::span<const TokenSpan> tokens,
                               const Conversation* c) {
    Resolved r;
    const std::string name = spec.scope_text();
    if (!c) {
        r.why_empty = name + " is a message scope, and no message map was given: the prompt is not a chat prompt "
                             "(or the caller is an experiment, which is not given one)";
        return r;
    }
    bool consistent = c->token_messages.size() == tokens.size();
    for (const MessageBytes& b : c->bytes) consistent = consistent && b.begin <= b.end && b.end <= text.size();
    if (!consistent) {
        r.why_empty = "the prompt's message map does not match its tokens and text";
        return r;
    }
    const std::vector<bool> chosen = scope_messages(spec, *c, r.why_empty);
    if (!r.why_empty.empty()) {
        r.why_empty = name + ": " + r.why_empty;
        return r;
    }
    const auto in_scope = [&](std::int32_t m) { return m >= 0 && static_cast<std::size_t>(m) < chosen.size() && chosen[static_cast<std::size_t>(m)]; };
    Spec inner = spec;
    inner.scope = Scope::None;
    if (spec.kind == Kind::All || spec.kind == Kind::First || spec.kind == Kind::Last || spec.kind == Kind::Indices) {
        // Positions count the scope's tokens.
        std::vector<std::size_t> positions;
        std::vector<TokenSpan> spans;
        for (std::size_t p = 0; p < tokens.size(); ++p)
            if (in_scope(c->token_messages[p])) positions.push_back(p), spans.push_back(tokens[p]);
        if (positions.empty()) {
            r.why_empty = name + ": no token of the prompt belongs to it (its text is empty)";
            return r;
        }
        r = resolve(inner, text, spans);
        for (Selected& row : r.rows) row.position = positions[row.position];
        if (r.rows.empty()) r.why_empty = name + ": " + r.why_empty;
        return r;
    }
    std::vector<MessageBytes> stretches;
    for (const MessageBytes& b : c->bytes) {
        if (!in_scope(b.message) || b.begin == b.end) continue;
        if (!stretches.empty() && stretches.back().end == b.begin) stretches.back().end = b.end;
        else stretches.push_back(b);
    }
    std::vector<std::pair<std::size_t, std::size_t>> pieces;
    if (stretches.empty()) r.why_empty = name + ": no byte of the prompt comes from it (its text is empty)";
    else anchor_in_scope(spec, text, stretches, pieces, r.why_empty);
    if (pieces.empty()) return r;
    // Every token with a byte in the pieces; partial when it has a byte outside them.
    for (std::size_t p = 0; p < tokens.size(); ++p) {
        const TokenSpan& t = tokens[p];
        std::size_t covered = 0;
        for (const auto& [b, e] : pieces)
            if (t.start < e && t.end > b) covered += std::min(e, t.end) - std::max(b, t.start);
        if (covered > 0) r.rows.push_back({p, covered < t.end - t.start});
    }
    if (r.rows.empty()) r.why_empty = "no token covers the anchored bytes of " + name;
    if (spec.take == Take::First && r.rows.size() > 1) r.rows.resize(1);
    if (spec.take == Take::Last && r.rows.size() > 1) r.rows.erase(r.rows.begin(), r.rows.end() - 1);
    return r;
}

}  // namespace detail

}  // namespace ember::selection
