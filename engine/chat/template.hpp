// A Jinja chat template, parsed once and rendered many times, with the semantics of
// Hugging Face's chat templates as @huggingface/jinja (the reference) implements them:
// trim_blocks and lstrip_blocks on, tojson with Python's json.dumps spacing, undefined
// values that print nothing and fail in arithmetic (docs/chat.md lists what is supported
// and where Ember differs).
//
//   auto t = chat::Template::parse("qwen3.jinja", source);      // ember::Error NAME:L:C: ...
//   chat::Variables vars = chat::variables_from_json(object);    // messages tagged by index
//   chat::Text out = t.render(vars);                             // out.bytes, out.origins
//
// Rendering is all or nothing: an error (a raise_exception, an unknown filter, a limit)
// throws ember::Error naming the template and line:column, and nothing is returned.
#pragma once

#include <boost/json/fwd.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/value.hpp"

namespace ember::chat {

struct ParsedTemplate;

// What a hostile template is allowed before it is refused.
struct Limits {
    std::size_t max_output_bytes = std::size_t{64} << 20;  // the rendered text
    std::size_t max_string_bytes = std::size_t{64} << 20;  // any string computed
    std::size_t max_list_items = std::size_t{1} << 20;     // any list (range(), concatenation)
    int max_call_depth = 256;                              // macro calls inside macro calls
    std::uint64_t max_steps = 50'000'000;                  // expressions and statements evaluated
};

// The template context: name -> value, in order.
using Variables = std::vector<std::pair<std::string, Value>>;

// JSON -> a template value. Integral numbers are integers (as in the reference, where 2.0
// read from JSON is the integer 2); mapping keys keep their order, except that keys which
// are array indices ("0", "12") come first in ascending order, as JavaScript orders them.
// Every string inside gets origin `message` (-1: none).
Value value_from_json(const boost::json::value& json, std::int32_t message = -1);
// A VARS object: every key a variable; inside `messages` (when it is a list), every string
// of messages[i] except its `role` has origin i.
Variables variables_from_json(const boost::json::object& vars);

class Template {
public:
    // Refuses sources over kMaxSourceBytes or not valid UTF-8, and syntax errors, with
    // ember::Error "NAME:LINE:COLUMN: what".
    static constexpr std::size_t kMaxSourceBytes = std::size_t{4} << 20;
    static Template parse(std::string name, std::string source);

    // `now_seconds` is the clock strftime_now reads (Unix seconds, local time zone);
    // negative: the real clock.
    Text render(const Variables& vars, const Limits& limits = {}, std::int64_t now_seconds = -1) const;

    const std::string& name() const { return name_; }
    const std::string& source() const { return source_; }

private:
    Template() = default;
    std::string name_;
    std::string source_;
    std::shared_ptr<const ParsedTemplate> parsed_;
};

}  // namespace ember::chat
