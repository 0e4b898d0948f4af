// ember: the command-line entry point. Dispatches to a subcommand and turns errors into
// exit codes: 0 success, 1 the work failed, 2 bad usage. Errors go to stderr.
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <string_view>

#include "cli.hpp"
#include "commands.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"

namespace {

struct Subcommand {
    std::string_view name;
    std::string_view summary;
    int (*run)(const std::vector<std::string>&);
};

constexpr Subcommand kSubcommands[] = {
    {"inspect", "describe a GGUF model: family, hyperparameters, tokenizer, tensors", ember::app::run_inspect},
    {"tokenize", "tokenize a text: ids, pieces and byte spans", ember::app::run_tokenize},
    {"template", "render a chat template with a conversation, exactly as Hugging Face does", ember::app::run_template},
    {"detokenize", "turn token ids into text: their pieces joined", ember::app::run_detokenize},
    {"vocab", "print a model's vocabulary: id, type and piece of every token", ember::app::run_vocab},
    {"generate", "continue a prompt: greedy or seeded sampling, streamed or as JSON", ember::app::run_generate},
    {"run", "run a run config: experiments composed on a generation, run.json written", ember::app::run_run},
    {"plugins", "validate experiment plugins: print a plugin's descriptor without running it", ember::app::run_plugins},
    {"sweep", "run many run configs: progress, a summary, verified results skipped", ember::app::run_sweep},
    {"extract", "write hidden states, logits and a logit lens as .npy files with a manifest", ember::app::run_extract},
    {"merge", "join the shards of a dataset extraction into one sealed run directory", ember::app::run_merge},
    {"attribute", "gradients of a metric at every chosen stage, layer and position (reference route)",
     ember::app::run_attribute},
    {"sae", "SAE features of an extraction: the rows where a feature fires most (sae top)", ember::app::run_sae},
    {"verify", "check a run directory against its manifest: checksums, shapes, seal", ember::app::run_verify},
    {"trace", "trace journals: export to the Chrome trace format, print a fingerprint", ember::app::run_trace},
    {"quantize", "rewrite an F32/F16/BF16 model with quantized weights, as llama-quantize does", ember::app::run_quantize},
    {"synth", "write a random-weight model of a real shape with another model's tokenizer", ember::app::run_synth},
    {"bench", "measure prefill and decode speed and peak memory, as llama.cpp's peer does", ember::app::run_bench},
};

void print_usage(std::FILE* out) {
    fmt::print(out, "usage: ember <command> [options]   (ember <command> --help for its options)\n\ncommands:\n");
    for (const auto& c : kSubcommands) fmt::print(out, "  {:<10} {}\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        print_usage(stderr);
        return ember::app::kExitUsage;
    }
    const std::string_view command = argv[1];
    if (command == "--help" || command == "-h" || command == "help") {
        print_usage(stdout);
        return 0;
    }
    const std::vector<std::string> args(argv + 2, argv + argc);
    // Every command that writes a file (synth, quantize, tokenize --out, runs) removes its
    // temporaries on SIGINT/SIGTERM, not only those that open a run directory.
    ember::install_signal_cleanup();
    for (const auto& c : kSubcommands) {
        if (c.name != command) continue;
        try {
            return c.run(args);
        } catch (const ember::UsageError& e) {
            fmt::print(stderr, "error: {}\n", e.what());
            return ember::app::kExitUsage;
        } catch (const std::exception& e) {
            fmt::print(stderr, "error: {}\n", e.what());
            return ember::app::kExitFailure;
        }
    }
    fmt::print(stderr, "error: unknown command '{}'\n", command);
    print_usage(stderr);
    return ember::app::kExitUsage;
}
