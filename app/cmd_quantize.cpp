// ember quantize IN.gguf OUT.gguf q8_0
// Rewrites an F32 / F16 / BF16 model with Q8_0 weights following llama-quantize's rules
// for its Q8_0 file type (engine/model_tools/quantize.hpp), so the output matches what
// llama.cpp writes for the same input, byte for byte.
#include <fmt/format.h>

#include "cli.hpp"
#include "commands.hpp"
#include "common/error.hpp"
#include "model_tools/quantize.hpp"

namespace ember::app {

int run_quantize(const std::vector<std::string>& args) {
    po::options_description options("quantize options (ember quantize IN.gguf OUT.gguf q8_0)");
    options.add_options()
        ("input", po::value<std::string>()->required(), "GGUF model to read (F32, F16 or BF16 weights)")
        ("output", po::value<std::string>()->required(), "GGUF file to write")
        ("type", po::value<std::string>()->required(), "target file type: q8_0");
    po::positional_options_description positional;
    positional.add("input", 1).add("output", 1).add("type", 1);
    po::variables_map vm;
    if (!parse_options("quantize", args, options, positional, vm)) return kExitOk;

    const std::string type = vm["type"].as<std::string>();
    if (type != "q8_0") throw UsageError(fmt::format("ember quantize: type '{}' is not supported (only q8_0)", type));
    const std::string output = vm["output"].as<std::string>();
    const auto s = model_tools::quantize_model_q8_0(vm["input"].as<std::string>(), output);
    fmt::print("wrote {} ({} bytes): {} tensors Q8_0, {} F16 (rows not a multiple of 32), {} copied\n", output,
               s.output_bytes, s.to_q8_0, s.to_f16, s.copied);
    return kExitOk;
}

}  // namespace ember::app
