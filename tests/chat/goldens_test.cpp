// Rung: golden (reference renderings). Every (template, case) of a goldens file made by
// @huggingface/jinja, the reference implementation of Hugging Face chat templates,
// renders byte for byte as its `rendered` text, or is refused where it has `error`. The
// suite reads the files, so a case added to them is a subcase here:
//   ../shared/fixtures/chat/goldens.json       the shared fixture goldens
//   tests/chat/goldens/more_goldens.json       more conversations (tools, tool calls,
//                                              thinking, Arabic, emoji, whitespace), made
//                                              by tests/chat/goldens/make.sh
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "chat/template.hpp"
#include "support/fixtures.hpp"

namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using ember::chat::Template;

std::string slurp(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE_MESSAGE(in, "cannot read " << path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The template NAME.jinja from the first of `dirs` that has it.
fs::path template_path(const std::vector<fs::path>& dirs, const std::string& name) {
    for (const auto& d : dirs)
        if (fs::exists(d / (name + ".jinja"))) return d / (name + ".jinja");
    FAIL("no template " << name << ".jinja in the template folders");
    return {};
}

void check_goldens(const fs::path& goldens_file, const std::vector<fs::path>& template_dirs, std::size_t at_least) {
    const json::value goldens = json::parse(slurp(goldens_file));
    const auto& results = goldens.at("results").as_array();
    // A file that lost its cases must not pass silently.
    REQUIRE(results.size() >= at_least);
    std::map<std::string, Template> templates;
    for (const auto& r : results) {
        const std::string name(r.at("template").as_string());
        const std::string case_name(r.at("case").as_string());
        SUBCASE((name + " / " + case_name).c_str()) {
            auto it = templates.find(name);
            if (it == templates.end()) {
                const fs::path path = template_path(template_dirs, name);
                it = templates.emplace(name, Template::parse(path.filename().string(), slurp(path))).first;
            }
            const auto vars = ember::chat::variables_from_json(r.at("vars").as_object());
            // The Llama 3.2 template prints today's date when date_string is not given; a
            // fixed clock (26 Jul 2024 12:00 UTC) makes that reproducible.
            const std::int64_t clock = 1721995200;
            if (r.at("error").is_null()) {
                const std::string expected(r.at("rendered").as_string());
                std::string got;
                try {
                    got = it->second.render(vars, {}, clock).bytes;
                } catch (const std::exception& e) {
                    FAIL("refused: " << e.what());
                }
                CHECK(got == expected);
            } else {
                INFO("the reference refused: " << r.at("error").as_string());
                CHECK_THROWS(it->second.render(vars, {}, clock));
            }
        }
    }
}

}  // namespace

TEST_CASE("every rendering of the shared fixture goldens matches the reference") {
    const fs::path chat = ember::test::fixture_path("chat");
    check_goldens(chat / "goldens.json", {chat / "templates"}, 27);
}

TEST_CASE("every rendering of tests/chat/goldens matches the reference") {
    const fs::path chat = ember::test::fixture_path("chat");
    const fs::path here = fs::path(EMBER_CHAT_TEST_DIR) / "goldens";
    check_goldens(here / "more_goldens.json", {chat / "templates", here / "templates"}, 40);
}
