#include "cli.hpp"

#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <iterator>

#include "common/error.hpp"
#include "common/input_file.hpp"
#include "common/json_pretty.hpp"

namespace ember::app {

bool parse_options(const std::string& command, const std::vector<std::string>& args,
                   const po::options_description& options, const po::positional_options_description& positional,
                   po::variables_map& vm) {
    po::options_description all(options);
    all.add_options()("help,h", "show this help");
    try {
        po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
        if (vm.count("help")) {
            std::cout << "usage: ember " << command << " [options]\n" << all << "\n";
            return false;
        }
        po::notify(vm);
    } catch (const po::error& e) {
        throw UsageError(fmt::format("ember {}: {}", command, e.what()));
    }
    return true;
}

std::optional<models::Family> parse_arch(const std::string& arch) {
    if (arch == "auto") return std::nullopt;
    if (auto family = models::family_from_name(arch)) return family;
    throw UsageError(fmt::format("--arch '{}' is not one of auto, llama, qwen3, gemma4", arch));
}

std::string read_prompt(const po::variables_map& vm) {
    const bool has_text = vm.count("prompt") > 0;
    const bool has_file = vm.count("file") > 0;
    if (has_text == has_file) throw UsageError("give exactly one of --prompt TEXT or --file PATH");
    if (has_text) return vm["prompt"].as<std::string>();
    return read_input_file(vm["file"].as<std::string>(), "prompt file");
}

std::string read_file(const std::filesystem::path& path, std::string_view what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(fmt::format("{}: cannot open {}", path.string(), what));
    std::string bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>{});
    if (in.bad()) throw Error(fmt::format("{}: cannot read {}", path.string(), what));
    return bytes;
}


void print_json(const boost::json::value& value) { std::cout << pretty_json(value) << "\n"; }

}  // namespace ember::app
