// ember plugins validate PLUGIN.so... [--json] [--timeout-s N]
// Checks each plugin's descriptor (the ABI checks of PluginLibrary::load) in a child
// process, then prints it: name, version, description, ABI version and implemented
// stages. The plugin is never instantiated, and its own code (static constructors) runs
// only in the child: a plugin that crashes or hangs while loading is reported by name
// ("plugin 'PATH' crashed (SIGSEGV) while loading"), and one still loading after
// --timeout-s seconds (default 10) is ended with everything it forked ("plugin 'PATH' was
// still loading after 10 s"). Exit 1 when a plugin is refused.
#include <fmt/format.h>
#include <sys/wait.h>

#include "child_process.hpp"
#include "cli.hpp"
#include "commands.hpp"
#include "common/error.hpp"
#include "experiments/plugin_library.hpp"

namespace ember::app {
namespace {

namespace json = boost::json;

// How long loading one plugin may take, by default, before the child inspecting it is ended.
constexpr long long kDefaultInspectLimitS = 10;

json::object plugin_description(const experiments::PluginLibrary& plugin) {
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

void print_plugin_text(const json::object& plugin) {
    std::string stages;
    for (const auto& s : plugin.at("stages").as_array())
        stages += fmt::format("{}{}", stages.empty() ? "" : ", ", std::string_view(s.as_string()));
    const auto text = [&](const char* key) { return std::string_view(plugin.at(key).as_string()); };
    fmt::print("plugin:      {}\n", text("plugin"));
    fmt::print("name:        {}\n", text("name"));
    fmt::print("version:     {}\n", text("version"));
    fmt::print("description: {}\n", text("description"));
    fmt::print("abi:         {} (descriptor {} bytes; this ember implements {}.{})\n", text("abi"),
               plugin.at("descriptor_size").to_number<std::uint64_t>(), EMBER_PLUGIN_ABI_MAJOR, EMBER_PLUGIN_ABI_MINOR);
    fmt::print("stages:      {}\n", stages.empty() ? "(none)" : stages);
}

// The descriptor as the child process saw it; ember::Error naming the plugin otherwise.
json::object inspect_in_child(const std::string& path, long long limit_s) {
    const CapturedChild child =
        run_self_captured({"plugins", "inspect-in-this-process", path}, static_cast<int>(limit_s * 1000));
    const std::string name = std::filesystem::absolute(path).lexically_normal().string();
    if (child.timed_out)
        throw Error(fmt::format("plugin '{}' was still loading after {} s (its static constructors?)", name, limit_s));
    if (WIFEXITED(child.status) && WEXITSTATUS(child.status) == kExitOk) {
        boost::system::error_code ec;
        json::value described = json::parse(child.out, ec);
        if (!ec && described.is_object()) return described.as_object();
        if (!child.out.empty())
            throw Error(fmt::format("plugin '{}' wrote to stdout while loading; its descriptor could not be read", name));
    }
    if (WIFEXITED(child.status) && WEXITSTATUS(child.status) == kExitFailure) {
        const std::size_t start = child.err.rfind("error: ");
        if (start != std::string::npos) {
            std::string message = child.err.substr(start + 7);
            while (!message.empty() && message.back() == '\n') message.pop_back();
            throw Error(message);
        }
    }
    throw Error(fmt::format("plugin '{}' crashed ({}) while loading", name, end_text(child.status)));
}

}  // namespace

int run_plugins(const std::vector<std::string>& args) {
    // The child's side: load one plugin here and print its descriptor as JSON.
    if (args.size() == 2 && args[0] == "inspect-in-this-process") {
        print_json(plugin_description(*experiments::PluginLibrary::load(args[1])));
        return kExitOk;
    }
    po::options_description options("ember plugins validate PLUGIN.so... [--json]");
    options.add_options()("json", "print the descriptors as JSON")(
        "timeout-s", po::value<long long>()->default_value(kDefaultInspectLimitS),
        "end the loading of a plugin still going after this many seconds (1 to 3600)");
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

    const long long limit_s = vm["timeout-s"].as<long long>();
    if (limit_s < 1 || limit_s > 3600) throw UsageError("ember plugins validate: --timeout-s must be in [1, 3600]");
    json::array described;
    bool first = true;
    for (const auto& path : vm["plugin"].as<std::vector<std::string>>()) {
        json::object plugin = inspect_in_child(path, limit_s);
        if (vm.count("json")) {
            described.push_back(std::move(plugin));
            continue;
        }
        if (!first) fmt::print("\n");
        first = false;
        print_plugin_text(plugin);
    }
    if (vm.count("json")) print_json(described.size() == 1 ? json::value(described.front()) : json::value(described));
    return kExitOk;
}

}  // namespace ember::app
