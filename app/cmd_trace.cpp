// ember trace export --chrome TRACE.jsonl OUT.json
// ember trace fingerprint TRACE.jsonl
// Works on a trace journal written by --trace or [tracing] (docs/formats.md): converts it
// to the Chrome trace-event format (open OUT.json in ui.perfetto.dev or chrome://tracing),
// or prints its fingerprint (the SHA-256 of the execution structure, without timings).
#include <fmt/format.h>

#include "cli.hpp"
#include "commands.hpp"
#include "common/error.hpp"
#include "common/output_path.hpp"
#include "trace/chrome_export.hpp"
#include "trace/fingerprint.hpp"

namespace ember::app {
namespace {

constexpr const char* kUsage =
    "usage: ember trace export --chrome TRACE.jsonl OUT.json\n"
    "       ember trace fingerprint TRACE.jsonl";

int export_command(const std::vector<std::string>& args) {
    po::options_description options("trace export options");
    options.add_options()
        ("chrome", po::bool_switch(), "write the Chrome trace-event format (the only format)")
        ("input", po::value<std::string>(), "the trace journal (JSON lines)")
        ("output", po::value<std::string>(), "the file to write");
    po::positional_options_description positional;
    positional.add("input", 1).add("output", 1);
    po::variables_map vm;
    if (!parse_options("trace export", args, options, positional, vm)) return kExitOk;
    if (!vm["chrome"].as<bool>()) throw UsageError("ember trace export: give --chrome (the only export format)");
    if (!vm.count("input") || !vm.count("output")) throw UsageError(kUsage);
    const std::string out = vm["output"].as<std::string>();
    check_output_file("OUT", out);
    const std::size_t events = trace::export_chrome_trace(vm["input"].as<std::string>(), out);
    fmt::print(stderr, "ember: wrote {} events to {}\n", events, out);
    return kExitOk;
}

int fingerprint_command(const std::vector<std::string>& args) {
    po::options_description options("trace fingerprint options");
    options.add_options()("input", po::value<std::string>(), "the trace journal (JSON lines)");
    po::positional_options_description positional;
    positional.add("input", 1);
    po::variables_map vm;
    if (!parse_options("trace fingerprint", args, options, positional, vm)) return kExitOk;
    if (!vm.count("input")) throw UsageError(kUsage);
    fmt::print("{}\n", trace::fingerprint_of_journal(vm["input"].as<std::string>()));
    return kExitOk;
}

}  // namespace

int run_trace(const std::vector<std::string>& args) {
    if (args.empty()) throw UsageError(kUsage);
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    if (args[0] == "export") return export_command(rest);
    if (args[0] == "fingerprint") return fingerprint_command(rest);
    if (args[0] == "--help" || args[0] == "-h") {
        fmt::print("{}\n", kUsage);
        return kExitOk;
    }
    throw UsageError(fmt::format("ember trace: unknown action '{}'\n{}", args[0], kUsage));
}

}  // namespace ember::app
