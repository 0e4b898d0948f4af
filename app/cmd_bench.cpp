// ember bench --model MODEL [--prompt-tokens 128] [--gen-tokens 64] [--repeat 5]
//             [--warmup 1] [--json] [the model options: --route --threads --ctx --kv-type --arch]
// Prefill and decode speed the way llama.cpp's peer (shared/tools/peer-llamacpp/peer.mjs)
// measures them: a fixed mixed English/Arabic text, tokenized without BOS and repeated to
// exactly --prompt-tokens tokens, evaluated in one prefill that ends with the first
// greedy token; then --gen-tokens - 1 decode evaluations, each ending with its greedy
// token. prefill tok/s = prompt tokens / prefill time; decode tok/s = decoded tokens /
// decode time. Each repeat starts a fresh sequence in the same session; warm-up repeats
// (untimed) first touch the mapped weights, as llama.cpp's loader pre-faults its mapping.
// Reports the median and the range over repeats, and the process's peak resident memory.
#include <sys/resource.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "cli.hpp"
#include "commands.hpp"
#include "common/error.hpp"
#include "extract/extraction.hpp"
#include "config/run_config.hpp"
#include "gguf/gguf_file.hpp"
#include "models/model.hpp"
#include "runtime/prompt.hpp"
#include "runtime/sampler.hpp"
#include "runtime/session.hpp"
#include "runtime/threads.hpp"
#include "tokenizer/tokenizer.hpp"

