// Writing a run directory (docs/formats.md, "Extraction run directory"): every file goes to
// a temporary name and is renamed into place, its size and SHA-256 recorded; manifest.json
// comes last and lists them all. Opening a directory removes a manifest left by an
// earlier run first, so at no moment does a manifest describe files that are being
// replaced: an interrupted run leaves files, never a manifest that claims them.
//
// The manifest is sealed: its last member, "manifest_sha256", is the SHA-256 of the
// manifest file's own bytes with those 64 hex digits replaced by '0' characters.
#pragma once

#include <boost/json/object.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::extract {

inline constexpr const char* kManifestName = "manifest.json";

struct FileRecord {
    std::string name;  // relative to the directory
    std::uint64_t bytes = 0;
    std::string sha256;
};

class RunDirectoryWriter {
public:
    // Creates `dir` and removes its manifest.json if any. ember::Error naming the path.
    explicit RunDirectoryWriter(std::filesystem::path dir);

    FileRecord write_npy_f32(const std::string& name, const float* data, const std::vector<std::size_t>& shape);
    FileRecord write_npy_i32(const std::string& name, const std::int32_t* data, const std::vector<std::size_t>& shape);
    FileRecord write_text(const std::string& name, std::string_view text);
    // A file someone else wrote into the directory (a trace journal): hashed and listed.
    FileRecord add_existing(const std::string& name);

    // Writes manifest.json: `manifest` plus "files" (name -> {bytes, sha256}) and the seal.
    void commit(boost::json::object manifest);

    const std::filesystem::path& dir() const { return dir_; }
    const std::vector<FileRecord>& files() const { return files_; }

    // Called after each file is in place (progress; tests stop a run here).
    std::function<void(const FileRecord&)> on_file_written;

private:
    FileRecord write_bytes(const std::string& name, std::string_view header, const void* data, std::size_t bytes);
    FileRecord added(FileRecord record);

    std::filesystem::path dir_;
    std::vector<FileRecord> files_;
};

// The manifest's text with its seal (pretty JSON, "manifest_sha256" last, a final newline).
std::string seal_manifest(boost::json::object manifest);
// Whether `text` (a manifest file's bytes) carries a seal that matches; `why` says what is
// wrong otherwise.
bool seal_matches(std::string_view text, std::string& why);

}  // namespace ember::extract
