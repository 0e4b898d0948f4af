// Message scopes of selection specs (role:user:-1/substring:..., message:N) and the
// token-to-message map where a run records it.
//   - Rung: smoke. The text and JSON forms, their refusals, and resolution on a prompt
//     built here piece by piece (so each message's bytes are known without searching).
//   - Rung: activation-reference. `ember extract --chat ... --select role:user:-1/substring:جذر`
//     on the Qwen3 fixture keeps exactly the rows of the unscoped run at the positions an
//     independent computation gives (the last user message found in `ember template`'s
//     text, its tokens from `ember tokenize --json`), bit for bit; a dataset of
//     conversations gives the same bits as one `ember extract --chat` per conversation.
#include <doctest/doctest.h>

#include <ember/npy.hpp>
#include <ember/selection.hpp>

#include <boost/json.hpp>

#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "support/files.hpp"
#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
namespace sel = ember::selection;
using ember::test::read_all;
using ember::test::shell_quote;
using ember::test::write_all;

ember::test::CommandResult ember_cli(const std::string& args) {
    return ember::test::run_command(std::string(EMBER_BINARY) + " " + args, true);
}

// A chat prompt assembled here: template text and message contents appended in turn, the
// message bytes recorded as they are appended; one token per code point.
struct BuiltPrompt {
    std::string text;
    sel::Conversation conversation;
    std::vector<sel::TokenSpan> tokens;

    void add_template(const std::string& t) { append(t, -1); }
    void add_message(const std::string& role, const std::string& content) {
        const auto m = static_cast<std::int32_t>(conversation.roles.size());
        conversation.roles.push_back(role);
        conversation.bytes.push_back({text.size(), text.size() + content.size(), m});
        append(content, m);
    }
    void append(const std::string& s, std::int32_t message) {
        for (std::size_t i = 0; i < s.size();) {
            std::size_t n = 1;
            while (i + n < s.size() && (static_cast<unsigned char>(s[i + n]) & 0xC0) == 0x80) ++n;
            tokens.push_back({text.size() + i, text.size() + i + n});
            conversation.token_messages.push_back(message);
            i += n;
        }
        text += s;
    }
    std::vector<std::size_t> positions(const std::string& spec, const sel::Conversation* c) const {
        const sel::Resolved r = sel::resolve(sel::parse(spec), text, tokens, c);
        INFO(spec << ": " << r.why_empty);
        std::vector<std::size_t> out;
        for (const auto& row : r.rows) out.push_back(row.position);
        return out;
    }
    std::string why(const std::string& spec, const sel::Conversation* c) const {
        const sel::Resolved r = sel::resolve(sel::parse(spec), text, tokens, c);
        CHECK(r.rows.empty());
        return r.why_empty;
    }
};

// The token positions covering bytes [begin, end).
std::vector<std::size_t> covering(const std::vector<sel::TokenSpan>& tokens, std::size_t begin, std::size_t end) {
    std::vector<std::size_t> out;
    for (std::size_t p = 0; p < tokens.size(); ++p)
        if (tokens[p].start < end && tokens[p].end > begin && tokens[p].start < tokens[p].end) out.push_back(p);
    return out;
}

const std::string kSystem = "جذر الكلمة أصلها";
const std::string kUser0 = "ما جذر كتب؟";
const std::string kAssistant = "ك ت ب";
const std::string kUser1 = "وما جذر مكتبة؟";

BuiltPrompt built() {
    BuiltPrompt p;
    p.add_template("<s>");
    p.add_message("system", kSystem);
    p.add_template("</s>\n<u>");
    p.add_message("user", kUser0);
    p.add_template("</u>\n<a>");
    p.add_message("assistant", kAssistant);
    p.add_template("</a>\n<u>");
    p.add_message("user", kUser1);
    p.add_template("</u>\n<a>");
    return p;
}

}  // namespace

