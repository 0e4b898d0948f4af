// ember tokenize --model MODEL (--prompt TEXT | --file PATH | --chat VARS.json [--template FILE])
//                [--prompt-ids 1,2,3] [--no-bos] [--special] [--json | --ids] [--timing]
// Prints the tokens of a text with their ids, pieces and byte spans [start, end) in the
// UTF-8 input. Output formats are documented in docs/tokenizer.md.
#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <optional>

#include "chat/chat_prompt.hpp"
#include "cli.hpp"
#include "commands.hpp"
#include "common/error.hpp"
#include "record/manifest.hpp"
#include "record/strict_json.hpp"
#include "gguf/gguf_file.hpp"
#include "pieces.hpp"
#include "runtime/prompt.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/unicode.hpp"

namespace ember::app {
namespace {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

void print_ids(const std::vector<tokenizer::Token>& tokens) {
    // Every id written in place with to_chars into a buffer sized once (11 bytes an id with
    // its space), not a format string per id: that was a quarter of a 1 MB text's whole run.
    fmt::memory_buffer out;
    out.resize(tokens.size() * 12 + 1);
    char* at = out.data();
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        if (i) *at++ = ' ';
        at = std::to_chars(at, at + 11, tokens[i].id).ptr;
    }
    *at++ = '\n';
    out.resize(static_cast<std::size_t>(at - out.data()));
    write_stdout_or_throw(out);
}

void print_token_table(const tokenizer::Tokenizer& tok, const std::string& model_path, std::size_t text_bytes,
                 const std::vector<tokenizer::Token>& tokens) {
    fmt::memory_buffer out;
    fmt::format_to(std::back_inserter(out), "# {} tokens for {} bytes; tokenizer {}/{} ({})\n", tokens.size(), text_bytes,
                   tok.info().model, tok.info().pre.empty() ? "-" : tok.info().pre, model_path);
    fmt::format_to(std::back_inserter(out), "# index\tid\tstart\tend\tpiece\n");
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        const auto& t = tokens[i];
        fmt::format_to(std::back_inserter(out), "{}\t{}\t{}\t{}\t", i, t.id, t.start, t.end);
        append_escaped(out, tok.piece(t.id, true));
        out.push_back('\n');
    }
    write_stdout_or_throw(out);
}

json::object token_json(const tokenizer::Tokenizer& tok, const tokenizer::Token& t) {
    const std::string piece = tok.piece(t.id, true);
    json::object o;
    o["id"] = t.id;
    if (tokenizer::unicode::is_valid_utf8(piece)) {
        o["piece"] = piece;
    } else {
        o["piece"] = nullptr;  // part of a UTF-8 character (or invalid input bytes): see piece_hex
        o["piece_hex"] = record::hex(piece);
    }
    o["start"] = t.start;
    o["end"] = t.end;
    return o;
}

// The header fields, then the tokens one object per line (readable and diff-able even
// for long texts).
// With --chat: the prompt record, and for each token the message it belongs to.
struct ChatTokens {
    const chat::ChatPrompt* prompt = nullptr;
    std::vector<std::int32_t> owners;  // per token: a message index, or -1 (template text)
};

void print_json_tokens(const tokenizer::Tokenizer& tok, const std::string& model_path, std::size_t text_bytes,
                       const tokenizer::EncodeOptions& options, const std::vector<tokenizer::Token>& tokens,
                       const ChatTokens& chat = {}) {
    const auto& info = tok.info();
    json::object header;
    header["schema_version"] = 1;
    header["model"] = model_path;
    header["tokenizer"] = {{"model", info.model}, {"pre", info.pre}, {"vocab_size", tok.vocab_size()}};
    header["add_bos"] = options.add_special && options.add_bos.value_or(info.add_bos);
    header["parse_special"] = options.parse_special;
    header["text_bytes"] = text_bytes;
    header["n_tokens"] = tokens.size();
    if (chat.prompt) header["chat"] = chat::prompt_record(*chat.prompt);

    fmt::memory_buffer out;
    auto put = [&](std::string_view s) { out.append(s.data(), s.data() + s.size()); };
    put("{\n");
    for (const auto& field : header) {
        put("  ");
        put(strict_json(json::string(field.key())));
        put(": ");
        put(strict_json(field.value()));
        put(",\n");
    }
    put("  \"tokens\": [");
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        put(i ? ",\n    " : "\n    ");
        json::object t = token_json(tok, tokens[i]);
        if (chat.prompt) {
            const std::int32_t m = chat.owners[i];
            t["message"] = m < 0 ? json::value(nullptr) : json::value(m);
            t["role"] = m < 0 ? json::value(nullptr) : json::value(chat.prompt->roles.at(static_cast<std::size_t>(m)));
        }
        put(strict_json(t));
    }
    put(tokens.empty() ? "]\n}\n" : "\n  ]\n}\n");
    write_stdout_or_throw(out);
}

}  // namespace

