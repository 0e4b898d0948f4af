// What `ember generate` and `ember run` share when they show a generation: the text
// streamed to stdout as tokens are chosen, the one-line summary on stderr, and the JSON
// records of the generated tokens and the timings (docs/generate.md, docs/run-config.md).
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/generate.hpp"
#include "tokenizer/tokenizer.hpp"
#include "utf8_stream.hpp"

namespace ember::app {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start);
double per_second(std::size_t count, double ms);  // 0 when no time passed

// Writes `text` to stdout and flushes; throws ember::Error when stdout cannot take it.
void write_stdout(std::string_view text);

// The bytes as lowercase hex, two digits each.
std::string hex(std::string_view bytes);

// Streams generated text to stdout: call it with each token as it is chosen, then
// finish() once (prints what is held back of an incomplete character, and a newline).
class TextPrinter {
public:
    explicit TextPrinter(const tokenizer::Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
    void operator()(std::int32_t token) {
        printed_any_ = true;
        const bool shown = std::find(shown_.begin(), shown_.end(), token) != shown_.end();
        write_stdout(stream_.push(tokenizer_.piece(token, shown)));
    }
    // Tokens printed as their text although decoding leaves them out (a conversation's
    // thinking markers that are CONTROL tokens, as Gemma 4's <|channel>).
    void show(std::vector<std::int32_t> tokens) { shown_ = std::move(tokens); }
    void finish() { write_stdout(stream_.finish() + "\n"); }
    bool printed_any() const { return printed_any_; }

private:
    const tokenizer::Tokenizer& tokenizer_;
    Utf8Stream stream_;
    std::vector<std::int32_t> shown_;
    bool printed_any_ = false;
};

// "ember: 9 prompt tokens, 32 generated (max_tokens); prefill ... tok/s, decode ... tok/s, route reference, 2 threads"
void print_summary(std::size_t prompt_tokens, const runtime::GenerationResult& result, std::string_view route,
                   std::size_t threads);
// "ember: target log-probability -3.141593 over 2 tokens" (a --target's score, target_record's fields)
void print_target(const boost::json::object& target);

// Sets "text" (the tokens decoded; invalid UTF-8 replaced by U+FFFD) and "text_hex" (the exact bytes).
void add_text(boost::json::object& out, const tokenizer::Tokenizer& tokenizer, std::span<const std::int32_t> tokens);

// Per generated token: token, piece, piece_hex, logit, margin.
boost::json::array steps_json(const tokenizer::Tokenizer& tokenizer, std::span<const runtime::GenerationStep> steps);

// load_ms, prefill_ms, decode_ms, sampling_ms, total_ms, prefill_tok_s, decode_tok_s.
boost::json::object timings_json(const runtime::GenerationTimings& timings, std::size_t prompt_tokens, double load_ms,
                                 double total_ms);

}  // namespace ember::app
