// The records an extraction manifest is made of (docs/formats.md, "Extraction run
// directory"): the model, the tokenizer and the prompt as the model saw it. (The entry per
// array is extract/capture_entry.hpp's; the prompt's encoding runtime/prompt.hpp's.)
#pragma once

#include <boost/json/object.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string_view>
#include <string>
#include <vector>

#include "gguf/gguf_file.hpp"
#include "models/model_config.hpp"
#include "record/run_directory.hpp"
#include "runtime/prompt.hpp"
#include "tokenizer/tokenizer.hpp"

namespace ember::record {

inline constexpr int kManifestSchemaVersion = 1;

// Per layer: index, attention (full | sliding_window), heads, KV heads, head_dim, n_rot,
// n_ff, RoPE base and scale, rope_freqs use, attention scale, kv_source. (Also what
// `ember inspect` prints.)
boost::json::array layer_records(const models::ModelConfig& config);
// Per ggml type name: the number of tensors and their bytes.
boost::json::object weight_type_record(const gguf::File& file);

// path, size, sha256, name, family, architecture, dims (with per-layer geometry), weight types.
boost::json::object model_record(const std::filesystem::path& path, const gguf::File& file,
                                 const models::ModelConfig& config, const std::string& sha256);

// model, pre, vocab size, BOS/EOS ids, add_bos, and the prompt: its length and SHA-256,
// whether BOS was added, the token ids and per token its id, byte span [start, end) into
// the prompt's bytes, and piece (hex, and as text when valid UTF-8).
boost::json::object tokenizer_record(const tokenizer::Tokenizer& tok, const runtime::EncodedPrompt& prompt);

// The sample (the prompt) as hashes: prompt bytes and token ids.
boost::json::object sample_record(const runtime::EncodedPrompt& prompt);


// Bytes as lowercase hex; a token piece as JSON: its text when valid UTF-8, else null
// (a piece can be part of a character; its hex says what it is).
std::string hex(std::string_view bytes);
boost::json::value piece_text(std::string_view piece);

// The SHA-256 of float32 values as stored (little-endian bytes).
std::string values_sha256(const std::vector<float>& values);

}  // namespace ember::record
