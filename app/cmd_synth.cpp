// ember synth --shape llama-1b --vocab-from MODEL.gguf --type q8_0|q4_0|q4_1|q5_1|q2_k|q3_k_m|q4_k_m|q5_k_m|q6_k|f16|bf16 [--seed N] OUT.gguf
// Writes a random-weight model of a real shape carrying another model's tokenizer, for
// benchmarks that need no download (engine/model_tools/synth.hpp).
#include <fmt/format.h>

#include <filesystem>

#include "cli.hpp"
#include "commands.hpp"
#include "common/error.hpp"
#include "common/output_path.hpp"
#include "model_tools/quantize.hpp"
#include "model_tools/synth.hpp"

namespace ember::app {

int run_synth(const std::vector<std::string>& args) {
    std::string shapes;
    for (const auto& s : model_tools::synth_shapes()) {
        if (!shapes.empty()) shapes += '|';
        shapes += s.name;
    }
    const std::string types =
        fmt::format("weights: {} (llama-quantize's per-tensor types), f16 or bf16", model_tools::file_type_names("|"));
    po::options_description options("synth options");
    options.add_options()
        ("output", po::value<std::string>()->required(), "GGUF file to write (the positional argument)")
        ("shape", po::value<std::string>()->default_value("llama-1b"), shapes.c_str())
        ("vocab-from", po::value<std::string>()->required(), "GGUF whose tokenizer.* metadata is copied")
        ("type", po::value<std::string>()->default_value("q8_0"), types.c_str())
        ("seed", po::value<std::uint64_t>()->default_value(1), "random seed (same seed, same bytes)");
    po::positional_options_description positional;
    positional.add("output", 1);
    po::variables_map vm;
    if (!parse_options("synth", args, options, positional, vm)) return kExitOk;

    model_tools::SynthOptions o;
    o.shape = vm["shape"].as<std::string>();
    o.vocab_from = vm["vocab-from"].as<std::string>();
    o.seed = vm["seed"].as<std::uint64_t>();
    const std::string type = vm["type"].as<std::string>();
    o.type = type;

    const std::string output = vm["output"].as<std::string>();
    // Before any work: OUT is nothing yet or a regular file it replaces, never the vocabulary's model.
    check_output_file("OUT", output);
    if (same_file(output, o.vocab_from))
        throw Error(fmt::format("ember synth: OUT {} is the --vocab-from model; write the model elsewhere", output));
    model_tools::write_synth_model(o, output);
    fmt::print("wrote {} ({} bytes): shape {}, {} weights, seed {}\n", output, std::filesystem::file_size(output), o.shape,
               type, o.seed);
    return kExitOk;
}

}  // namespace ember::app
