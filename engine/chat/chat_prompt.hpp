// A conversation made into a model's prompt: the VARS file read and checked, the template
// found (a file, or the GGUF's tokenizer.chat_template[.NAME]), rendered with the
// vocabulary's BOS/EOS texts, tokenized with special tokens parsed and without a second
// BOS, and every token mapped to the message it belongs to (docs/chat.md).
//
//   auto vars = chat::read_vars_file("conversation.json");
//   auto t = chat::load_template(options, &file);
//   chat::ChatPrompt p = chat::render_prompt(t, vars, &tok);
//   auto tokens = chat::tokenize_prompt(p, tok);             // p.bos says what was done
//   auto owners = chat::token_messages(tokens, p.origins);    // -1: template text
#pragma once

#include <boost/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "chat/template.hpp"
#include "chat/thinking.hpp"
#include "gguf/gguf_file.hpp"
#include "tokenizer/tokenizer.hpp"

namespace ember::chat {

// A VARS file: a JSON object (the template context). `messages`, when present, must be a
// list of mappings each with a string `role`; `add_generation_prompt` and
// `enable_thinking` booleans; `tools` a list. Errors name the file and the key
// ("VARS.json: 'messages' must be a list of messages, not a string").
boost::json::object read_vars_file(const std::filesystem::path& path);
void check_vars(const boost::json::object& vars, const std::string& where);

// Where the template comes from: a file, else the model's tokenizer.chat_template (or
// tokenizer.chat_template.NAME).
struct TemplateChoice {
    std::optional<std::filesystem::path> file;
    std::optional<std::string> name;  // the GGUF variant
};
struct LoadedTemplate {
    Template parsed;
    std::string source;  // "FILE" (the path as given) or "MODEL:tokenizer.chat_template[.NAME]"
    std::string sha256;  // of the template text
};
// Throws ember::Error naming the file or the key (a model without a chat template, a
// variant it does not have: the ones it has are listed).
LoadedTemplate load_template(const TemplateChoice& choice, const gguf::File* model, const std::string& model_path);

struct BosDecision {
    bool template_wrote = false;  // the rendered text starts with the vocabulary's BOS text
    bool vocabulary_adds = false; // the model asks for BOS (tokenizer.ggml.add_bos_token)
    bool added = false;           // what the tokenizer is told: vocabulary_adds && !template_wrote
};

struct ChatPrompt {
    std::string template_source, template_sha256;
    boost::json::object vars;  // as rendered: bos_token/eos_token filled from the vocabulary when absent
    std::string text;
    std::vector<Origin> origins;     // the bytes of `text` copied from messages[i]
    std::vector<std::string> roles;  // roles[i] of messages[i]
    BosDecision bos;
    std::optional<ThinkingMarkers> thinking;  // the thinking markers the template writes
};

// Renders `vars` (bos_token and eos_token from `vocabulary` unless set); throws
// ember::Error naming the template and line:column.
ChatPrompt render_prompt(const LoadedTemplate& t, boost::json::object vars, const tokenizer::Tokenizer* vocabulary);

// Special tokens parsed; BOS added only when the model asks for one and the template did
// not write it (fills prompt.bos).
std::vector<tokenizer::Token> tokenize_prompt(ChatPrompt& prompt, const tokenizer::Tokenizer& tok);

// For every token, the message most of its bytes came from, or -1 (template text).
std::vector<std::int32_t> token_messages(const std::vector<tokenizer::Token>& tokens, const std::vector<Origin>& origins);

// The provenance record of run.json and the manifest: template source and SHA-256, the
// variables, the rendered text, the BOS decision, the thinking markers.
boost::json::object prompt_record(const ChatPrompt& prompt);

}  // namespace ember::chat
