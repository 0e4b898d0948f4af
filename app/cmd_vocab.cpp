// ember vocab --model MODEL [--json]
// Every token of the model's vocabulary: id, type and piece, one a line ("ID TYPE PIECE",
// the piece quoted and escaped as `ember tokenize` prints it); with --json, one array of
// {id, type, piece (text when valid UTF-8, else null), piece_hex}. Only the tokenizer is loaded.
#include <fmt/format.h>

#include "cli.hpp"
#include "commands.hpp"
#include "common/error.hpp"
#include "record/manifest.hpp"
#include "gguf/gguf_file.hpp"
#include "pieces.hpp"
#include "tokenizer/tokenizer.hpp"

namespace ember::app {
namespace {

std::string_view type_name(tokenizer::TokenType type) {
    switch (type) {
        case tokenizer::TokenType::Undefined: return "undefined";
        case tokenizer::TokenType::Normal: return "normal";
        case tokenizer::TokenType::Unknown: return "unknown";
        case tokenizer::TokenType::Control: return "control";
        case tokenizer::TokenType::UserDefined: return "user_defined";
        case tokenizer::TokenType::Unused: return "unused";
        case tokenizer::TokenType::Byte: return "byte";
    }
    return "undefined";
}

}  // namespace

int run_vocab(const std::vector<std::string>& args) {
    po::options_description options("vocab options");
    options.add_options()
        ("model", po::value<std::string>(), "GGUF model whose vocabulary to print")
        ("json", po::bool_switch(), "print one JSON array");
    po::positional_options_description positional;
    po::variables_map vm;
    if (!parse_options("vocab", args, options, positional, vm)) return kExitOk;
    if (!vm.count("model")) throw UsageError("ember vocab: give --model MODEL.gguf");

    const auto file = gguf::File::open(vm["model"].as<std::string>());
    const auto tok = tokenizer::Tokenizer::from_gguf(file);
    const auto n = static_cast<std::int32_t>(tok.vocab_size());
    if (vm["json"].as<bool>()) {
        boost::json::array tokens;
        tokens.reserve(tok.vocab_size());
        for (std::int32_t id = 0; id < n; ++id) {
            const std::string piece = tok.piece(id, true);
            tokens.push_back({{"id", id},
                              {"type", type_name(tok.token_type(id))},
                              {"piece", record::piece_text(piece)},
                              {"piece_hex", record::hex(piece)}});
        }
        fmt::memory_buffer out;
        const std::string text = boost::json::serialize(tokens);
        out.append(text.data(), text.data() + text.size());
        out.push_back('\n');
        write_stdout_or_throw(out);
        return kExitOk;
    }
    fmt::memory_buffer out;
    for (std::int32_t id = 0; id < n; ++id) {
        fmt::format_to(std::back_inserter(out), "{} {} ", id, type_name(tok.token_type(id)));
        append_escaped(out, tok.piece(id, true));
        out.push_back('\n');
    }
    write_stdout_or_throw(out);
    return kExitOk;
}

}  // namespace ember::app
