// Build-time generator for the tokenizer's Unicode tables (run by CMake, never shipped).
//
//   ember_unicode_gen UnicodeData.txt PropList.txt OUTPUT.inc
//
// Reads the general category of every code point from UnicodeData.txt (expanding the
// "<..., First>" / "<..., Last>" ranges) and the White_Space property from PropList.txt,
// both from Debian's `unicode-data` package, and writes a two-stage lookup table of one
// flag byte per code point (see unicode.hpp for the bits). Unassigned code points get 0.
//
// It also checks the one assumption the pre-tokenizer makes about case mapping: that the
// only code points whose simple lowercase is one of the ASCII letters of the English
// contractions ('s 't 'm 'd 're 've 'll) are the ASCII capitals, so ASCII lowercasing is
// exact there. If a future Unicode version broke that, the build stops here.
//
// The output is written to a temporary name and renamed, so a failed run leaves nothing.
#include <array>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

constexpr std::uint32_t kCodepoints = 0x110000;
constexpr std::uint32_t kBlockSize = 256;

// Keep in sync with unicode.hpp.
constexpr std::uint8_t kLetter = 0x01, kNumber = 0x02, kMark = 0x04, kPunctuation = 0x08, kSymbol = 0x10,
                       kSeparator = 0x20, kOther = 0x40, kWhitespace = 0x80;

[[noreturn]] void fail(const std::string& where, const std::string& what) {
    std::cerr << "ember_unicode_gen: " << where << ": " << what << "\n";
    std::exit(1);
}

std::vector<std::string> split(const std::string& line, char sep) {
    std::vector<std::string> fields;
    std::string field;
    std::istringstream in(line);
    while (std::getline(in, field, sep)) fields.push_back(field);
    if (!line.empty() && line.back() == sep) fields.emplace_back();
    return fields;
}

std::uint32_t parse_hex(const std::string& text, const std::string& where) {
    std::size_t used = 0;
    unsigned long value = 0;
    try {
        value = std::stoul(text, &used, 16);
    } catch (const std::exception&) {
        fail(where, "'" + text + "' is not a hexadecimal code point");
    }
    if (used != text.size() || value >= kCodepoints) fail(where, "'" + text + "' is not a code point");
    return static_cast<std::uint32_t>(value);
}

std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::uint8_t category_flag(const std::string& category, const std::string& where) {
    if (category.size() != 2) fail(where, "bad general category '" + category + "'");
    switch (category[0]) {
        case 'L': return kLetter;
        case 'N': return kNumber;
        case 'M': return kMark;
        case 'P': return kPunctuation;
        case 'S': return kSymbol;
        case 'Z': return kSeparator;
        case 'C': return category == "Cn" ? 0 : kOther;
        default: fail(where, "unknown general category '" + category + "'");
    }
}

// UnicodeData.txt: "CODE;NAME;CATEGORY;...;UPPER;LOWER;TITLE".
void read_unicode_data(const std::string& path, std::vector<std::uint8_t>& flags) {
    std::ifstream in(path);
    if (!in) fail(path, "cannot open (install Debian's unicode-data package: scripts/setup.sh)");
    std::string line;
    std::uint64_t line_no = 0;
    std::int64_t range_first = -1;
    const std::string contraction_letters = "stmdrvel";
    while (std::getline(in, line)) {
        ++line_no;
        if (line.empty()) continue;
        const std::string where = path + ":" + std::to_string(line_no);
        const auto f = split(line, ';');
        if (f.size() != 15) fail(where, "expected 15 ';'-separated fields, found " + std::to_string(f.size()));
        const std::uint32_t cp = parse_hex(f[0], where);
        const std::uint8_t flag = category_flag(f[2], where);
        const std::string& name = f[1];
        if (name.size() > 8 && name.compare(name.size() - 8, 8, ", First>") == 0) {
            range_first = cp;
            continue;
        }
        std::uint32_t first = cp;
        if (name.size() > 7 && name.compare(name.size() - 7, 7, ", Last>") == 0) {
            if (range_first < 0) fail(where, "range end without a start");
            first = static_cast<std::uint32_t>(range_first);
            range_first = -1;
        }
        for (std::uint32_t c = first; c <= cp; ++c) flags[c] |= flag;

        if (!f[13].empty()) {
            const std::uint32_t lower = parse_hex(f[13], where);
            const bool to_contraction_letter =
                lower < 0x80 && contraction_letters.find(static_cast<char>(lower)) != std::string::npos;
            if (to_contraction_letter && !(cp >= 'A' && cp <= 'Z')) {
                fail(where, "a non-ASCII code point lowercases to an ASCII contraction letter; "
                            "the pre-tokenizer's ASCII lowercasing is no longer exact");
            }
        }
    }
    if (line_no < 1000) fail(path, "suspiciously short (" + std::to_string(line_no) + " lines)");
}

