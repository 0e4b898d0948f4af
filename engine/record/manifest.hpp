// The records an extraction manifest is made of (docs/formats.md, "Extraction run
// directory"): the model, the tokenizer and the prompt as the model saw it, and one entry
// per array.
#pragma once

#include <ember/selection.hpp>

#include <boost/json/object.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string_view>
#include <string>
#include <vector>

#include "chat/chat_prompt.hpp"
#include "chat/thinking.hpp"
#include "config/run_config.hpp"
#include "extract/extractor.hpp"
#include "record/run_directory.hpp"
#include "gguf/gguf_file.hpp"
#include "models/model.hpp"
#include "runtime/loaded_model.hpp"
#include "tokenizer/tokenizer.hpp"

namespace ember::extract {

inline constexpr int kManifestSchemaVersion = 1;

// The prompt as the model sees it: its bytes, the tokens with byte spans, whether BOS was added.
struct EncodedPrompt {
    std::string text;
    std::vector<tokenizer::Token> tokens;
    std::vector<std::int32_t> ids;
    bool bos_added = false;
    // A conversation (docs/chat.md): the provenance record (template source and SHA-256,
    // variables, rendered text, BOS decision), and its messages: roles, the bytes copied
    // from each, and per token its message or -1 (template text), as selection scopes take them.
    std::optional<boost::json::object> chat;
    std::optional<selection::Conversation> conversation;
    std::optional<chat::ThinkingMarkers> thinking_markers;  // the template's, when it writes them
};
// `special`: special-token texts (<|eot_id|>) in the text are those tokens (--special).
EncodedPrompt encode_prompt(const tokenizer::Tokenizer& tok, std::string text, config::AddBos add_bos, bool special = false);
// A prompt given as token ids: each checked against the vocabulary (ember::Error naming
// `what`, the index and the id), no BOS added (the ids are the sequence); the text is the
// ids' pieces joined, each token's byte span its piece's.
EncodedPrompt encode_ids(const tokenizer::Tokenizer& tok, std::span<const std::int32_t> ids, std::string_view what);
// A conversation (a VARS object) rendered with `t`, special tokens parsed and no second
// BOS; `suffix` (a dataset target) is appended to the rendered text before tokenizing, its
// tokens template text in the message map.
EncodedPrompt encode_chat_prompt(const runtime::LoadedModel& model, const chat::LoadedTemplate& t,
                                 boost::json::object vars, std::string_view suffix = {});
// A run's prompt: prompt.text / prompt.file encoded (prompt.special), prompt.ids taken as
// they are (encode_ids), or prompt.chat rendered with the chat template (the file, else
// the model's), special tokens parsed and no second BOS.
EncodedPrompt encode_run_prompt(const runtime::LoadedModel& model, const config::PromptSection& prompt);
// The template a conversation of `prompt` is rendered with (the file, else the model's).
chat::LoadedTemplate load_run_template(const runtime::LoadedModel& model, const config::PromptSection& prompt);
// The token-to-message map as JSON: a message index per token, null for template text.
boost::json::array token_messages_json(const EncodedPrompt& prompt);

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
boost::json::object tokenizer_record(const tokenizer::Tokenizer& tok, const EncodedPrompt& prompt);

// The sample (the prompt) as hashes: prompt bytes and token ids.
boost::json::object sample_record(const EncodedPrompt& prompt);

// One array of the run directory: file, stage, layer, phase, positions, shape, dtype,
// what rows and columns mean, and the SHA-256 of its values (the data without the header).
boost::json::object tensor_entry(const Capture& capture, const FileRecord& file);

// STAGE.layerN.npy for layer stages, STAGE.npy for the logits stages.
std::string capture_file_name(const Capture& capture);

// Bytes as lowercase hex; a token piece as JSON: its text when valid UTF-8, else null
// (a piece can be part of a character; its hex says what it is).
std::string hex(std::string_view bytes);
boost::json::value piece_text(std::string_view piece);

// The SHA-256 of float32 values as stored (little-endian bytes).
std::string values_sha256(const std::vector<float>& values);

}  // namespace ember::extract
