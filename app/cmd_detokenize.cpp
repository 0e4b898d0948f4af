// ember detokenize --model MODEL ID... [--json]
// The text of token ids: their pieces joined (special tokens included as their text),
// printed as is; with --json, every id's piece (text when valid UTF-8, and hex) too.
// Only the tokenizer is loaded.
#include <fmt/format.h>

#include <charconv>

#include "cli.hpp"
#include "commands.hpp"
#include "common/error.hpp"
#include "record/manifest.hpp"
#include "gguf/gguf_file.hpp"
#include "pieces.hpp"
#include "tokenizer/tokenizer.hpp"

namespace ember::app {

int run_detokenize(const std::vector<std::string>& args) {
    po::options_description options("detokenize options");
    options.add_options()
        ("model", po::value<std::string>(), "GGUF model whose vocabulary to use")
        ("ids", po::value<std::vector<std::string>>(), "token ids (also as positional arguments)")
        ("json", po::bool_switch(), "print the text and every piece as JSON");
    po::positional_options_description positional;
    positional.add("ids", -1);
    po::variables_map vm;
    if (!parse_options("detokenize", args, options, positional, vm)) return kExitOk;
    if (!vm.count("model")) throw UsageError("ember detokenize: give --model MODEL.gguf");
    if (!vm.count("ids")) throw UsageError("ember detokenize: give the token ids to turn into text");

    const auto file = gguf::File::open(vm["model"].as<std::string>());
    const auto tok = tokenizer::Tokenizer::from_gguf(file);
    std::vector<std::int32_t> ids;
    for (const std::string& text : vm["ids"].as<std::vector<std::string>>()) {
        std::int32_t id = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
        if (text.empty() || ec != std::errc() || end != text.data() + text.size() || id < 0 ||
            static_cast<std::size_t>(id) >= tok.vocab_size())
            throw UsageError(fmt::format("ember detokenize: '{}' is not a token id (0-{})", text, tok.vocab_size() - 1));
        ids.push_back(id);
    }
    std::string text;
    boost::json::array pieces;
    for (const std::int32_t id : ids) {
        const std::string piece = tok.piece(id, true);
        text += piece;
        pieces.push_back({{"id", id}, {"piece", record::piece_text(piece)}, {"piece_hex", record::hex(piece)}});
    }
    if (vm["json"].as<bool>()) {
        print_json(boost::json::object{{"text", record::piece_text(text)}, {"text_hex", record::hex(text)},
                                       {"pieces", std::move(pieces)}});
        return kExitOk;
    }
    fmt::memory_buffer out;
    fmt::format_to(std::back_inserter(out), "{}\n", text);
    write_stdout_or_throw(out);
    return kExitOk;
}

}  // namespace ember::app
