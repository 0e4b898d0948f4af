// Helpers of the dataset suites: writing datasets, running `ember extract`, reading a run
// directory's arrays and JSON lines.
#pragma once

#include <ember/npy.hpp>
#include <fmt/format.h>

#include <boost/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/files.hpp"
#include "support/fixtures.hpp"

namespace ember::test {

// Every family and vocabulary, Gemma 4 with and without shared KV.
inline constexpr const char* kDatasetModels[] = {"stories260K",      "llama-2-tiny-random", "synth-llama3-q8_0",
                                                 "synth-qwen3-q8_0", "synth-gemma4-q8_0",   "synth-gemma4-e-q8_0"};

inline std::filesystem::path model_file(const std::string& model) { return fixture_path("models/" + model + ".gguf"); }

// One JSONL line {"text": TEXT, ...extra members}.
inline std::string jsonl_line(const std::string& text, boost::json::object extra = {}) {
    extra["text"] = text;
    return boost::json::serialize(extra) + "\n";
}

inline CommandResult ember(const std::string& args) { return run_command(fmt::format("{} {}", EMBER_BINARY, args), true); }

inline std::vector<boost::json::object> read_jsonl(const std::filesystem::path& path) {
    std::vector<boost::json::object> out;
    std::istringstream in(read_all(path));
    for (std::string line; std::getline(in, line);) out.push_back(boost::json::parse(line).as_object());
    return out;
}

// Rows [first, first + count) of a 2-D or 3-D array (a row: everything after the first index).
inline std::vector<float> rows_of(const npy::Array& a, std::size_t first, std::size_t count) {
    std::size_t cols = 1;
    for (std::size_t d = 1; d < a.shape.size(); ++d) cols *= a.shape[d];
    return {a.values.begin() + static_cast<std::ptrdiff_t>(first * cols),
            a.values.begin() + static_cast<std::ptrdiff_t>((first + count) * cols)};
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every file of a finished run directory but the manifest (which records the config, and
// with it the batch size), by name.
inline std::vector<std::pair<std::string, std::string>> run_files(const std::filesystem::path& dir) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& e : std::filesystem::directory_iterator(dir))
        if (e.path().filename() != "manifest.json") out.emplace_back(e.path().filename().string(), read_all(e.path()));
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace ember::test
