#include "seed_models.hpp"

#include "support/tiny_gguf.hpp"

namespace ember::test {

std::vector<std::pair<std::string, std::vector<std::byte>>> fuzz_seed_models() {
    std::vector<std::pair<std::string, std::vector<std::byte>>> seeds;
    auto add = [&seeds](const std::string& name, TinySpec spec) {
        spec.n_layers = 1;
        spec.n_embd = 8;
        spec.n_head = 2;
        spec.n_head_kv = 1;
        spec.n_ff = 16;
        seeds.emplace_back(name, tiny_model_bytes(spec));
    };
    add("llama-f32.gguf", {});
    add("llama-f16-tied.gguf", {.weight_type = gguf::GgmlType::F16, .tied_output = true});
    add("llama-bf16.gguf", {.weight_type = gguf::GgmlType::BF16});
    add("qwen3-f32.gguf", {.arch = "qwen3"});
    add("gemma4-f32.gguf", {.arch = "gemma4"});
    {
        // A model with an explicit alignment and a nested array, to reach those paths.
        auto w = tiny_model_writer({.n_layers = 1, .n_embd = 8, .n_head = 2, .n_head_kv = 1, .n_ff = 16, .alignment = 64});
        w.erase("general.name");
        const std::byte nested[] = {std::byte{4}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{1}, std::byte{0},
                                    std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0},
                                    std::byte{2}, std::byte{0}, std::byte{0}, std::byte{0}};  // [[2]] as ARRAY of ARRAY
        std::vector<std::byte> payload = {std::byte{9}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{1}, std::byte{0},
                                          std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}};
        payload.insert(payload.end(), std::begin(nested), std::end(nested));
        w.set_raw("test.nested", gguf::ValueType::ARRAY, payload);
        seeds.emplace_back("llama-aligned-nested.gguf", w.to_bytes());
    }
    return seeds;
}

}  // namespace ember::test
