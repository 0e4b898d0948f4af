// ember verify DIR [--json]
// Checks a run directory against its manifest (docs/formats.md, "Verification"): the
// manifest's seal, every file's size and SHA-256, every array's .npy header and shape.
// Each problem is printed naming its file; exit 0 when there is none, 1 otherwise.
#include <fmt/format.h>

#include "common/printable.hpp"
#include "cli.hpp"
#include "commands.hpp"
#include "common/error.hpp"
#include "record/verify.hpp"

namespace ember::app {

int run_verify(const std::vector<std::string>& args) {
    po::options_description options("verify options");
    options.add_options()
        ("dir", po::value<std::string>(), "the run directory")
        ("json", po::bool_switch(), "print the report as JSON");
    po::positional_options_description positional;
    positional.add("dir", 1);
    po::variables_map vm;
    if (!parse_options("verify", args, options, positional, vm)) return kExitOk;
    if (!vm.count("dir")) throw UsageError("usage: ember verify DIR");
    const std::string dir = vm["dir"].as<std::string>();
    const record::VerifyReport report = record::verify_run_directory(dir);

    if (vm["json"].as<bool>()) {
        auto list = [](const std::vector<record::VerifyProblem>& items) {
            boost::json::array out;
            for (const auto& p : items) out.push_back({{"file", p.file}, {"message", p.message}});
            return out;
        };
        print_json(boost::json::object{{"dir", dir},
                                       {"ok", report.ok()},
                                       {"files_checked", report.files_checked},
                                       {"config_hash", report.config_hash},
                                       {"problems", list(report.problems)},
                                       {"warnings", list(report.warnings)}});
    } else {
        // File names and messages come from the directory and its manifest: a control byte
        // in them (an escape sequence, a newline faking another line) prints as \xNN.
        for (const auto& p : report.problems) fmt::print("{}: {}\n", printable(p.file), printable(p.message));
        for (const auto& w : report.warnings)
            fmt::print(stderr, "warning: {}: {}\n", printable(w.file), printable(w.message));
        if (report.ok()) fmt::print("ok: {} files match {}/manifest.json\n", report.files_checked, printable(dir));
        else fmt::print(stderr, "ember verify: {} problem(s) in {}\n", report.problems.size(), printable(dir));
    }
    return report.ok() ? kExitOk : kExitFailure;
}

}  // namespace ember::app
