#include "tokenizer_fixtures.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "gguf/gguf_file.hpp"
#include "support/fixtures.hpp"

namespace ember::test {

const tokenizer::Tokenizer& fixture_tokenizer(const std::string& relative_path) {
    static std::mutex mutex;
    static std::map<std::string, std::unique_ptr<tokenizer::Tokenizer>> cache;
    std::lock_guard lock(mutex);
    auto& slot = cache[relative_path];
    if (!slot) {
        const auto file = gguf::File::open(fixture_path(relative_path));
        slot = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_gguf(file));
    }
    return *slot;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE_MESSAGE(in.good(), "cannot open " << path);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<TestVector> read_test_vectors(const std::string& name) {
    const std::string base = "tokenizer/ggml-vocab-" + name + ".gguf";
    const std::string inp = read_file(fixture_path(base + ".inp").string());
    const std::string out = read_file(fixture_path(base + ".out").string());

    std::vector<TestVector> vectors;
    const std::string_view separator = "\n__ggml_vocab_test__\n";
    std::size_t pos = 0;
    while (true) {
        const std::size_t next = inp.find(separator, pos);
        if (next == std::string::npos) {
            if (pos < inp.size()) vectors.push_back({inp.substr(pos), {}});  // a final text without separator
            break;
        }
        vectors.push_back({inp.substr(pos, next - pos), {}});
        pos = next + separator.size();
    }

    std::istringstream lines(out);
    std::string line;
    std::size_t i = 0;
    while (std::getline(lines, line)) {
        REQUIRE_MESSAGE(i < vectors.size(), base << ".out has more lines than .inp has texts");
        std::istringstream ids(line);
        std::int32_t id;
        while (ids >> id) vectors[i].ids.push_back(id);
        ++i;
    }
    REQUIRE_MESSAGE(i == vectors.size(), base << ".out has " << i << " lines for " << vectors.size() << " texts");
    return vectors;
}

std::string hex_decode(std::string_view hex) {
    REQUIRE(hex.size() % 2 == 0);
    std::string out;
    for (std::size_t i = 0; i < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
    return out;
}

std::vector<std::int32_t> ids_of(const std::vector<tokenizer::Token>& tokens) {
    std::vector<std::int32_t> ids;
    for (const auto& t : tokens) ids.push_back(t.id);
    return ids;
}

void check_spans_tile(const std::vector<tokenizer::Token>& tokens, std::string_view text) {
    std::size_t cursor = 0;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        CAPTURE(i);
        CHECK(tokens[i].start == cursor);
        CHECK(tokens[i].end >= tokens[i].start);
        cursor = tokens[i].end;
    }
    CHECK(cursor == text.size());
}

}  // namespace ember::test
