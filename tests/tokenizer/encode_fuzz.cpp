// libFuzzer target: encoding arbitrary bytes with the fixture vocabularies. The first input
// byte picks the vocabulary and the options, the rest is the text. Any text must encode
// without an exception, with spans that tile it, BOS/EOS where asked, and pieces for every
// id; anything else (or a sanitizer report) is a finding. Built by scripts/fuzz-tokenizer.sh.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

using ember::tokenizer::Tokenizer;

const char* const kModels[] = {
    "tokenizer/ggml-vocab-llama-spm.gguf",
    "models/synth-llama3-q8_0.gguf",
    "models/synth-qwen3-q8_0.gguf",
    "models/synth-gemma4-q8_0.gguf",
};

const std::vector<std::unique_ptr<Tokenizer>>& tokenizers() {
    static const auto loaded = [] {
        const char* env = std::getenv("EMBER_FIXTURES");
        const std::filesystem::path dir = env && *env ? env : EMBER_DEFAULT_FIXTURES;
        std::vector<std::unique_ptr<Tokenizer>> all;
        for (const char* model : kModels) {
            const auto file = ember::gguf::File::open(dir / model);
            all.push_back(std::make_unique<Tokenizer>(Tokenizer::from_gguf(file)));
        }
        return all;
    }();
    return loaded;
}

[[noreturn]] void finding(const char* what) {
    std::fprintf(stderr, "encode_fuzz: %s\n", what);
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const Tokenizer& tok = *tokenizers()[data[0] % std::size(kModels)];
    const ember::tokenizer::EncodeOptions options{
        .add_special = (data[0] & 0x04) != 0, .add_bos = {}, .parse_special = (data[0] & 0x08) != 0};
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

    const auto tokens = tok.encode(text, options);
    std::size_t cursor = 0;
    for (const auto& t : tokens) {
        if (t.start != cursor || t.end < t.start) finding("spans do not tile the input");
        cursor = t.end;
        (void)tok.piece(t.id, true);
    }
    if (cursor != text.size()) finding("spans do not reach the end of the input");
    if (options.add_special && tok.info().add_bos &&
        (tokens.empty() || tokens.front().id != static_cast<std::int32_t>(*tok.info().bos_id))) {
        finding("BOS missing");
    }
    return 0;
}