int run_tokenize(const std::vector<std::string>& args) {
    po::options_description options("tokenize options");
    // --ids is the output format here: the prompt as ids is --prompt-ids.
    options.add(prompt_options("prompt-ids")).add(chat_options());
    options.add_options()
        ("model", po::value<std::string>(), "GGUF file whose tokenizer to use")
        ("json", po::bool_switch(), "JSON output: a tokens array of {id, piece, start, end} (docs/tokenizer.md)")
        ("ids", po::bool_switch(), "print only the ids, space-separated, on one line")
        ("timing", po::bool_switch(), "print load and tokenize times (seconds) as JSON on stderr");
    po::positional_options_description positional;
    po::variables_map vm;
    if (!parse_options("tokenize", args, options, positional, vm)) return kExitOk;
    if (!vm.count("model")) throw UsageError("ember tokenize: give --model MODEL.gguf");
    if (vm["json"].as<bool>() && vm["ids"].as<bool>()) throw UsageError("ember tokenize: --json and --ids exclude each other");
    const bool chat = chat_requested(vm);
    std::optional<json::object> chat_vars;
    if (chat) chat_vars = chat::read_vars_file(vm["chat"].as<std::string>());
    const bool given_ids = vm.count("prompt-ids") > 0;
    if (given_ids && (chat || vm.count("prompt") || vm.count("file")))
        throw UsageError("ember tokenize: give exactly one of --prompt TEXT, --file PATH, --prompt-ids 1,2,3 or --chat VARS.json");
    if (given_ids && vm["no-bos"].as<bool>()) throw UsageError("--no-bos does not apply to --prompt-ids: the ids are the sequence as given");
    const std::vector<std::int32_t> prompt_ids = given_ids ? parse_ids(vm["prompt-ids"].as<std::string>(), "prompt-ids")
                                                           : std::vector<std::int32_t>{};
    std::string text = chat || given_ids ? std::string() : read_prompt(vm);
    const std::string model_path = vm["model"].as<std::string>();

    const auto load_start = Clock::now();
    const auto file = gguf::File::open(model_path);
    const auto tok = tokenizer::Tokenizer::from_gguf(file);
    const double load_s = seconds_since(load_start);

    tokenizer::EncodeOptions encode_options;
    if (vm["no-bos"].as<bool>()) encode_options.add_bos = false;
    encode_options.parse_special = vm["special"].as<bool>();
    const auto encode_start = Clock::now();
    std::vector<tokenizer::Token> tokens;
    std::optional<chat::ChatPrompt> prompt;
    ChatTokens chat_tokens;
    if (chat) {
        // The rendered conversation: special tokens parsed, BOS only if the template wrote none.
        chat::TemplateChoice choice;
        if (vm.count("template")) choice.file = vm["template"].as<std::string>();
        if (vm.count("template-name")) choice.name = vm["template-name"].as<std::string>();
        prompt = chat::render_prompt(chat::load_template(choice, &file, model_path), std::move(*chat_vars), &tok);
        tokens = chat::tokenize_prompt(*prompt, tok);
        text = prompt->text;
        encode_options.parse_special = true;
        encode_options.add_bos = prompt->bos.added;
        chat_tokens.prompt = &*prompt;
        chat_tokens.owners = chat::token_messages(tokens, prompt->origins);
    } else if (given_ids) {
        // The ids as they are: each checked against the vocabulary, the text their pieces joined.
        runtime::EncodedPrompt encoded = runtime::encode_ids(tok, prompt_ids, "--prompt-ids");
        tokens = std::move(encoded.tokens);
        text = std::move(encoded.text);
        encode_options.add_bos = false;
    } else {
        tokens = tok.encode(text, encode_options);
    }
    const double tokenize_s = seconds_since(encode_start);

    if (vm["json"].as<bool>()) {
        print_json_tokens(tok, model_path, text.size(), encode_options, tokens, chat_tokens);
    } else if (vm["ids"].as<bool>()) {
        print_ids(tokens);
    } else {
        print_token_table(tok, model_path, text.size(), tokens);
    }
    if (vm["timing"].as<bool>()) {
        fmt::print(stderr, "{{\"load_s\": {:.6f}, \"tokenize_s\": {:.6f}, \"tokens\": {}, \"bytes\": {}}}\n", load_s,
                   tokenize_s, tokens.size(), text.size());
    }
    return kExitOk;
}

}  // namespace ember::app
