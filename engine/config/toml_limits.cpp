#include "config/toml_limits.hpp"

#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <vector>

#include "common/error.hpp"
#include "config/toml_reader.hpp"

namespace ember::config {
namespace {

// Walks the text as TOML's grammar nests it, without building anything: strings and
// comments are skipped, a key's dots, a table header's dots and the brackets of values
// are counted. Not a validator: what it does not understand, toml++ reports afterwards.
class NestingScan {
public:
    NestingScan(std::string_view text, const std::string& file) : text_(text), file_(file) {}

    void run() {
        while (at_ < text_.size()) {
            const char c = text_[at_];
            if (c == '\n') {
                newline();
                continue;
            }
            if (c == '#') {
                while (at_ < text_.size() && text_[at_] != '\n') advance();
                continue;
            }
            if (c == '"' || c == '\'') {
                skip_string(c);
                continue;
            }
            if (in_key_) key_char(c);
            else value_char(c);
            advance();
        }
    }

private:
    void key_char(char c) {
        if (c == '[' && stack_.empty() && at_line_start_) {
            header_parts_ = 1;  // [a.b] or [[a.b]]
            key_parts_ = 0;
            in_header_ = true;
        } else if (c == '.') {
            ++(in_header_ ? header_parts_ : key_parts_);
            check();
        } else if (c == ']' && in_header_) {
            in_header_ = false;
        } else if (c == '=') {
            in_key_ = false;
        } else if (c == '}' && !stack_.empty()) {  // an empty inline table: {}
            stack_.pop_back();
            in_key_ = false;
        } else if (c != ' ' && c != '\t' && c != '\r' && key_parts_ == 0 && !in_header_) {
            key_parts_ = 1;
            check();
        }
        if (c != ' ' && c != '\t') at_line_start_ = false;
    }

    void value_char(char c) {
        if (c == '[' || c == '{') {
            stack_.push_back(c);
            check();
            if (c == '{') start_key();
        } else if ((c == ']' || c == '}') && !stack_.empty()) {
            stack_.pop_back();
        } else if (c == ',' && !stack_.empty() && stack_.back() == '{') {
            start_key();
        }
    }

    void start_key() {
        in_key_ = true;
        key_parts_ = 0;
    }

    void newline() {
        advance();
        if (stack_.empty()) {
            start_key();
            in_header_ = false;
            at_line_start_ = true;
        }
    }

    // A basic ("...") or literal ('...') string, single- or multi-line.
    void skip_string(char quote) {
        const bool triple = text_.substr(at_, 3) == std::string_view(quote == '"' ? "\"\"\"" : "'''");
        const std::size_t open = triple ? 3 : 1;
        for (std::size_t i = 0; i < open; ++i) advance();
        at_line_start_ = false;
        if (in_key_ && key_parts_ == 0 && !in_header_) {
            key_parts_ = 1;
            check();
        }
        while (at_ < text_.size()) {
            const char c = text_[at_];
            if (quote == '"' && c == '\\') {
                advance();
                if (at_ < text_.size()) advance();
                continue;
            }
            if (c == quote && (!triple || text_.substr(at_, 3) == std::string_view(quote == '"' ? "\"\"\"" : "'''"))) {
                for (std::size_t i = 0; i < open; ++i) advance();
                return;
            }
            if (c == '\n' && !triple) return;  // unterminated: toml++ says so
            advance();
        }
    }

    void advance() {
        if (at_ < text_.size() && text_[at_] == '\n') {
            ++line_;
            column_ = 1;
        } else {
            ++column_;
        }
        ++at_;
    }

    void check() const {
        const std::size_t depth = header_parts_ + (in_key_ && !in_header_ ? key_parts_ : 0) + stack_.size();
        if (depth > kMaxTomlDepth) {
            throw Error(fmt::format("{}:{}:{}: nested deeper than {} levels (tables, dotted keys, arrays and inline "
                                    "tables together); a run config needs a handful",
                                    file_, line_, column_, kMaxTomlDepth));
        }
    }

    std::string_view text_;
    const std::string& file_;
    std::size_t at_ = 0;
    std::size_t line_ = 1;
    std::size_t column_ = 1;
    std::vector<char> stack_;  // '[' and '{' of the value being read
    std::size_t header_parts_ = 0;
    std::size_t key_parts_ = 0;
    bool in_key_ = true;
    bool in_header_ = false;
    bool at_line_start_ = true;
};

}  // namespace

void check_toml_nesting(std::string_view text, const std::string& file) { NestingScan(text, file).run(); }

toml::table parse_toml_file_within_limits(const std::filesystem::path& file) {
    namespace fs = std::filesystem;
    const std::string display = file.string();
    std::error_code ec;
    const fs::file_status status = fs::status(file, ec);
    if (!fs::exists(status)) throw Error(fmt::format("{}: cannot open (no such file)", display));
    if (!fs::is_regular_file(status))
        throw Error(fmt::format("{}: not a regular file (a run config is a TOML file)", display));
    const std::uintmax_t size = fs::file_size(file, ec);
    if (ec) throw Error(fmt::format("{}: cannot read ({})", display, ec.message()));
    if (size > kMaxTomlBytes)
        throw Error(fmt::format("{}: {} bytes, more than the {} bytes a TOML file may hold", display, size, kMaxTomlBytes));
    std::ifstream in(file, std::ios::binary);
    if (!in) throw Error(fmt::format("{}: cannot open", display));
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw Error(fmt::format("{}: cannot read", display));
    check_toml_nesting(text, display);
    try {
        return toml::parse(text, display);
    } catch (const toml::parse_error& e) {
        throw Error(located(display, e.source(), e.description()));
    }
}

}  // namespace ember::config
