// The decoder Llama and Qwen3 share (llama_decoder.cpp): one layer body, one load.
// A family built on it says only what differs from Llama's.
#pragma once

#include <memory>

#include "gguf/gguf_file.hpp"
#include "models/attention_block.hpp"
#include "models/model.hpp"

namespace ember::models {

struct LlamaDecoderSpec {
    HeadNorm head_norm = HeadNorm::None;  // Qwen3: QK (attn_q_norm, attn_k_norm)
    bool rope_freqs = true;               // whether rope_freqs.weight is read (Llama 3 scaling)
};

// The weights found and checked (tensor_loader.hpp), the model that computes with them.
std::unique_ptr<Model> load_llama_decoder(const gguf::File& file, ModelConfig config, const LlamaDecoderSpec& spec);

}  // namespace ember::models
