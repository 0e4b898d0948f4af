// A conversation's reply: where generation stops, its thinking block, `generate --chat --json`.
//   - Rung: smoke, against the templates themselves. The end-of-turn token each fixture's
//     template writes after an assistant message is in the vocabulary's end-of-generation
//     set (so a generation stops where the template ends a turn); Qwen3's own rendering of
//     an assistant message with reasoning_content splits back into that reasoning and that
//     content; `generate --chat --json` reports the rendered prompt `ember template` prints.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include <filesystem>
#include <string>

#include "chat/chat_prompt.hpp"
#include "chat/thinking.hpp"
#include "gguf/gguf_file.hpp"
#include "support/files.hpp"
#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
namespace chat = ember::chat;
using ember::test::read_all;
using ember::test::shell_quote;

fs::path template_file(const std::string& name) { return ember::test::fixture_path("chat") / "templates" / name; }

chat::ChatPrompt render(const std::string& file, const json::object& vars) {
    const chat::LoadedTemplate t = chat::load_template({template_file(file), std::nullopt}, nullptr, "");
    return chat::render_prompt(t, vars, nullptr);
}

json::object message(const std::string& role, const std::string& content) { return {{"role", role}, {"content", content}}; }

}  // namespace

TEST_CASE("the thinking markers are found in the templates that write them") {
    const auto markers = [](const std::string& file) { return chat::thinking_markers(read_all(template_file(file))); };
    REQUIRE(markers("Qwen-Qwen3-0.6B.jinja"));
    CHECK(markers("Qwen-Qwen3-0.6B.jinja")->open == "<think>");
    for (const char* gemma : {"google-gemma-4-31B-it.jinja", "google-gemma-4-31B-it-interleaved.jinja"}) {
        REQUIRE(markers(gemma));
        CHECK(markers(gemma)->close == "<channel|>");
    }
    for (const char* llama : {"meta-llama-Llama-3.1-8B-Instruct.jinja", "meta-llama-Llama-3.2-3B-Instruct.jinja"})
        CHECK(!markers(llama));
}

TEST_CASE("a reply splits into its thinking and its answer as the template writes them") {
    // Qwen3's rendering of an assistant turn with reasoning_content, after the generation prompt.
    const json::array question{message("user", "ما جذر مكتبة؟")};
    json::object answered = message("assistant", "ك ت ب");
    answered["reasoning_content"] = "مكتبة من كتب";
    json::array conversation = question;
    conversation.push_back(answered);
    const chat::ChatPrompt prompt = render("Qwen-Qwen3-0.6B.jinja", {{"messages", question}, {"add_generation_prompt", true}});
    const chat::ChatPrompt whole = render("Qwen-Qwen3-0.6B.jinja", {{"messages", conversation}});
    REQUIRE(whole.text.rfind(prompt.text, 0) == 0);
    std::string reply = whole.text.substr(prompt.text.size());
    REQUIRE(reply.ends_with("<|im_end|>\n"));
    reply.resize(reply.size() - 11);  // generation stops at <|im_end|>, which decoding leaves out
    REQUIRE(prompt.thinking);
    const chat::Reply r = chat::split_reply(prompt.text, reply, *prompt.thinking);
    REQUIRE(r.thinking);
    CHECK(r.thinking_closed);
    CHECK(r.thinking->find("مكتبة من كتب") != std::string::npos);
    CHECK(r.thinking->find("ك ت ب") == std::string::npos);
    CHECK(r.answer.ends_with("ك ت ب"));
    CHECK(r.answer.find("<think>") == std::string::npos);

    // enable_thinking = false: the generation prompt closes an empty block; the reply has none.
    const chat::ChatPrompt no_thinking = render(
        "Qwen-Qwen3-0.6B.jinja", {{"messages", question}, {"add_generation_prompt", true}, {"enable_thinking", false}});
    REQUIRE(no_thinking.text.ends_with("</think>\n\n"));
    const chat::Reply plain = chat::split_reply(no_thinking.text, "ك ت ب", *prompt.thinking);
    CHECK(!plain.thinking);
    CHECK(plain.answer == "ك ت ب");
    // A prompt that opens the block: the reply starts inside it; cut off before it closes.
    const chat::Reply inside = chat::split_reply("<|im_start|>assistant\n<think>\n", "a</think>b", *prompt.thinking);
    CHECK(inside.thinking == "a");
    CHECK(inside.answer == "b");
    const chat::Reply cut = chat::split_reply(prompt.text, "<think>\nstill", *prompt.thinking);
    CHECK(cut.thinking == "\nstill");
    CHECK(!cut.thinking_closed);
    CHECK(cut.answer.empty());
}

