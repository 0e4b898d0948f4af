// The values a chat template computes with, as @huggingface/jinja (the reference, the
// JavaScript implementation of Hugging Face chat templates) has them: undefined, none,
// booleans, integers, floats, strings, lists, tuples, mappings (insertion-ordered),
// keyword arguments, namespaces and functions (docs/chat.md).
//
// Strings are UTF-8 bytes. `length`, indexing and slicing count code points, as Python
// does. A string also carries its origins: which of its bytes were copied from which
// message of the conversation, so that the rendered text can say which message every
// byte (and so every token) belongs to.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.hpp"

namespace ember::chat {

// Bytes [begin, end) of a string were copied from messages[message].
struct Origin {
    std::uint32_t begin = 0;
    std::uint32_t end = 0;
    std::int32_t message = -1;
};

// A string's bytes and where they came from (origins ascending, not overlapping).
struct Text {
    std::string bytes;
    std::vector<Origin> origins;

    void append(const Text& other);
    void append(std::string_view plain);  // template text: no origin
    // Bytes [begin, end) with their origins.
    Text slice(std::size_t begin, std::size_t end) const;
    void truncate(std::size_t size);
};

enum class Kind : std::uint8_t {
    Undefined, Null, Boolean, Integer, Float, String, Array, Tuple, Object, KeywordArgs, Namespace, Function,
};
std::string_view kind_name(Kind kind);  // "undefined", "none", "string", "list"...

struct Value;
struct Object;
struct Function;
using Array = std::vector<Value>;

struct Value {
    Kind kind = Kind::Undefined;
    bool boolean = false;
    std::int64_t integer = 0;
    double number = 0.0;
    std::shared_ptr<const Text> text;          // String
    std::shared_ptr<const Array> array;        // Array, Tuple
    std::shared_ptr<Object> object;            // Object, KeywordArgs, Namespace (a namespace's attributes change)
    std::shared_ptr<const Function> function;  // Function

    static Value undefined() { return {}; }
    static Value none();
    static Value from_bool(bool b);
    static Value from_int(std::int64_t i);
    static Value from_float(double f);
    static Value from_string(std::string s);
    static Value from_text(Text t);
    static Value from_array(Array a, Kind kind = Kind::Array);
    static Value from_object(std::shared_ptr<Object> o, Kind kind = Kind::Object);

    bool is(Kind k) const { return kind == k; }
    bool is_number() const { return kind == Kind::Integer || kind == Kind::Float; }
    bool is_list() const { return kind == Kind::Array || kind == Kind::Tuple; }
    bool is_mapping() const { return kind == Kind::Object || kind == Kind::KeywordArgs; }
    bool is_attribute_container() const { return is_mapping() || kind == Kind::Namespace; }
    double as_double() const { return kind == Kind::Integer ? static_cast<double>(integer) : number; }
    const std::string& str() const { return text->bytes; }
};

struct Object {
    std::vector<std::pair<std::string, Value>> entries;  // insertion order
    const Value* find(std::string_view key) const;
    void set(std::string_view key, Value value);
};

// Errors while rendering. `offset` is the byte in the template source of the expression
// that failed (set by the innermost node that sees the error), or npos.
class TemplateError : public Error {
public:
    explicit TemplateError(const std::string& message, std::size_t offset = npos)
        : Error(message), offset(offset) {}
    static constexpr std::size_t npos = static_cast<std::size_t>(-1);
    std::size_t offset;
};

// ---- behaviour shared by the evaluator, the filters and the methods ----

bool truthy(const Value& v);  // Python's truth: empty strings, lists and mappings are false

// A value as `{{ v }}` prints it (booleans "true"/"false", floats "1.0", lists and mappings
// as JSON); none and undefined print nothing. Throws for functions.
void append_printed(Text& out, const Value& v);
// A string, number or boolean as `+` and `~` join it (the reference's JavaScript
// conversion: 2.0 computed as a float is "2"); throws for anything else.
Text primitive_text(const Value& v);
// A double as JavaScript's Number.prototype.toString writes it (shortest round trip).
std::string js_number(double d);

// `==`: the reference compares with JavaScript's loose equality (none == undefined,
// 1 == true, "1" == 1); lists and mappings are equal only to themselves.
bool loose_equal(const Value& a, const Value& b);
// `in` over a list and `unique`: JavaScript's strict equality.
bool strict_equal(const Value& a, const Value& b);
// Sorting (dictsort, sort): numbers and booleans numerically, strings by code point
// (case-folded to ASCII lower case unless case_sensitive); other pairs throw.
int compare_values(const Value& a, const Value& b, bool case_sensitive);

struct JsonOptions {
    int indent = 0;  // 0: one line with ", " and ": "
    bool ensure_ascii = false;
    bool sort_keys = false;
    bool has_separators = false;
    std::string item_separator, key_separator;
};
// `tojson`: Python's json.dumps spacing (", " and ": "; "," and ": " with an indent), as the
// reference writes it. `undefined_as_null` false prints undefined (lists printed with {{ }}).
std::string to_json(const Value& v, const JsonOptions& options, bool undefined_as_null = true);

// ---- UTF-8 and whitespace ----

// The byte offset of every code point of `s`, and s.size() at the end.
std::vector<std::size_t> code_point_offsets(std::string_view s);
std::size_t code_point_count(std::string_view s);
// JavaScript's \s (what trim(), strip() and the lexer's whitespace mean in the reference).
bool is_js_space(char32_t c);
// Bytes [begin, end) of `s` without the leading / trailing JavaScript whitespace.
std::pair<std::size_t, std::size_t> trimmed_range(std::string_view s, bool left, bool right);
// Decodes the code point at s[i] (valid UTF-8 assumed; a bad byte decodes as itself).
char32_t decode_at(std::string_view s, std::size_t i, std::size_t& length);
void append_utf8(std::string& out, char32_t c);

}  // namespace ember::chat
