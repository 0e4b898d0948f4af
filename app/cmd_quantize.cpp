// ember quantize IN.gguf OUT.gguf TYPE (the types: model_tools::file_type_names)
// Rewrites an F32 / F16 / BF16 model following llama-quantize's rules for that file type
// (engine/model_tools/quantize.hpp), so the output matches what llama.cpp writes for the
// same input (docs/fast-path.md says where that was checked).
#include <fmt/format.h>

#include "cli.hpp"
#include "commands.hpp"
#include "common/error.hpp"
#include "common/output_path.hpp"
#include "model_tools/quantize.hpp"

namespace ember::app {

int run_quantize(const std::vector<std::string>& args) {
    const std::string types = model_tools::file_type_names("|");
    po::options_description options(fmt::format("quantize options (ember quantize IN.gguf OUT.gguf {})", types));
    options.add_options()
        ("input", po::value<std::string>()->required(), "GGUF model to read (F32, F16 or BF16 weights)")
        ("output", po::value<std::string>()->required(), "GGUF file to write")
        ("type", po::value<std::string>()->required(), fmt::format("target file type: one of {}", types).c_str());
    po::positional_options_description positional;
    positional.add("input", 1).add("output", 1).add("type", 1);
    po::variables_map vm;
    if (!parse_options("quantize", args, options, positional, vm)) return kExitOk;

    model_tools::FileType type;
    try {
        type = model_tools::parse_file_type(vm["type"].as<std::string>());
    } catch (const UsageError& e) {
        throw UsageError(fmt::format("ember quantize: {}", e.what()));
    }
    const std::string output = vm["output"].as<std::string>();
    // Before any work: OUT is nothing yet or a regular file it replaces (quantize_model
    // refuses the input itself).
    check_output_file("OUT", output);
    const auto s = model_tools::quantize_model(vm["input"].as<std::string>(), output, type);
    std::string written;
    for (const auto& [name, count] : s.written) written += fmt::format("{} {}, ", count, name);
    fmt::print("wrote {} ({} bytes, {}): {}{} copied\n", output, s.output_bytes, model_tools::file_type_name(type), written,
               s.copied);
    return kExitOk;
}

}  // namespace ember::app