TEST_CASE("a reply keeps its thinking markers where decoding leaves them out (Gemma 4's CONTROL <|channel>)") {
    const fs::path path = ember::test::fixture_path("models/synth-gemma4-q8_0.gguf");
    const ember::gguf::File file = ember::gguf::File::open(path);
    const auto tok = ember::tokenizer::Tokenizer::from_gguf(file);
    const auto markers = chat::thinking_markers(read_all(template_file("google-gemma-4-31B-it.jinja")));
    REQUIRE(markers);
    const std::string reply = "<|channel>thought\nجذر<channel|>كتب";
    ember::tokenizer::EncodeOptions options;
    options.parse_special = true;
    options.add_special = false;
    options.add_bos = false;
    const std::vector<std::int32_t> ids = tok.encode_ids(reply, options);
    const std::string marked = chat::marked_text(tok, ids, *markers);
    CHECK(marked == reply);
    const chat::Reply r = chat::split_reply("<|turn>model\n", marked, *markers);
    CHECK(r.thinking == "جذر");
    CHECK(r.answer == "كتب");

    // The fixture's <|channel> decodes as text; a marker that is a CONTROL token (Qwen3's
    // <|im_start|> here, standing in for one) is kept all the same.
    const fs::path qwen3 = ember::test::fixture_path("models/synth-qwen3-q8_0.gguf");
    const ember::gguf::File qwen3_file = ember::gguf::File::open(qwen3);
    const auto qwen3_tok = ember::tokenizer::Tokenizer::from_gguf(qwen3_file);
    const chat::ThinkingMarkers control{"<|im_start|>", "</think>"};
    const std::string text = "<|im_start|>جذر</think>كتب";
    const std::vector<std::int32_t> control_ids = qwen3_tok.encode_ids(text, options);
    REQUIRE(qwen3_tok.decode(control_ids).find("<|im_start|>") == std::string::npos);  // decoding alone drops it
    CHECK(chat::marked_text(qwen3_tok, control_ids, control) == text);
}

TEST_CASE("the end of turn each template writes ends generation in its model's vocabulary") {
    // The real templates with the fixture models of their families (synth-llama3 carries no
    // template; synth-qwen3's is an older Qwen one).
    const struct {
        const char* model;
        const char* template_file;
    } cases[] = {{"synth-llama3-q8_0", "meta-llama-Llama-3.1-8B-Instruct.jinja"},
                 {"synth-llama3-q8_0", "meta-llama-Llama-3.3-70B-Instruct.jinja"},
                 {"synth-qwen3-q8_0", "Qwen-Qwen3-0.6B.jinja"},
                 {"synth-qwen3-q8_0", nullptr},
                 {"synth-gemma4-q8_0", "google-gemma-4-31B-it.jinja"},
                 {"synth-gemma4-q8_0", nullptr}};
    for (const auto& c : cases) {
        CAPTURE(c.model);
        CAPTURE(c.template_file ? c.template_file : "the model's own");
        const fs::path path = ember::test::fixture_path(std::string("models/") + c.model + ".gguf");
        const ember::gguf::File file = ember::gguf::File::open(path);
        const auto tok = ember::tokenizer::Tokenizer::from_gguf(file);
        chat::TemplateChoice choice;
        if (c.template_file) choice.file = template_file(c.template_file);
        const chat::LoadedTemplate t = chat::load_template(choice, &file, path.string());
        const json::array messages{message("user", "ما جذر مكتبة؟"), message("assistant", "ك ت ب"), message("user", "شكرا")};
        chat::ChatPrompt p = chat::render_prompt(t, {{"messages", messages}}, &tok);
        const auto tokens = chat::tokenize_prompt(p, tok);
        const auto owners = chat::token_messages(tokens, p.origins);
        std::size_t last_of_reply = tokens.size();
        for (std::size_t i = 0; i < tokens.size(); ++i)
            if (owners[i] == 1) last_of_reply = i;
        REQUIRE(last_of_reply + 1 < tokens.size());
        const std::int32_t end_of_turn = tokens[last_of_reply + 1].id;
        CAPTURE(tok.token_text(end_of_turn));
        CHECK(tok.is_end_of_generation(end_of_turn));
        // No token of the messages themselves ends generation.
        for (std::size_t i = 0; i < tokens.size(); ++i)
            if (owners[i] >= 0) CHECK(!tok.is_end_of_generation(tokens[i].id));
    }
}

TEST_CASE("generate --chat --json reports the rendered prompt, its message map and the reply's parts") {
    ember::test::TempDir dir;
    const fs::path model = ember::test::fixture_path("models/synth-qwen3-q8_0.gguf");
    const fs::path vars = dir.path() / "conv.json";
    ember::test::write_all(vars, json::serialize(json::object{{"messages", json::array{message("user", "ما جذر مكتبة؟")}},
                                                              {"add_generation_prompt", true}}));
    const std::string args = " --model " + shell_quote(model.string());
    const auto rendered = ember::test::run_command(std::string(EMBER_BINARY) + " template --template " +
                                                   shell_quote(template_file("Qwen-Qwen3-0.6B.jinja").string()) + " --vars " +
                                                   shell_quote(vars.string()));
    REQUIRE(rendered.exit_code == 0);
    // Qwen3's own template (it writes thinking blocks; the fixture's GGUF carries an older one).
    const std::string qwen3 = " --template " + shell_quote(template_file("Qwen-Qwen3-0.6B.jinja").string());
    const auto out = ember::test::run_command(std::string(EMBER_BINARY) + " generate" + args + " --chat " +
                                              shell_quote(vars.string()) + qwen3 + " --max-tokens 4 --json");
    INFO(out.output);
    REQUIRE(out.exit_code == 0);
    const json::object o = json::parse(out.output).as_object();
    CHECK(o.at("prompt").as_string() == rendered.output);
    CHECK(o.at("chat").at("rendered").as_string() == rendered.output);
    CHECK(o.at("chat").at("thinking_markers").at("open").as_string() == "<think>");
    CHECK(o.at("token_messages").as_array().size() == o.at("prompt_tokens").as_array().size());
    CHECK(o.contains("thinking"));
    CHECK(o.at("answer").is_string());
    // Without thinking in the reply, the answer is the text.
    if (o.at("thinking").is_null()) CHECK(o.at("answer") == o.at("text"));
}
