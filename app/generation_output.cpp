#include "generation_output.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <iterator>

#include "common/error.hpp"

namespace ember::app {

double ms_since(Clock::time_point start) { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); }

double per_second(std::size_t count, double ms) { return ms > 0 ? static_cast<double>(count) / (ms / 1000.0) : 0.0; }

void write_stdout(std::string_view text) {
    if (text.empty()) return;
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
        throw Error("cannot write the generated text to standard output");
    }
}

std::string hex(std::string_view bytes) {
    std::string out;
    for (const char c : bytes) fmt::format_to(std::back_inserter(out), "{:02x}", static_cast<unsigned char>(c));
    return out;
}

void print_summary(std::size_t prompt_tokens, const runtime::GenerationResult& result, std::string_view route,
                   std::size_t threads) {
    const runtime::GenerationTimings& t = result.timings;
    fmt::print(stderr,
               "ember: {} prompt tokens, {} generated ({}); prefill {:.1f} tok/s, decode {:.1f} tok/s, route {}, "
               "{} threads\n",
               prompt_tokens, result.tokens.size(), runtime::stop_reason_name(result.stop_reason),
               per_second(prompt_tokens, t.prefill_ms), per_second(t.decode_evaluations, t.decode_ms), route, threads);
}

void add_text(boost::json::object& out, const tokenizer::Tokenizer& tokenizer, std::span<const std::int32_t> tokens) {
    const std::string text = tokenizer.decode(tokens);
    out["text"] = valid_utf8(text);
    out["text_hex"] = hex(text);
}

namespace {

// A number, or for a logit an experiment made non-finite "+inf", "-inf" or "nan": JSON has no such numbers.
boost::json::value logit_json(float v) {
    if (std::isfinite(v)) return v;
    if (std::isnan(v)) return "nan";
    return v > 0 ? "+inf" : "-inf";
}

}  // namespace

boost::json::array steps_json(const tokenizer::Tokenizer& tokenizer, std::span<const runtime::GenerationStep> steps) {
    boost::json::array out;
    for (const auto& s : steps) {
        const std::string piece = tokenizer.piece(s.token);
        out.push_back({{"token", s.token}, {"piece", valid_utf8(piece)}, {"piece_hex", hex(piece)},
                       {"logit", logit_json(s.logit)}, {"margin", logit_json(s.margin)}});
    }
    return out;
}

boost::json::object timings_json(const runtime::GenerationTimings& t, std::size_t prompt_tokens, double load_ms,
                                 double total_ms) {
    return {{"load_ms", load_ms},
            {"prefill_ms", t.prefill_ms},
            {"decode_ms", t.decode_ms},
            {"sampling_ms", t.sampling_ms},
            {"total_ms", total_ms},
            {"prefill_tok_s", per_second(prompt_tokens, t.prefill_ms)},
            {"decode_tok_s", per_second(t.decode_evaluations, t.decode_ms)}};
}

}  // namespace ember::app

namespace ember::app {

void print_target(const boost::json::object& target) {
    const boost::json::value& logprob = target.at("logprob");  // null when not finite (after the worker's strict JSON)
    fmt::print(stderr, "ember: target log-probability {} over {} tokens\n",
               logprob.is_double() ? fmt::format("{:.6f}", logprob.as_double()) : std::string("(not finite)"),
               target.at("n_tokens").to_number<std::size_t>());
}

}  // namespace ember::app
