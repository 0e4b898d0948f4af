// libFuzzer target: everything that reads an untrusted GGUF before any computation:
// the container, the hyperparameters and weights (load_model), the vocabulary.
// Any input must either load or throw ember::Error; a crash, hang, leak or sanitizer
// report is a finding. Built by scripts/fuzz-gguf.sh (clang, -fsanitize=fuzzer).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/error.hpp"
#include "gguf/gguf_file.hpp"
#include "models/model.hpp"
#include "tokenizer/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data), reinterpret_cast<const std::byte*>(data) + size);
    try {
        const auto file = ember::gguf::File::from_bytes(std::move(bytes), "fuzz-input");
        for (const auto& t : file.tensors()) (void)file.tensor_data(t);
        (void)ember::models::load_model(file);
        (void)ember::tokenizer::Tokenizer::from_gguf(file);
    } catch (const ember::Error&) {
        // Refused with a message: the expected outcome for malformed input.
    }
    return 0;
}
