#include "extract/dataset.hpp"

#include <fmt/format.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "chat/chat_prompt.hpp"
#include "common/error.hpp"
#include "common/input_file.hpp"
#include "record/strict_parse.hpp"
#include "common/sha256_file.hpp"
#include "tokenizer/unicode.hpp"

namespace ember::extract {
namespace {

namespace json = boost::json;

bool blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

}  // namespace

std::string Sample::id_text() const { return id.is_string() ? std::string(id.as_string()) : json::serialize(id); }

DatasetReader::DatasetReader(std::filesystem::path path)
    : path_(std::move(path)), text_lines_(path_.extension() == ".txt") {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path_, ec))
        throw Error(fmt::format("{}: the dataset must be a regular file (it does not exist or is not one)", path_.string()));
    in_.open(path_, std::ios::binary);
    if (!in_) throw Error(fmt::format("{}: cannot open the dataset", path_.string()));
}

bool DatasetReader::next(Sample& s) {
    std::string line;
    while (std::getline(in_, line)) {
        ++line_;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (blank(line)) continue;
        const std::string where = fmt::format("{}:{}", path_.string(), line_);
        if (line.size() > max_input_bytes())
            throw Error(fmt::format("{}: the line is {} bytes, more than the input limit of {} ($EMBER_MAX_INPUT_BYTES)",
                                    where, line.size(), max_input_bytes()));
        if (!tokenizer::unicode::is_valid_utf8(line)) throw Error(fmt::format("{}: the line is not valid UTF-8", where));
        // A byte order mark would be part of the first prompt (.txt) or a JSON syntax error
        // (.jsonl) that does not say what is wrong; anywhere else it is text a user can see.
        if (line_ == 1 && line.starts_with("\xEF\xBB\xBF"))
            throw Error(fmt::format("{}: the file starts with a UTF-8 byte order mark (EF BB BF); save it without one",
                                    where));
        s = Sample{};
        s.index = index_++;
        s.line = line_;
        s.id = static_cast<std::uint64_t>(line_);
        if (text_lines_) {
            s.text = std::move(line);
            return true;
        }
        // Strict: a key twice is refused, an integer beyond 64 bits kept as its digits.
        json::value v = parse_strict_json(line, where);
        if (!v.is_object()) throw Error(fmt::format("{}: a dataset line must be a JSON object with \"text\"", where));
        for (auto& [key, value] : v.as_object()) {
            if (key == "text") {
                if (!value.is_string()) throw Error(fmt::format("{}: \"text\" must be a string", where));
                s.text = value.as_string();
            } else if (key == "id") {
                if (!value.is_string() && !value.is_int64() && !value.is_uint64())
                    throw Error(fmt::format("{}: \"id\" must be a string or an integer", where));
                s.id = value;
            } else if (key == "select") {
                try {
                    s.select = selection::from_json(JsonValue::parse(json::serialize(value)));
                } catch (const std::exception& e) {
                    throw Error(fmt::format("{}: {}", where, e.what()));
                }
            } else if (key == "messages" || key == "add_generation_prompt" || key == "enable_thinking" || key == "tools") {
                if (!s.chat) s.chat.emplace();
                (*s.chat)[key] = value;
            } else if (key == "target") {
                if (!value.is_string() || value.as_string().empty())
                    throw Error(fmt::format("{}: \"target\" must be a non-empty string", where));
                s.target = std::string(value.as_string());
            } else {
                s.metadata[key] = value;
            }
        }
        if (s.chat) {
            if (!s.chat->contains("messages"))
                throw Error(fmt::format("{}: \"{}\" goes with \"messages\" (a conversation)", where, s.chat->begin()->key()));
            if (v.as_object().contains("text")) throw Error(fmt::format("{}: a sample has \"text\" or \"messages\", not both", where));
            chat::check_vars(*s.chat, where);  // "FILE:LINE: messages[0] needs a string 'role'"
            if (s.chat->at("messages").as_array().empty()) throw Error(fmt::format("{}: \"messages\" is empty", where));
            return true;
        }
        if (!v.as_object().contains("text")) throw Error(fmt::format("{}: the sample has no \"text\" (or \"messages\")", where));
        if (s.text.empty()) throw Error(fmt::format("{}: \"text\" is empty", where));
        return true;
    }
    if (in_.bad()) throw Error(fmt::format("{}: read error after line {}", path_.string(), line_));
    return false;
}

DatasetInfo scan_dataset(const std::filesystem::path& path) {
    DatasetInfo info;
    DatasetReader reader(path);
    Sample s;
    while (reader.next(s)) ++info.samples;
    if (info.samples == 0) throw Error(fmt::format("{}: the dataset has no samples", path.string()));
    info.sha256 = sha256_file_hex(path);
    info.bytes = std::filesystem::file_size(path);
    return info;
}

}  // namespace ember::extract