// PropList.txt: "0009..000D    ; White_Space # Cc   [5] <control-0009>..<control-000D>".
std::string read_white_space(const std::string& path, std::vector<std::uint8_t>& flags) {
    std::ifstream in(path);
    if (!in) fail(path, "cannot open (install Debian's unicode-data package: scripts/setup.sh)");
    std::string line, version;
    std::uint64_t line_no = 0, white_space = 0;
    while (std::getline(in, line)) {
        ++line_no;
        if (line_no == 1 && line.rfind("# PropList-", 0) == 0) {
            version = line.substr(11);
            if (const auto dot_txt = version.find(".txt"); dot_txt != std::string::npos) version.resize(dot_txt);
        }
        const std::string data = trim(line.substr(0, line.find('#')));
        if (data.empty()) continue;
        const std::string where = path + ":" + std::to_string(line_no);
        const auto f = split(data, ';');
        if (f.size() != 2) fail(where, "expected 'RANGE ; Property'");
        if (trim(f[1]) != "White_Space") continue;
        const std::string range = trim(f[0]);
        const auto dots = range.find("..");
        const std::uint32_t first = parse_hex(range.substr(0, dots), where);
        const std::uint32_t last = dots == std::string::npos ? first : parse_hex(range.substr(dots + 2), where);
        for (std::uint32_t c = first; c <= last; ++c) flags[c] |= kWhitespace;
        white_space += last - first + 1;
    }
    if (white_space < 20) fail(path, "found only " + std::to_string(white_space) + " White_Space code points");
    if (version.empty()) version = "unknown";
    return version;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        std::cerr << "usage: ember_unicode_gen UnicodeData.txt PropList.txt OUTPUT.inc\n";
        return 2;
    }
    std::vector<std::uint8_t> flags(kCodepoints, 0);
    read_unicode_data(argv[1], flags);
    const std::string version = read_white_space(argv[2], flags);

    // Two stages: block index per 256 code points -> one of the distinct 256-byte blocks.
    std::unordered_map<std::string, std::uint32_t> block_ids;
    std::vector<std::string> blocks;
    std::vector<std::uint32_t> index;
    for (std::uint32_t b = 0; b < kCodepoints / kBlockSize; ++b) {
        std::string block(flags.begin() + b * kBlockSize, flags.begin() + (b + 1) * kBlockSize);
        auto [it, inserted] = block_ids.emplace(block, static_cast<std::uint32_t>(blocks.size()));
        if (inserted) blocks.push_back(block);
        index.push_back(it->second);
    }
    if (blocks.size() > 65535) fail(argv[3], "too many distinct blocks");

    const std::string out_path = argv[3];
    const std::string tmp_path = out_path + ".tmp";
    {
        std::ofstream out(tmp_path, std::ios::trunc);
        if (!out) fail(tmp_path, "cannot write");
        out << "// Generated at build time by engine/tokenizer/unicode_gen.cpp from UnicodeData.txt and\n"
               "// PropList.txt (Unicode " << version << ", Debian package unicode-data). Do not edit.\n";
        out << "constexpr const char* kUnicodeVersion = \"" << version << "\";\n";
        out << "constexpr std::uint32_t kBlockSize = " << kBlockSize << ";\n";
        out << "constexpr std::uint16_t kBlockIndex[" << index.size() << "] = {";
        for (std::size_t i = 0; i < index.size(); ++i) out << (i % 24 == 0 ? "\n" : "") << index[i] << ",";
        out << "\n};\n";
        out << "constexpr std::uint8_t kBlocks[" << blocks.size() << "][" << kBlockSize << "] = {\n";
        for (const auto& block : blocks) {
            out << "{";
            for (std::size_t i = 0; i < block.size(); ++i) out << (i % 32 == 0 ? "\n" : "") << unsigned(static_cast<std::uint8_t>(block[i])) << ",";
            out << "},\n";
        }
        out << "};\n";
        if (!out.flush()) fail(tmp_path, "write failed");
    }
    if (std::rename(tmp_path.c_str(), out_path.c_str()) != 0) fail(out_path, "cannot rename the temporary file");
    return 0;
}