namespace ember::app {

namespace {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

// peer.mjs's prompt text.
constexpr const char* kBenchText = "Once upon a time, there was a little girl. كتب الطالب الدرس في المكتبة. ";

std::size_t positive_option(const po::variables_map& vm, const char* name, long long min) {
    const long long v = vm[name].as<long long>();
    if (v < min) throw UsageError(fmt::format("ember bench: --{} {} must be at least {}", name, v, min));
    return static_cast<std::size_t>(v);
}

std::uint64_t peak_rss_bytes() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

struct Summary {
    double median = 0, min = 0, max = 0;
};

Summary summarize(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    const double median = n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
    return {median, values.front(), values.back()};
}

struct Timing {
    double prefill_tok_s = 0, decode_tok_s = 0;
};

// One sequence: prefill to the first greedy token, then gen_tokens - 1 decoded tokens.
Timing run_once(runtime::Session& session, const std::vector<std::int32_t>& prompt, std::size_t gen_tokens) {
    session.reset();
    const auto start = Clock::now();
    kernels::ConstRows logits = session.prefill(prompt);
    std::int32_t token = runtime::greedy_token({logits.row(0), logits.cols});
    const double prefill_s = seconds_since(start);
    const auto decode_start = Clock::now();
    for (std::size_t i = 1; i < gen_tokens; ++i) {
        logits = session.decode(token);
        token = runtime::greedy_token({logits.row(0), logits.cols});
    }
    const double decode_s = seconds_since(decode_start);
    return {static_cast<double>(prompt.size()) / prefill_s, gen_tokens > 1 ? static_cast<double>(gen_tokens - 1) / decode_s : 0.0};
}

json::object summary_json(const Summary& s) { return {{"median", s.median}, {"min", s.min}, {"max", s.max}}; }

}  // namespace

int run_bench(const std::vector<std::string>& args) {
    po::options_description options("bench options");
    options.add(model_options());
    options.add_options()
        ("prompt-tokens", po::value<long long>()->default_value(128), "prompt length in tokens")
        ("gen-tokens", po::value<long long>()->default_value(64), "generated tokens (the first ends the prefill)")
        ("repeat", po::value<long long>()->default_value(5), "timed repeats")
        ("warmup", po::value<long long>()->default_value(1), "untimed repeats first")
        ("json", po::bool_switch(), "print one JSON object");
    po::positional_options_description positional;
    po::variables_map vm;
    if (!parse_options("bench", args, options, positional, vm)) return kExitOk;
    if (!vm.count("model")) throw UsageError("ember bench: give --model MODEL.gguf");
    const std::string model_path = vm["model"].as<std::string>();
    const std::size_t prompt_tokens = positive_option(vm, "prompt-tokens", 1);
    const std::size_t gen_tokens = positive_option(vm, "gen-tokens", 1);
    const std::size_t repeat = positive_option(vm, "repeat", 1);
    const std::size_t warmup = positive_option(vm, "warmup", 0);
    config::ModelSection chosen;
    apply_model_options(vm, chosen, false);
    const auto kv_type = *kernels::kv_type_from_name(chosen.kv_type);  // apply_model_options checked both
    runtime::SessionOptions session_options;
    session_options.route = *runtime::route_from_name(chosen.route);
    session_options.kv_type = kv_type;
    session_options.threads = runtime::effective_threads(chosen.threads);
    session_options.context_length = chosen.ctx;
    session_options.max_batch = prompt_tokens;

    const gguf::File file = gguf::File::open(model_path);
    const auto model = models::load_model(file, parse_arch(chosen.arch));
    const auto tok = tokenizer::Tokenizer::from_gguf(file);
    tokenizer::EncodeOptions encode;
    encode.add_bos = false;
    const std::vector<std::int32_t> text_ids = tok.encode_ids(kBenchText, encode);
    if (text_ids.empty()) throw Error(fmt::format("{}: the benchmark text tokenizes to nothing", model_path));
    std::vector<std::int32_t> prompt(prompt_tokens);
    for (std::size_t i = 0; i < prompt_tokens; ++i) prompt[i] = text_ids[i % text_ids.size()];

    runtime::Session session(*model, session_options);
    if (prompt_tokens + gen_tokens > session.context_length()) {
        throw UsageError(fmt::format("ember bench: {} prompt and {} generated tokens do not fit --ctx {}", prompt_tokens, gen_tokens,
                                     session.context_length()));
    }
    for (std::size_t i = 0; i < warmup; ++i) run_once(session, prompt, gen_tokens);
    std::vector<double> prefill, decode;
    for (std::size_t i = 0; i < repeat; ++i) {
        const Timing t = run_once(session, prompt, gen_tokens);
        prefill.push_back(t.prefill_tok_s);
        decode.push_back(t.decode_tok_s);
    }
    const Summary p = summarize(prefill), d = summarize(decode);
    const std::uint64_t rss = peak_rss_bytes();
    const std::uint64_t model_bytes = std::filesystem::file_size(model_path);

    if (!vm["json"].as<bool>()) {
        fmt::print("{}: {} route ({}), {} threads, KV {} ctx {}\n", model_path, session.backend().route(),
                   session.backend().variant(), session.threads(), kernels::kv_type_name(kv_type), session.context_length());
        fmt::print("prefill {:.1f} tok/s (min {:.1f}, max {:.1f}), {} tokens\n", p.median, p.min, p.max, prompt_tokens);
        fmt::print("decode  {:.1f} tok/s (min {:.1f}, max {:.1f}), {} tokens\n", d.median, d.min, d.max, gen_tokens - 1);
        fmt::print("peak RSS {:.0f} MiB (model file {:.0f} MiB, KV cache {:.0f} MiB); {} repeats\n", rss / 1048576.0,
                   model_bytes / 1048576.0, session.kv_cache().bytes() / 1048576.0, repeat);
        return kExitOk;
    }
    json::object o;
    o["model"] = model_path;
    o["route"] = session.backend().route();
    o["cpu_variant"] = session.backend().variant();
    o["kv_type"] = kernels::kv_type_name(kv_type);
    o["threads"] = session.threads();
    o["ctx"] = session.context_length();
    o["prompt_tokens"] = prompt_tokens;
    o["gen_tokens"] = gen_tokens;
    o["repeat"] = repeat;
    o["prefill_tok_s"] = p.median;
    o["decode_tok_s"] = d.median;
    o["prefill_tok_s_spread"] = summary_json(p);
    o["decode_tok_s_spread"] = summary_json(d);
    o["prefill_tok_s_runs"] = json::value_from(prefill);
    o["decode_tok_s_runs"] = json::value_from(decode);
    o["peak_rss_bytes"] = rss;
    o["model_bytes"] = model_bytes;
    o["kv_cache_bytes"] = session.kv_cache().bytes();
    print_json(o);
    return kExitOk;
}

}  // namespace ember::app
