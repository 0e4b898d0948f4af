// ember generate --model MODEL (--prompt TEXT | --file PATH) [--max-tokens N]
//                [--route fast|reference] [--kv-type f32|f16] [--ctx N] [--temperature T] [--top-k K]
//                [--top-p P] [--seed S] [--threads N] [--arch A] [--no-bos] [--json]
//                [--trace FILE]
// Continues a prompt: one prefill evaluation, then one decode evaluation per token.
// --trace writes the operation journal (docs/formats.md, "Trace journal").
// Plain output streams the generated text to stdout as it is produced (statistics go to
// stderr); --json prints one object at the end. Both are described in docs/generate.md.
#include <fmt/format.h>

#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "cli.hpp"
#include "commands.hpp"
#include "common/error.hpp"
#include "config/run_config.hpp"
#include "generation_output.hpp"
#include "gguf/gguf_file.hpp"
#include "models/model.hpp"
#include "runtime/generate.hpp"
#include "runtime/session.hpp"
#include "tokenizer/tokenizer.hpp"
#include "trace/journal.hpp"
#include "utf8_stream.hpp"

namespace ember::app {

namespace {

namespace json = boost::json;

// A non-negative integer option (Boost would wrap "-1" into a huge unsigned value).
std::size_t count_option(const po::variables_map& vm, const char* name, long long min) {
    const long long v = vm[name].as<long long>();
    if (v < min) throw UsageError(fmt::format("ember generate: --{} {} must be at least {}", name, v, min));
    return static_cast<std::size_t>(v);
}

// An option the run config also sets, in the same range as its config key.
long long ranged_option(const po::variables_map& vm, const char* name, long long min, long long max) {
    const long long v = vm[name].as<long long>();
    if (v < min || v > max) throw UsageError(fmt::format("ember generate: --{} {} must be in [{}, {}]", name, v, min, max));
    return v;
}

// A float option as the decimal the user wrote (0.8, not 0.800000011920929).
double shortest(float v) { return std::stod(fmt::format("{}", v)); }

}  // namespace

int run_generate(const std::vector<std::string>& args) {
    const long long default_threads = std::max(1u, std::thread::hardware_concurrency());
    po::options_description options("generate options");
    options.add_options()
        ("model", po::value<std::string>(), "GGUF model to run")
        ("prompt", po::value<std::string>(), "the prompt text")
        ("file", po::value<std::string>(), "a file whose bytes are the prompt")
        ("max-tokens", po::value<long long>()->default_value(32), "tokens to generate at most")
        ("route", po::value<std::string>()->default_value("fast"), "kernels: fast|reference")
        ("kv-type", po::value<std::string>()->default_value("f32"), "KV cache element type: f32|f16")
        ("ctx", po::value<long long>()->default_value(0), "context length in tokens (0: min(4096, training context))")
        ("temperature", po::value<float>()->default_value(0.0f), "0: greedy; > 0: seeded sampling")
        ("top-k", po::value<long long>()->default_value(40), "sample among the K best tokens (0: all)")
        ("top-p", po::value<float>()->default_value(0.95f), "sample within the smallest set holding this probability mass")
        ("seed", po::value<long long>()->default_value(42), "random seed for sampling")
        ("threads", po::value<long long>()->default_value(default_threads), "threads (default: the hardware threads)")
        ("arch", po::value<std::string>()->default_value("auto"), "expected architecture: auto|llama|qwen3|gemma4")
        ("no-bos", po::bool_switch(), "do not add the BOS token even if the model asks for it")
        ("json", po::bool_switch(), "print one JSON object at the end (docs/generate.md)")
        ("trace", po::value<std::string>(), "write the operation journal (JSON lines) to FILE");
    po::positional_options_description positional;
    po::variables_map vm;
    if (!parse_options("generate", args, options, positional, vm)) return kExitOk;
    if (!vm.count("model")) throw UsageError("ember generate: give --model MODEL.gguf");
    const std::string prompt = read_prompt(vm);
    const std::string model_path = vm["model"].as<std::string>();
    const auto arch = parse_arch(vm["arch"].as<std::string>());
    const auto route = runtime::route_from_name(vm["route"].as<std::string>());
    if (!route) throw UsageError(fmt::format("--route '{}' is not one of reference, fast", vm["route"].as<std::string>()));
    const auto kv_type = kernels::kv_type_from_name(vm["kv-type"].as<std::string>());
    if (!kv_type) throw UsageError(fmt::format("--kv-type '{}' is not one of f32, f16", vm["kv-type"].as<std::string>()));
    const bool as_json = vm["json"].as<bool>();

    runtime::GenerationOptions generation;
    generation.max_tokens = count_option(vm, "max-tokens", 0);
    generation.sampling.temperature = vm["temperature"].as<float>();
    generation.sampling.top_k = static_cast<std::uint32_t>(std::min<std::size_t>(count_option(vm, "top-k", 0), UINT32_MAX));
    generation.sampling.top_p = vm["top-p"].as<float>();
    generation.sampling.seed = static_cast<std::uint64_t>(ranged_option(vm, "seed", 0, config::kMaxSeed));
    runtime::validate(generation.sampling);
    runtime::SessionOptions session_options;
    session_options.route = *route;
    session_options.kv_type = *kv_type;
    session_options.context_length = count_option(vm, "ctx", 0);
    session_options.threads = static_cast<std::size_t>(ranged_option(vm, "threads", 1, config::kMaxThreads));

    const auto start = Clock::now();
    const gguf::File file = gguf::File::open(model_path);
    const auto model = models::load_model(file, arch);
    const auto tok = tokenizer::Tokenizer::from_gguf(file);
    const double load_ms = ms_since(start);

    tokenizer::EncodeOptions encode;
    if (vm["no-bos"].as<bool>()) encode.add_bos = false;
    const std::vector<std::int32_t> prompt_tokens = tok.encode_ids(prompt, encode);
    session_options.max_batch = prompt_tokens.size();
    std::optional<trace::Journal> journal;
    if (vm.count("trace")) session_options.observer = &journal.emplace(vm["trace"].as<std::string>());
    runtime::Session session(*model, session_options);

    TextPrinter print_token(tok);
    const auto is_end = [&](std::int32_t token) { return tok.is_end_of_generation(token); };
    const runtime::GenerationResult result =
        as_json ? runtime::generate(session, prompt_tokens, generation, is_end)
                : runtime::generate(session, prompt_tokens, generation, is_end, std::ref(print_token));
    const double total_ms = ms_since(start);
    std::optional<trace::JournalSummary> traced;
    if (journal) traced = journal->finish();

    if (!as_json) {
        print_token.finish();
        const std::string route_and_kernels = fmt::format("{} ({})", session.backend().route(), session.backend().variant());
        print_summary(prompt_tokens.size(), result, route_and_kernels, session.threads());
        if (traced) {
            fmt::print(stderr, "ember: trace {} ({} operations, fingerprint {})\n", traced->path.string(),
                       traced->operations, traced->fingerprint);
        }
        return kExitOk;
    }

    json::object o;
    o["model"] = model_path;
    o["model_name"] = model->config().name;
    o["family"] = models::family_name(model->config().family);
    o["route"] = session.backend().route();
    o["cpu_variant"] = session.backend().variant();
    o["kv_type"] = kernels::kv_type_name(session.kv_cache().type());
    o["threads"] = session.threads();
    o["ctx"] = session.context_length();
    o["prompt"] = valid_utf8(prompt);
    o["prompt_tokens"] = json::value_from(prompt_tokens);
    o["tokens"] = json::value_from(result.tokens);
    add_text(o, tok, result.tokens);
    o["steps"] = steps_json(tok, result.steps);
    o["stop_reason"] = runtime::stop_reason_name(result.stop_reason);
    const auto& sampling = generation.sampling;
    o["sampling"] = {{"mode", sampling.temperature == 0.0f ? "greedy" : "seeded"},
                     {"temperature", shortest(sampling.temperature)},
                     {"top_k", sampling.top_k},
                     {"top_p", shortest(sampling.top_p)},
                     {"seed", sampling.seed}};
    o["timings"] = timings_json(result.timings, prompt_tokens.size(), load_ms, total_ms);
    if (traced) {
        o["trace"] = {{"path", traced->path.string()},
                      {"operations", traced->operations},
                      {"evaluations", traced->evaluations},
                      {"fingerprint", traced->fingerprint}};
    }
    print_json(o);
    return kExitOk;
}

}  // namespace ember::app
