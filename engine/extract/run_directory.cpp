#include "extract/run_directory.hpp"

#include <ember/npy.hpp>
#include <fmt/format.h>

#include <boost/json/parse.hpp>

#include <system_error>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/json_pretty.hpp"
#include "common/sha256.hpp"

namespace ember::extract {
namespace {

namespace json = boost::json;

const std::string kSealKey = "manifest_sha256";
const std::string kZeros(64, '0');

void check_name(const std::string& name) {
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == ".." || name == kManifestName)
        throw Error(fmt::format("'{}' is not a plain file name for a run directory", name));
}

}  // namespace

RunDirectoryWriter::RunDirectoryWriter(std::filesystem::path dir) : dir_(std::move(dir)) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) throw Error(fmt::format("{}: cannot create the output directory: {}", dir_.string(), ec.message()));
    std::filesystem::remove(dir_ / kManifestName, ec);
    if (ec) throw Error(fmt::format("{}: cannot remove the earlier manifest: {}", (dir_ / kManifestName).string(), ec.message()));
}

FileRecord RunDirectoryWriter::added(FileRecord record) {
    files_.push_back(record);
    if (on_file_written) on_file_written(record);
    return record;
}

FileRecord RunDirectoryWriter::write_bytes(const std::string& name, std::string_view header, const void* data,
                                           std::size_t bytes) {
    check_name(name);
    try {
        npy::write_file_atomically(dir_ / name, header, data, bytes);
    } catch (const std::runtime_error& e) {
        throw Error(e.what());
    }
    Sha256 sha;
    sha.update(header);
    sha.update(std::span(static_cast<const std::byte*>(data), bytes));
    return added({name, header.size() + bytes, sha.finish_hex()});
}

FileRecord RunDirectoryWriter::write_npy_f32(const std::string& name, const float* data,
                                             const std::vector<std::size_t>& shape) {
    return write_bytes(name, npy::header("<f4", shape), data, npy::element_count(shape) * sizeof(float));
}

FileRecord RunDirectoryWriter::write_npy_i32(const std::string& name, const std::int32_t* data,
                                             const std::vector<std::size_t>& shape) {
    return write_bytes(name, npy::header("<i4", shape), data, npy::element_count(shape) * sizeof(std::int32_t));
}

FileRecord RunDirectoryWriter::write_text(const std::string& name, std::string_view text) {
    return write_bytes(name, text, nullptr, 0);
}

FileRecord RunDirectoryWriter::add_existing(const std::string& name) {
    check_name(name);
    const std::filesystem::path path = dir_ / name;
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) throw Error(fmt::format("{}: cannot add to the manifest: {}", path.string(), ec.message()));
    return added({name, size, sha256_file_hex(path)});
}

void RunDirectoryWriter::commit(json::object manifest) {
    json::object files;
    for (const FileRecord& f : files_) files[f.name] = {{"bytes", f.bytes}, {"sha256", f.sha256}};
    manifest["files"] = std::move(files);
    write_file_atomically(dir_ / kManifestName, seal_manifest(std::move(manifest)));
}

std::string seal_manifest(json::object manifest) {
    manifest.erase(kSealKey);
    manifest[kSealKey] = kZeros;  // inserted last, so written last
    std::string text = pretty_json(manifest) + "\n";
    const std::string placeholder = "\"" + kSealKey + "\": \"" + kZeros + "\"";
    const std::size_t at = text.rfind(placeholder);
    if (at == std::string::npos) throw Error("manifest: the seal placeholder is missing");
    const std::string digest = sha256_hex(text);
    text.replace(at + placeholder.size() - 65, 64, digest);
    return text;
}

bool seal_matches(std::string_view text, std::string& why) {
    json::error_code ec;
    const json::value value = json::parse(text, ec);
    if (ec || !value.is_object()) {
        why = "not a valid JSON object";
        return false;
    }
    const json::value* seal = value.as_object().if_contains(kSealKey);
    if (seal == nullptr || !seal->is_string() || seal->as_string().size() != 64) {
        why = "has no manifest_sha256 seal";
        return false;
    }
    const std::string digest(seal->as_string());
    const std::string sealed = "\"" + kSealKey + "\": \"" + digest + "\"";
    const std::size_t at = text.rfind(sealed);
    if (at == std::string_view::npos) {
        why = "manifest_sha256 is not written as the seal";
        return false;
    }
    std::string zeroed(text);
    zeroed.replace(at + sealed.size() - 65, 64, kZeros);
    const std::string actual = sha256_hex(zeroed);
    if (actual != digest) {
        why = fmt::format("its bytes do not match its seal (manifest_sha256 {}, content hashes to {})", digest, actual);
        return false;
    }
    return true;
}

}  // namespace ember::extract
