// ember generate --model MODEL (--prompt TEXT | --file PATH | --ids 1,2,3) [--special] [--target TEXT] [--max-tokens N]
//                [--route fast|reference] [--kv-type f32|f16] [--ctx N] [--temperature T] [--top-k K]
//                [--top-p P] [--seed S] [--threads N] [--arch A] [--no-bos] [--json]
//                [--trace FILE]
// Continues a prompt: one prefill evaluation, then one decode evaluation per token. The
// model options are every model-running command's (cli.hpp, model_options); the request
// runs through app/run_job as `ember run` runs a config, without a run directory.
// --trace writes the operation journal (docs/formats.md, "Trace journal").
// Plain output streams the generated text to stdout as it is produced (statistics go to
// stderr); --json prints one object at the end. Both are described in docs/generate.md.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <string>

#include "chat/thinking.hpp"
#include "cli.hpp"
#include "commands.hpp"
#include "common/error.hpp"
#include "common/output_path.hpp"
#include "config/run_config.hpp"
#include "record/manifest.hpp"
#include "generation_output.hpp"
#include "models/family.hpp"
#include "run_pipeline.hpp"
#include "runtime/generate.hpp"
#include "runtime/prompt.hpp"
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

// A conversation's reply in --json: "text" (its thinking block kept, marked), "thinking"
// (the block's text, null when there is none), "thinking_closed", "answer".
void add_chat_reply(json::object& o, const tokenizer::Tokenizer& tok, const runtime::EncodedPrompt& prompt,
                    std::span<const std::int32_t> tokens) {
    const std::optional<chat::ThinkingMarkers>& markers = prompt.thinking_markers;
    if (!markers) {
        o["thinking"] = nullptr;
        o["answer"] = o["text"];
        return;
    }
    const std::string text = chat::marked_text(tok, tokens, *markers);
    o["text"] = valid_utf8(text);
    const chat::Reply reply = chat::split_reply(prompt.text, text, *markers);
    o["thinking"] = reply.thinking ? json::value(valid_utf8(*reply.thinking)) : json::value(nullptr);
    o["thinking_closed"] = reply.thinking_closed;
    o["answer"] = valid_utf8(reply.answer);
}

// generate's options: the model's, the prompt's, a target, a conversation, and sampling.
po::options_description generate_options() {
    po::options_description options("generate options");
    options.add(model_options()).add(prompt_options()).add(target_options()).add(chat_options());
    options.add_options()
        ("max-tokens", po::value<long long>()->default_value(32), "tokens to generate at most")
        ("temperature", po::value<float>()->default_value(0.0f), "0: greedy; > 0: seeded sampling")
        ("top-k", po::value<long long>()->default_value(40), "sample among the K best tokens (0: all)")
        ("top-p", po::value<float>()->default_value(0.95f), "sample within the smallest set holding this probability mass")
        ("seed", po::value<long long>()->default_value(42), "random seed for sampling")
        ("json", po::bool_switch(), "print one JSON object at the end (docs/generate.md)")
        ("trace", po::value<std::string>(), "write the operation journal (JSON lines) to FILE")
        ("sae", po::value<std::vector<std::string>>()->composing(),
         "load this SAE (a SAELens directory) spliced at its site (repeatable; docs/features.md)");
    return options;
}

}  // namespace