TEST_CASE("message scopes: the text and JSON forms, and what they refuse") {
    const sel::Spec s = sel::parse("role:user:-1/substring:جذر");
    CHECK(s.scope == sel::Scope::Role);
    CHECK(s.role == "user");
    REQUIRE(s.role_index);
    CHECK(*s.role_index == -1);
    CHECK(s.kind == sel::Kind::Substring);
    CHECK(s.text == "جذر");
    for (const char* text : {"role:user:-1/substring:جذر", "message:2", "message:-1/0,-1", "role:user", "role:user:last",
                             "role:assistant:0/bytes:0-4:first", "role:user:1/chars:3-6", "message:0/substring:a/b#2"})
        CHECK(sel::parse(sel::parse(text).to_string()).to_string() == text);
    CHECK(sel::parse("role:user:last").take == sel::Take::Last);
    CHECK(!sel::parse("role:user:last").role_index);
    CHECK(sel::parse("role:user/all").to_string() == "role:user");
    CHECK(sel::parse("message:0/substring:a/b").text == "a/b");  // the first '/' ends the scope
    for (const char* bad : {"role:", "message:x", "message:", "role:user/role:user", "role:user/", "message:1/nope"})
        CHECK_THROWS_AS(sel::parse(bad), sel::SpecError);

    const auto from_json = [](const char* text) { return sel::from_json(ember::JsonValue::parse(text)); };
    CHECK(from_json(R"({"role": "user", "role_index": -1, "substring": "جذر"})").to_string() == s.to_string());
    CHECK(from_json(R"({"message": 1})").to_string() == "message:1");
    CHECK(from_json(R"({"role": "user", "take": "last"})").to_string() == "role:user:last");
    for (const char* bad : {R"({"role_index": 1, "position": "all"})", R"({"role": "user", "message": 1})",
                            R"({"role": ""})", R"({"message": "1"})", R"({"role": "user", "role_index": "x"})"})
        CHECK_THROWS_AS(from_json(bad), sel::SpecError);
}

TEST_CASE("message scopes pick the message's own bytes in Arabic text") {
    const BuiltPrompt p = built();
    const sel::Conversation* c = &p.conversation;
    const auto message_begin = [&](std::size_t m) { return p.conversation.bytes[m].begin; };
    const std::string root = "جذر";
    // The root occurs in the system message, the first and the last user message.
    const std::size_t in_last = message_begin(3) + kUser1.find(root);
    CHECK(p.positions("role:user:-1/substring:" + root, c) == covering(p.tokens, in_last, in_last + root.size()));
    const std::size_t in_first = message_begin(1) + kUser0.find(root);
    CHECK(p.positions("role:user:0/substring:" + root, c) == covering(p.tokens, in_first, in_first + root.size()));
    CHECK(p.positions("role:user/substring:" + root + "#2", c) == covering(p.tokens, in_last, in_last + root.size()));
    CHECK(p.positions("substring:" + root, c) == covering(p.tokens, message_begin(0), message_begin(0) + root.size()));
    CHECK(p.positions("message:-1/substring:" + root, c) == covering(p.tokens, in_last, in_last + root.size()));
    // chars: and bytes: count the message's text: "ما جذر" has the root at code points 3-6.
    CHECK(p.positions("message:1/chars:3-6", c) == covering(p.tokens, in_first, in_first + root.size()));
    CHECK(p.positions("message:1/bytes:5-11", c) == covering(p.tokens, in_first, in_first + root.size()));
    // Positions count the scope's tokens.
    const std::vector<std::size_t> last_user = covering(p.tokens, message_begin(3), message_begin(3) + kUser1.size());
    CHECK(p.positions("role:user:-1", c) == last_user);
    CHECK(p.positions("role:user:-1/first", c) == std::vector<std::size_t>{last_user.front()});
    CHECK(p.positions("role:user:-1:last", c) == std::vector<std::size_t>{last_user.back()});
    CHECK(p.positions("role:user:-1/0,-1", c) == std::vector<std::size_t>{last_user.front(), last_user.back()});
    CHECK(p.positions("role:assistant", c) == covering(p.tokens, message_begin(2), message_begin(2) + kAssistant.size()));

    // Nothing selected, and why.
    CHECK(p.why("role:user:-1/substring:" + root, nullptr).find("not a chat prompt") != std::string::npos);
    CHECK(p.why("role:tool", c) == "role:tool: the prompt has no 'tool' message");
    CHECK(p.why("role:user:2", c) == "role:user:2: the prompt has 2 'user' message(s)");
    CHECK(p.why("message:4", c) == "message:4: the prompt has 4 message(s)");
    CHECK(p.why("role:assistant/substring:" + root, c).find("occurs fewer than 1 time(s) in role:assistant") !=
          std::string::npos);
    CHECK(p.why("message:1/bytes:0-99", c).find("reach past the 20 bytes of message:1") != std::string::npos);
    // A map that does not match the prompt is refused rather than read past its end.
    sel::Conversation short_map = p.conversation;
    short_map.token_messages.pop_back();
    CHECK(p.why("role:user", &short_map).find("does not match") != std::string::npos);
}

