// The cost of rendering a chat template: each real template of ../shared/fixtures/chat
// rendered 10,000 times with each of its fixture conversations (goldens.json), µs per
// render. Not a test; docs/chat.md reports its numbers.
//   chat_render_bench [FIXTURES_DIR] [RENDERS]
#include <boost/json.hpp>
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "chat/template.hpp"

int main(int argc, char** argv) {
    namespace fs = std::filesystem;
    const fs::path chat = fs::path(argc > 1 ? argv[1] : "../shared/fixtures") / "chat";
    const int renders = argc > 2 ? std::atoi(argv[2]) : 10000;
    const auto slurp = [](const fs::path& p) {
        std::ifstream in(p, std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    };
    const auto goldens = boost::json::parse(slurp(chat / "goldens.json"));
    std::map<std::string, std::vector<ember::chat::Variables>> cases;
    for (const auto& r : goldens.at("results").as_array())
        cases[std::string(r.at("template").as_string())].push_back(
            ember::chat::variables_from_json(r.at("vars").as_object()));
    fmt::print("{:<36} {:>6} {:>10} {:>12}\n", "template", "cases", "renders", "us/render");
    for (const auto& [name, vars] : cases) {
        const auto t = ember::chat::Template::parse(name, slurp(chat / "templates" / (name + ".jinja")));
        std::size_t bytes = 0;
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < renders; ++i) bytes += t.render(vars[static_cast<std::size_t>(i) % vars.size()], {}, 0).bytes.size();
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
        fmt::print("{:<36} {:>6} {:>10} {:>12.1f}   ({} bytes)\n", name, vars.size(), renders, us / renders, bytes / renders);
    }
}