int run_generate(const std::vector<std::string>& args) {
    const po::options_description options = generate_options();
    po::positional_options_description positional;
    po::variables_map vm;
    if (!parse_options("generate", args, options, positional, vm)) return kExitOk;
    if (!vm.count("model")) throw UsageError("ember generate: give --model MODEL.gguf");
    const bool chat = chat_requested(vm);
    const bool ids = vm.count("ids") > 0;
    if (ids && (vm.count("prompt") || vm.count("file") || chat))
        throw UsageError("ember generate: give exactly one of --prompt TEXT, --file PATH, --ids 1,2,3 or --chat VARS.json");
    const std::string prompt = chat || ids ? std::string() : read_prompt(vm);
    const std::string model_path = vm["model"].as<std::string>();
    const bool as_json = vm["json"].as<bool>();

    // The request as the run config that means the same; it runs as `ember run` runs one,
    // without a run directory.
    config::RunConfig config;
    apply_model_options(vm, config.model, false);
    apply_prompt_options(vm, config.prompt, false);
    if (!ids) {  // the text itself, not the file (read once, above)
        config.prompt.file.reset();
        config.prompt.text = prompt;
    }
    if (chat) apply_chat_options(vm, config.prompt);  // the conversation, rendered with the chat template
    config.generation.max_tokens = static_cast<std::uint32_t>(std::min<std::size_t>(count_option(vm, "max-tokens", 0), UINT32_MAX));
    config.generation.temperature = vm["temperature"].as<float>();
    config.generation.top_k = static_cast<std::uint32_t>(std::min<std::size_t>(count_option(vm, "top-k", 0), UINT32_MAX));
    config.generation.top_p = vm["top-p"].as<float>();
    config.generation.seed = static_cast<std::uint64_t>(ranged_option(vm, "seed", 0, config::kMaxSeed));
    runtime::SamplingOptions sampling;
    sampling.temperature = vm["temperature"].as<float>();
    sampling.top_k = config.generation.top_k;
    sampling.top_p = vm["top-p"].as<float>();
    sampling.seed = config.generation.seed;
    runtime::validate(sampling);
    if (vm.count("trace")) {
        config.tracing.enabled = true;
        config.tracing.path = vm["trace"].as<std::string>();
        check_output_file("--trace", config.tracing.path);  // before any work
    }
    if (vm.count("sae"))
        for (const auto& dir : vm["sae"].as<std::vector<std::string>>())
            config.saes.push_back({std::filesystem::absolute(dir).lexically_normal(), std::nullopt, true});

    const auto start = Clock::now();
    const LoadedModel model(config.model.path, family_from_config(config));
    const double load_ms = ms_since(start);
    const tokenizer::Tokenizer& tok = model.tokenizer;
    // The conversation as the run renders it, for --json's record of the prompt and the
    // reply's thinking markers (rendering takes microseconds: docs/chat.md).
    std::optional<runtime::EncodedPrompt> rendered;
    if (chat) rendered = runtime::encode_run_prompt(model, config.prompt);

    TextPrinter print_token(tok);
    if (rendered && rendered->thinking_markers) print_token.show(chat::hidden_marker_tokens(tok, *rendered->thinking_markers));
    RunOptions run_options;
    run_options.record = false;
    if (!as_json) run_options.on_token = std::ref(print_token);
    const RunOutcome outcome = execute_run(config, model, run_options, supervision_for(config, run_options));
    const runtime::GenerationResult& result = outcome.result;
    const std::vector<std::int32_t>& prompt_tokens = outcome.prompt_tokens;
    const double total_ms = ms_since(start);
    const std::optional<trace::JournalSummary>& traced = outcome.trace;

    if (!as_json) {
        print_token.finish();
        const std::string route_and_kernels = fmt::format("{} ({})", outcome.route, outcome.variant);
        print_summary(prompt_tokens.size(), result, route_and_kernels, outcome.threads);
        if (outcome.target) print_target(*outcome.target);
        if (traced) {
            fmt::print(stderr, "ember: trace {} ({} operations, fingerprint {})\n", traced->path.string(),
                       traced->operations, traced->fingerprint);
        }
        return kExitOk;
    }

    json::object o;
    o["model"] = model_path;
    const models::ModelConfig& model_config = model.model->config();
    o["model_name"] = model_config.name;
    o["family"] = models::family_name(model_config.family);
    o["route"] = outcome.route;
    o["cpu_variant"] = outcome.variant;
    o["kv_type"] = config.model.kv_type;
    o["threads"] = outcome.threads;
    o["ctx"] = config.model.ctx != 0 ? config.model.ctx : runtime::default_context_length(model_config);
    o["prompt"] = valid_utf8(rendered ? rendered->text
                                      : ids ? runtime::encode_ids(tok, *config.prompt.ids, "--ids").text : prompt);
    o["prompt_tokens"] = json::value_from(prompt_tokens);
    if (rendered) {
        o["chat"] = *rendered->chat;
        o["token_messages"] = runtime::token_messages_json(*rendered);
    }
    o["tokens"] = json::value_from(result.tokens);
    add_text(o, tok, result.tokens);
    if (rendered) add_chat_reply(o, tok, *rendered, result.tokens);
    o["steps"] = steps_json(tok, result.steps);
    o["stop_reason"] = runtime::stop_reason_name(result.stop_reason);
    o["sampling"] = {{"mode", sampling.temperature == 0.0f ? "greedy" : "seeded"},
                     {"temperature", shortest(sampling.temperature)},
                     {"top_k", sampling.top_k},
                     {"top_p", shortest(sampling.top_p)},
                     {"seed", sampling.seed}};
    o["timings"] = timings_json(result.timings, prompt_tokens.size(), load_ms, total_ms);
    if (outcome.target) o["target"] = *outcome.target;
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