TEST_CASE("extract --chat --select role:user:-1/substring: keeps the last user message's rows (Qwen3 fixture)") {
    ember::test::TempDir dir;
    const fs::path model = ember::test::fixture_path("models/synth-qwen3-q8_0.gguf");
    const std::string m = shell_quote(model.string());
    const fs::path vars = dir.path() / "conv.json";
    json::object conv{{"add_generation_prompt", true},
                      {"messages", json::array{json::object{{"role", "system"}, {"content", kSystem}},
                                               json::object{{"role", "user"}, {"content", kUser0}},
                                               json::object{{"role", "assistant"}, {"content", kAssistant}},
                                               json::object{{"role", "user"}, {"content", kUser1}}}}};
    write_all(vars, json::serialize(conv));
    const std::string v = shell_quote(vars.string());

    // The independent reference: the rendering, the last user message in it, its tokens.
    const auto rendered = ember::test::run_command(std::string(EMBER_BINARY) + " template --model " + m + " --vars " + v);
    REQUIRE(rendered.exit_code == 0);
    const auto tokenized = ember::test::run_command(std::string(EMBER_BINARY) + " tokenize --model " + m + " --chat " + v + " --json");
    REQUIRE(tokenized.exit_code == 0);
    std::vector<sel::TokenSpan> spans;
    const json::value tokenization = json::parse(tokenized.output);
    const json::array& tokens = tokenization.at("tokens").as_array();
    for (const auto& t : tokens) spans.push_back({t.at("start").to_number<std::size_t>(), t.at("end").to_number<std::size_t>()});
    const std::size_t last_user = rendered.output.rfind(kUser1);
    REQUIRE(last_user != std::string::npos);
    const std::size_t root = last_user + kUser1.find("جذر");
    const std::vector<std::size_t> expected = covering(spans, root, root + std::string("جذر").size());
    REQUIRE(!expected.empty());
    for (std::size_t p : expected) CHECK(tokens[p].at("message").as_int64() == 3);  // tokenize --json's map agrees

    const auto extract = [&](const std::string& select, const std::string& out) {
        const auto r = ember_cli("extract --model " + m + " --chat " + v + " --stages after_layer --layers 0 --select " +
                                 shell_quote(select) + " --out " + shell_quote((dir.path() / out).string()));
        INFO(r.output);
        REQUIRE(r.exit_code == 0);
        return json::parse(read_all(dir.path() / out / "manifest.json"));
    };
    const json::value scoped = extract("role:user:-1/substring:جذر", "scoped");
    const json::value all = extract("all", "all");
    std::vector<std::size_t> positions;
    for (const auto& p : scoped.at("tensor_contract").at("positions").as_array()) positions.push_back(p.to_number<std::size_t>());
    CHECK(positions == expected);
    CHECK(scoped.at("tensor_contract").at("select").as_string() == "role:user:-1/substring:جذر");
    // The rows are the unscoped run's rows at those positions, bit for bit.
    const ember::npy::Array a = ember::npy::read(dir.path() / "scoped" / "after_layer.layer0.npy");
    const ember::npy::Array b = ember::npy::read(dir.path() / "all" / "after_layer.layer0.npy");
    const std::size_t cols = b.shape.at(1);
    REQUIRE(a.shape.at(0) == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i)
        CHECK(std::memcmp(&a.values[i * cols], &b.values[expected[i] * cols], cols * sizeof(float)) == 0);

    // A scope on a prompt that is not a conversation: refused by name, nothing written.
    const auto plain = ember_cli("extract --model " + m + " --prompt " + shell_quote(kUser1) +
                                 " --select 'role:user/substring:جذر' --out " + shell_quote((dir.path() / "plain").string()));
    CHECK(plain.exit_code == 1);
    CHECK(plain.output.find("role:user is a message scope, and the prompt is not a chat prompt") != std::string::npos);
    CHECK(!fs::exists(dir.path() / "plain" / "manifest.json"));
}

