// ember plugins validate PLUGIN.so... [--json]
// Loads each plugin and checks its descriptor (the ABI checks of PluginLibrary::load),
// then prints it: name, version, description, ABI version and implemented stages. The
// plugin is never instantiated. Exit 1 when a plugin is refused, naming it.
#include <fmt/format.h>

#include "cli.hpp"
#include "commands.hpp"
#include "common/error.hpp"
#include "experiments/plugin_library.hpp"

namespace ember::app {
namespace {

namespace json = boost::json;

json::object describe(const experiments::PluginLibrary& plugin) {
    json::array stages;
    for (auto s : plugin.implemented_stages()) stages.emplace_back(experiments::stage_id_name(s));
    return json::object{
        {"plugin", plugin.path().string()},
        {"name", plugin.name()},
        {"version", plugin.version()},
        {"description", plugin.description()},
        {"abi", fmt::format("{}.{}", plugin.abi_major(), plugin.abi_minor())},
        {"descriptor_size", plugin.declared_size()},
        {"stages", std::move(stages)},
    };
}

void print_text(const experiments::PluginLibrary& plugin) {
    std::string stages;
    for (auto s : plugin.implemented_stages())
        stages += fmt::format("{}{}", stages.empty() ? "" : ", ", experiments::stage_id_name(s));
    fmt::print("plugin:      {}\n", plugin.path().string());
    fmt::print("name:        {}\n", plugin.name());
    fmt::print("version:     {}\n", plugin.version());
    fmt::print("description: {}\n", plugin.description());
    fmt::print("abi:         {}.{} (descriptor {} bytes; this ember implements {}.{})\n", plugin.abi_major(),
               plugin.abi_minor(), plugin.declared_size(), EMBER_PLUGIN_ABI_MAJOR, EMBER_PLUGIN_ABI_MINOR);
    fmt::print("stages:      {}\n", stages.empty() ? "(none)" : stages);
}

}  // namespace

int run_plugins(const std::vector<std::string>& args) {
    po::options_description options("ember plugins validate PLUGIN.so... [--json]");
    options.add_options()("json", "print the descriptors as JSON");
    po::options_description hidden;
    hidden.add_options()("action", po::value<std::string>(), "")("plugin", po::value<std::vector<std::string>>(), "");
    po::options_description all;
    all.add(options).add(hidden);
    po::positional_options_description positional;
    positional.add("action", 1).add("plugin", -1);
    po::variables_map vm;
    if (!parse_options("plugins", args, all, positional, vm)) return kExitOk;

    if (!vm.count("action")) throw UsageError("ember plugins: give an action (validate)");
    const auto action = vm["action"].as<std::string>();
    if (action != "validate") throw UsageError(fmt::format("ember plugins: unknown action '{}' (validate)", action));
    if (!vm.count("plugin")) throw UsageError("ember plugins validate: give at least one plugin .so");

    json::array described;
    bool first = true;
    for (const auto& path : vm["plugin"].as<std::vector<std::string>>()) {
        const auto plugin = experiments::PluginLibrary::load(path);
        if (vm.count("json")) {
            described.push_back(describe(*plugin));
            continue;
        }
        if (!first) fmt::print("\n");
        first = false;
        print_text(*plugin);
    }
    if (vm.count("json")) print_json(described.size() == 1 ? json::value(described.front()) : json::value(described));
    return kExitOk;
}

}  // namespace ember::app
