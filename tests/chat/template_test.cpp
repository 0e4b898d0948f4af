// Rung: smoke (the renderer's contract beyond the reference goldens): errors name the
// template and line:column, hostile templates are refused by a limit instead of eating
// the machine, strings count code points, and the rendered text knows which bytes came
// from which message.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include <string>

#include "chat/template.hpp"

namespace {

using namespace ember::chat;
namespace json = boost::json;

std::string render(const std::string& source, const std::string& vars_json = "{}", const Limits& limits = {}) {
    const auto t = Template::parse("t.jinja", source);
    return t.render(variables_from_json(json::parse(vars_json).as_object()), limits, 0).bytes;
}

std::string error_of(const std::string& source, const std::string& vars_json = "{}", const Limits& limits = {}) {
    try {
        render(source, vars_json, limits);
    } catch (const ember::Error& e) {
        return e.what();
    }
    return "(rendered)";
}

}  // namespace

TEST_CASE("syntax errors name the template and line:column") {
    CHECK(error_of("line one\n{% if x %}\n  {{ x | }}\n{% endif %}") == "t.jinja:3:10: expected a filter name");
    CHECK(error_of("{% for x in y %}\nno end") == "t.jinja:1:1: unexpected end of template: the for has no {% endfor %}");
    CHECK(error_of("{{ 'unterminated }}") == "t.jinja:1:4: unterminated string literal");
    CHECK(error_of("{% frobnicate %}") == "t.jinja:1:1: unknown statement 'frobnicate'");
    CHECK(error_of("{{ a ! b }}") == "t.jinja:1:6: unexpected character '!'");
    // Columns count characters, not bytes, on an Arabic line.
    CHECK(error_of("كتب {{ ) }}") == "t.jinja:1:8: unexpected ')'");
    CHECK(error_of("{% call foo() %}{% endcall %}") == "t.jinja:1:1: the {% call %} block is not supported");
}

TEST_CASE("runtime errors name the line:column of the failing expression") {
    CHECK(error_of("a\n  {{ raise_exception('no ' + who) }}", R"({"who": "tools"})") ==
          "t.jinja:2:6: raise_exception: no tools");
    CHECK(error_of("{{ messages | nosuch }}", R"({"messages": []})") == "t.jinja:1:15: unknown filter 'nosuch' for a list");
    CHECK(error_of("{{ x is nosuch }}") == "t.jinja:1:6: unknown test 'nosuch'");
    CHECK(error_of("{{ nothing + 1 }}") == "t.jinja:1:12: '+' on an undefined value");
    CHECK(error_of("{% break %}") == "t.jinja: {% break %} or {% continue %} outside a loop");
    // A variable may not hide a built-in (the reference refuses to declare it twice).
    CHECK(error_of("{{ 1 }}", R"({"range": 1})") == "t.jinja: variable 'range' would hide the built-in of that name");
}

TEST_CASE("hostile templates are refused by a limit") {
    // A recursion that does not end.
    CHECK(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find(
              "macro calls nested deeper than 256") != std::string::npos);
    // A loop that does not end in practice: 10^18 iterations.
    Limits small;
    small.max_steps = 100000;
    CHECK(error_of("{% for a in range(1000000) %}{% for b in range(1000000) %}{% endfor %}{% endfor %}", "{}", small)
              .find("evaluated more than 100000 expressions") != std::string::npos);
    // A string that doubles until it fills memory.
    CHECK(error_of("{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}")
              .find("more than the limit of") != std::string::npos);
    CHECK(error_of("{{ range(100000000) | length }}").find("a list of 100000000 items") != std::string::npos);
    // Output that grows past the limit.
    Limits tiny_output;
    tiny_output.max_output_bytes = 1000;
    CHECK(error_of("{% for i in range(1000) %}xxxxxxxxxx{% endfor %}", "{}", tiny_output)
              .find("the rendered text is over the limit of 1000 bytes") != std::string::npos);
    // Brackets nested deeper than the parser's limit.
    CHECK(error_of("{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}").find("nesting deeper than 200 levels") !=
          std::string::npos);
    // A template over the size limit is refused before it is read further.
    std::string huge(Template::kMaxSourceBytes + 1, 'a');
    CHECK(error_of(huge).find("more than the limit of 4194304 bytes") != std::string::npos);
    CHECK(error_of("\xff\xfe").find("not valid UTF-8") != std::string::npos);
}

TEST_CASE("length, indexing and slicing count code points, as Python does") {
    // The reference (JavaScript) counts UTF-16 units in `length`: 4 for "😀ab"; Python 3.
    CHECK(render("{{ s | length }}|{{ s.length }}|{{ s[0] }}|{{ s[-1] }}|{{ s[::-1] }}|{{ s[1:] }}", R"({"s": "😀ab"})") ==
          "3|3|😀|b|ba😀|ab");
    CHECK(render("{{ s | length }}|{{ s[::-1] }}", R"({"s": "كتب"})") == "3|بتك");
}

TEST_CASE("the rendered text knows which bytes came from which message") {
    const std::string vars = R"({"messages": [{"role": "user", "content": "  مرحبا  "}, {"role": "assistant", "content": "ok"}]})";
    const auto t = Template::parse("t.jinja",
                                   "{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}{% if m.role == 'user' %}"
                                   "{{ m.content[2:4] }}{% endif %}</>{% endfor %}");
    const Text out = t.render(variables_from_json(json::parse(vars).as_object()), {}, 0);
    CHECK(out.bytes == "<user>مرحبامر</><assistant>ok</>");
    // Message 0's trimmed text and its slice (joined into one range), message 1's text; the
    // roles and the tags are template text.
    REQUIRE(out.origins.size() == 2);
    CHECK(out.bytes.substr(out.origins[0].begin, out.origins[0].end - out.origins[0].begin) == "مرحبامر");
    CHECK(out.origins[0].message == 0);
    CHECK(out.bytes.substr(out.origins[1].begin, out.origins[1].end - out.origins[1].begin) == "ok");
    CHECK(out.origins[1].message == 1);
}
