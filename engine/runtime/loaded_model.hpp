// A model file opened for running: the mapped file, the model's weights (views into the
// mapping), its tokenizer and the file's SHA-256 (what run.json and manifests record).
// Immutable once loaded, so one LoadedModel may serve many runs, one after another or at
// once (a sweep loads each model once).
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "gguf/gguf_file.hpp"
#include "models/model.hpp"
#include "tokenizer/tokenizer.hpp"

namespace ember::runtime {

struct LoadedModel {
    // Throws ember::Error naming the file on anything malformed; `expected` is --arch.
    LoadedModel(const std::filesystem::path& path, std::optional<models::Family> expected);
    // The same with the file's SHA-256 already known (a supervised worker: the supervisor
    // hashed the file it maps again), so the file is not hashed a second time; its block
    // scales are checked (a pass the digest cache skips when the supervisor's check passed).
    LoadedModel(const std::filesystem::path& path, std::optional<models::Family> expected, std::string known_sha256);
    LoadedModel(const LoadedModel&) = delete;
    LoadedModel& operator=(const LoadedModel&) = delete;

    std::filesystem::path path;  // absolute
    gguf::File file;             // the weights are views into its mapping
    std::unique_ptr<models::Model> model;
    std::string sha256;  // of the mapped bytes, hashed while their block scales were checked
    tokenizer::Tokenizer tokenizer;
    double load_ms = 0;  // map, validate, hash and check, load weights and tokenizer

private:
    LoadedModel(const std::filesystem::path& path, std::optional<models::Family> expected,
                std::chrono::steady_clock::time_point start, std::optional<std::string> known_sha256);
};

}  // namespace ember::runtime
