#include "extract/verify.hpp"

#include <ember/npy.hpp>
#include <fmt/format.h>

#include <boost/json/parse.hpp>

#include <fstream>
#include <iterator>
#include <set>

#include "common/sha256.hpp"
#include "extract/run_directory.hpp"

namespace ember::extract {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

// obj[key], or null when absent.
const json::value& member(const json::object& obj, const char* key) {
    static const json::value null_value;
    const json::value* v = obj.if_contains(key);
    return v ? *v : null_value;
}

class Verifier {
public:
    Verifier(fs::path dir, VerifyReport& report) : dir_(std::move(dir)), report_(report) {}

    void problem(const std::string& file, std::string message) { report_.problems.push_back({file, std::move(message)}); }

    // Every file of the "files" table: present, same size, same SHA-256.
    void check_files(const json::object& files) {
        for (const auto& [key, value] : files) {
            const std::string name(key);
            listed_.insert(name);
            const json::object* entry = value.if_object();
            const json::value* bytes = entry ? entry->if_contains("bytes") : nullptr;
            const json::value* sha = entry ? entry->if_contains("sha256") : nullptr;
            if (!bytes || !bytes->is_number() || !sha || !sha->is_string()) {
                problem(kManifestName, fmt::format("files.{} needs bytes and sha256", name));
                continue;
            }
            const fs::path path = dir_ / name;
            std::error_code ec;
            if (name.find('/') != std::string::npos || !fs::is_regular_file(path, ec)) {
                problem(name, "missing (listed in the manifest)");
                continue;
            }
            ++report_.files_checked;
            const auto size = fs::file_size(path, ec);
            const auto expected_size = bytes->to_number<std::uint64_t>();
            if (size != expected_size) {
                problem(name, fmt::format("is {} bytes, the manifest says {}", size, expected_size));
                continue;
            }
            const std::string actual = sha256_file_hex(path);
            if (actual != sha->as_string())
                problem(name, fmt::format("SHA-256 {} does not match the manifest's {}", actual, std::string(sha->as_string())));
        }
    }

    // One array the manifest describes: listed, and its header says what the manifest says.
    void check_array(const json::value& file_value, const json::value& shape_value, const char* descr) {
        if (!file_value.is_string()) {
            problem(kManifestName, "an array entry has no file name");
            return;
        }
        const std::string name(file_value.as_string());
        if (!listed_.count(name)) {
            problem(name, "is described as an array but not listed in files");
            return;
        }
        std::vector<std::size_t> shape;
        if (const json::array* a = shape_value.if_array()) {
            for (const auto& d : *a)
                if (d.is_number()) shape.push_back(d.to_number<std::size_t>());
        }
        const fs::path path = dir_ / name;
        std::error_code ec;
        if (!fs::is_regular_file(path, ec)) return;  // reported as missing already
        try {
            const npy::Header h = npy::read_header(path);
            if (h.descr != descr) problem(name, fmt::format("dtype '{}', the manifest expects '{}'", h.descr, descr));
            if (h.fortran_order) problem(name, "is in Fortran order, not C order");
            if (h.shape != shape)
                problem(name, fmt::format("has shape {}, the manifest says {}", npy::shape_text(h.shape), npy::shape_text(shape)));
            const std::uint64_t expected = h.data_offset + h.count() * 4;
            const auto size = fs::file_size(path, ec);
            if (size != expected) problem(name, fmt::format("holds {} bytes, its header implies {}", size, expected));
        } catch (const std::runtime_error& e) {
            problem(name, e.what());
        }
    }

    void check_positions(const json::object& entry) {
        const json::value* positions = entry.if_contains("positions");
        const json::value* shape = entry.if_contains("shape");
        const json::value* file = entry.if_contains("file");
        if (!positions || !positions->is_array() || !shape || !shape->is_array() || shape->as_array().size() != 2) return;
        // attention_pattern: n_head rows per position (rows_per_position).
        const json::value* per_position = entry.if_contains("rows_per_position");
        const std::size_t rows_each = per_position && per_position->is_number() ? per_position->to_number<std::size_t>() : 1;
        if (shape->as_array()[0].to_number<std::size_t>() != positions->as_array().size() * rows_each) {
            problem(file && file->is_string() ? std::string(file->as_string()) : std::string(kManifestName),
                    "has a row count different from its number of positions");
        }
    }

    void check_arrays(const json::object& manifest) {
        auto object_entries = [](const json::value* v) {
            std::vector<const json::object*> out;
            if (v && v->is_array())
                for (const auto& e : v->as_array())
                    if (e.is_object()) out.push_back(&e.as_object());
            return out;
        };
        for (const json::object* t : object_entries(manifest.if_contains("tensors"))) {
            check_array(member(*t, "file"), member(*t, "shape"), "<f4");
            check_positions(*t);
        }
        if (const json::value* logits = manifest.if_contains("logits"); logits && logits->is_object()) {
            check_array(member(logits->as_object(), "file"), member(logits->as_object(), "shape"), "<f4");
        }
        if (const json::value* lens = manifest.if_contains("logit_lens"); lens && lens->is_object()) {
            for (const json::object* l : object_entries(lens->as_object().if_contains("layers"))) {
                check_array(member(*l, "ids_file"), member(*l, "shape"), "<i4");
                check_array(member(*l, "logits_file"), member(*l, "shape"), "<f4");
            }
        }
    }

    void warn_unlisted() {
        std::error_code ec;
        for (const auto& entry : fs::directory_iterator(dir_, ec)) {
            const std::string name = entry.path().filename().string();
            if (name == kManifestName || listed_.count(name)) continue;
            report_.warnings.push_back({name, "is not listed in the manifest"});
        }
    }

private:
    fs::path dir_;
    VerifyReport& report_;
    std::set<std::string> listed_;
};

}  // namespace

VerifyReport verify_run_directory(const fs::path& dir) {
    VerifyReport report;
    Verifier v(dir, report);
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
        v.problem(dir.string(), "is not a directory");
        return report;
    }
    const fs::path manifest_path = dir / kManifestName;
    std::ifstream in(manifest_path, std::ios::binary);
    if (!in) {
        v.problem(kManifestName, "missing: the run did not finish, or this is not a run directory");
        return report;
    }
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string why;
    if (!seal_matches(text, why)) {
        v.problem(kManifestName, why);
        return report;
    }
    const json::object manifest = json::parse(text).as_object();
    if (const json::value* hash = manifest.if_contains("config_hash"); hash && hash->is_string())
        report.config_hash = std::string(hash->as_string());
    const json::value* version = manifest.if_contains("schema_version");
    if (!version || !version->is_int64() || version->as_int64() != 1) {
        v.problem(kManifestName, "schema_version is not 1 (this ember reads schema 1)");
        return report;
    }
    const json::value* files = manifest.if_contains("files");
    if (!files || !files->is_object()) {
        v.problem(kManifestName, "has no files table");
        return report;
    }
    v.check_files(files->as_object());
    v.check_arrays(manifest);
    v.warn_unlisted();
    return report;
}

}  // namespace ember::extract