TEST_CASE("a dataset of conversations: rows.jsonl's message map, the same bits as one run each, bad lines") {
    ember::test::TempDir dir;
    const fs::path model = ember::test::fixture_path("models/synth-qwen3-q8_0.gguf");
    const std::string m = shell_quote(model.string());
    const auto message = [](const std::string& role, const std::string& content) {
        return json::object{{"role", role}, {"content", content}};
    };
    const std::vector<json::object> conversations = {
        {{"messages", json::array{message("user", kUser0)}}},
        {{"messages", json::array{message("system", kSystem), message("user", kUser1)}}, {"enable_thinking", false}},
        {{"messages", json::array{message("user", kUser0), message("assistant", kAssistant), message("user", kUser1)}},
         {"add_generation_prompt", false}},
    };
    std::string lines;
    for (const auto& c : conversations) lines += json::serialize(c) + "\n";
    const fs::path dataset = dir.path() / "conversations.jsonl";
    write_all(dataset, lines);
    // The dataset's defaults: every line's unless it sets its own.
    const fs::path defaults = dir.path() / "defaults.json";
    write_all(defaults, R"({"add_generation_prompt": true})");
    const std::string select = "role:user:-1/substring:جذر";
    const std::string common = " --stages after_layer --layers 0 --select " + shell_quote(select);
    const auto ds = ember_cli("extract --model " + m + " --dataset " + shell_quote(dataset.string()) + " --chat " +
                              shell_quote(defaults.string()) + common + " --out " + shell_quote((dir.path() / "ds").string()));
    INFO(ds.output);
    REQUIRE(ds.exit_code == 0);
    const ember::npy::Array batched = ember::npy::read(dir.path() / "ds" / "after_layer.layer0.npy");
    std::vector<json::object> rows, samples;
    for (const std::string file : {"rows.jsonl", "samples.jsonl"}) {
        std::istringstream in(read_all(dir.path() / "ds" / file));
        for (std::string line; std::getline(in, line);) (file == "rows.jsonl" ? rows : samples).push_back(json::parse(line).as_object());
    }
    REQUIRE(samples.size() == conversations.size());
    std::size_t row = 0;
    for (std::size_t i = 0; i < conversations.size(); ++i) {
        CAPTURE(i);
        // One run of the same conversation, with the defaults under its own variables.
        json::object vars = conversations[i];
        if (!vars.contains("add_generation_prompt")) vars["add_generation_prompt"] = true;
        const fs::path one = dir.path() / ("one" + std::to_string(i) + ".json");
        write_all(one, json::serialize(vars));
        const fs::path out = dir.path() / ("one" + std::to_string(i));
        const auto single = ember_cli("extract --model " + m + " --chat " + shell_quote(one.string()) + common + " --out " +
                                      shell_quote(out.string()));
        REQUIRE(single.exit_code == 0);
        const json::value manifest = json::parse(read_all(out / "manifest.json"));
        const json::value& record = manifest.at("samples").at(0);
        CHECK(samples[i].at("chat").at("rendered") == record.at("chat").at("rendered"));
        CHECK(samples[i].at("token_messages") == record.at("token_messages"));
        const ember::npy::Array a = ember::npy::read(out / "after_layer.layer0.npy");
        const std::size_t n = a.shape.at(0), cols = a.shape.at(1);
        REQUIRE(row + n <= batched.shape.at(0));
        CHECK(std::memcmp(a.values.data(), &batched.values[row * cols], n * cols * sizeof(float)) == 0);
        const json::array& owners = samples[i].at("token_messages").as_array();
        const std::size_t last = conversations[i].at("messages").as_array().size() - 1;
        for (std::size_t k = 0; k < n; ++k, ++row) {
            const json::object& r = rows.at(row);
            CHECK(r.at("message").as_int64() == static_cast<std::int64_t>(last));  // the last user message
            CHECK(r.at("role").as_string() == "user");
            CHECK(owners.at(r.at("position").to_number<std::size_t>()) == r.at("message"));
        }
    }
    CHECK(row == rows.size());
    const std::string last_rendered(samples[2].at("chat").at("rendered").as_string());
    CHECK(last_rendered.substr(last_rendered.size() - 11) == "<|im_end|>\n");  // the line's add_generation_prompt = false

    // Bad lines: refused naming file:line, exit 1, nothing written.
    const auto refused = [&](const std::string& bad_line, const std::string& says) {
        write_all(dataset, json::serialize(conversations[0]) + "\n" + bad_line + "\n");
        const fs::path out = dir.path() / "bad";
        const auto r = ember_cli("extract --model " + m + " --dataset " + shell_quote(dataset.string()) + common +
                                 " --out " + shell_quote(out.string()));
        INFO(r.output);
        CHECK(r.exit_code == 1);
        CHECK(r.output.find(dataset.string() + ":2: ") != std::string::npos);
        CHECK(r.output.find(says) != std::string::npos);
        CHECK(!fs::exists(out / "manifest.json"));
    };
    refused(R"({"messages": "hi"})", "'messages' must be a list of messages, not a string");
    refused(R"({"messages": [{"content": "x"}]})", "messages[0] needs a string 'role'");
    refused(R"({"messages": []})", "\"messages\" is empty");
    refused(R"({"text": "x", "messages": [{"role": "user", "content": "x"}]})", "\"text\" or \"messages\", not both");
    refused(R"({"text": "x", "enable_thinking": true})", "\"enable_thinking\" goes with \"messages\"");
    refused(R"({"messages": [{"role": "user", "content": "x"}], "enable_thinking": "yes"})", "'enable_thinking' must be true or false");
    refused(R"({"text": "ما جذر"})", "role:user:-1 is a message scope, and the prompt is not a chat prompt");
}
