#include "record/verify.hpp"

#include <ember/npy.hpp>
#include <fmt/format.h>

#include <boost/json/parse.hpp>

#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <set>

#include "common/sha256_file.hpp"
#include "record/strict_json.hpp"
#include "record/strict_parse.hpp"
#include "record/run_directory.hpp"

namespace ember::record {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

// Sizes and dimensions above this are not believed (no file or array is 2^53 bytes).
constexpr std::uint64_t kLargest = std::uint64_t{1} << 53;

// obj[key], or null when absent.
const json::value& member(const json::object& obj, const char* key) {
    static const json::value null_value;
    const json::value* v = obj.if_contains(key);
    return v ? *v : null_value;
}

std::string text_of(const json::value& v) { return v.is_string() ? std::string(v.as_string()) : ""; }

// A value that must be a count (a size in bytes, a dimension): an integer in [0, 2^53].
std::optional<std::uint64_t> count(const json::value& v, const std::string& key, std::string& why) {
    if (v.is_uint64() && v.as_uint64() <= kLargest) return v.as_uint64();
    if (v.is_int64() && v.as_int64() >= 0 && static_cast<std::uint64_t>(v.as_int64()) <= kLargest)
        return static_cast<std::uint64_t>(v.as_int64());
    if (v.is_int64() && v.as_int64() < 0) why = fmt::format("{} is {}, a negative count", key, v.as_int64());
    else if (v.is_uint64() || v.is_int64()) why = fmt::format("{} is {}, too large to be believed", key, strict_json(v));
    else if (v.is_double()) why = fmt::format("{} is {}, not a whole number", key, strict_json(v));
    else why = fmt::format("{} is {}, not a number", key, v.is_null() ? "missing" : strict_json(v));
    return std::nullopt;
}

// A name of the files table: a relative path inside the directory.
bool safe_name(const std::string& name) {
    if (name.empty() || name.front() == '/') return false;
    for (const auto& part : fs::path(name)) {
        const std::string p = part.string();
        if (p.empty() || p == "." || p == "..") return false;
    }
    return name.find("//") == std::string::npos && name.back() != '/';
}

class Verifier {
public:
    Verifier(fs::path dir, VerifyReport& report) : dir_(std::move(dir)), report_(report) {}

    void problem(const std::string& file, std::string message) { report_.problems.push_back({file, std::move(message)}); }

    // Every file of the "files" table: present, same size, same SHA-256.
    void check_files(const json::object& files) {
        for (const auto& [key, value] : files) {
            const std::string name(key);
            if (!safe_name(name)) {
                problem(kManifestName, fmt::format("files: '{}' is not a path inside the directory", name));
                continue;
            }
            listed_.insert(name);
            const json::object* entry = value.if_object();
            if (!entry) {
                problem(kManifestName, fmt::format("files.{} is not an object with bytes and sha256", name));
                continue;
            }
            std::string why;
            const auto expected_size = count(member(*entry, "bytes"), fmt::format("files.{}.bytes", name), why);
            if (!expected_size) {
                problem(kManifestName, why);
                continue;
            }
            const json::value& sha = member(*entry, "sha256");
            if (!sha.is_string() || sha.as_string().size() != 64) {
                problem(kManifestName, fmt::format("files.{}.sha256 is not 64 hex digits", name));
                continue;
            }
            const fs::path path = dir_ / name;
            std::error_code ec;
            if (!fs::is_regular_file(fs::symlink_status(path, ec))) {
                problem(name, "missing (listed in the manifest)");
                continue;
            }
            ++report_.files_checked;
            const auto size = fs::file_size(path, ec);
            if (size != *expected_size) {
                problem(name, fmt::format("is {} bytes, the manifest says {}", size, *expected_size));
                continue;
            }
            const std::string actual = sha256_file_hex(path);
            if (actual != sha.as_string())
                problem(name, fmt::format("SHA-256 {} does not match the manifest's {}", actual, std::string(sha.as_string())));
        }
    }

    // A shape: an array of counts whose product is believable. `key` names it in messages.
    std::optional<std::vector<std::size_t>> shape_of(const json::value& v, const std::string& key) {
        const json::array* a = v.if_array();
        if (!a) {
            problem(kManifestName, fmt::format("{} is not an array of dimensions", key));
            return std::nullopt;
        }
        std::vector<std::size_t> shape;
        std::uint64_t elements = 1;
        for (std::size_t i = 0; i < a->size(); ++i) {
            std::string why;
            const auto d = count((*a)[i], fmt::format("{}[{}]", key, i), why);
            if (!d) {
                problem(kManifestName, why);
                return std::nullopt;
            }
            if (*d != 0 && elements > kLargest / *d) {
                problem(kManifestName, fmt::format("{} holds more elements than any file could", key));
                return std::nullopt;
            }
            elements *= *d;
            shape.push_back(static_cast<std::size_t>(*d));
        }
        return shape;
    }

    // One array the manifest describes: listed, and its header says what the manifest says.
    void check_array(const json::value& file_value, const json::value& shape_value, const char* descr,
                     const std::string& key) {
        if (!file_value.is_string()) {
            problem(kManifestName, fmt::format("{} has no file name", key));
            return;
        }
        const std::string name(file_value.as_string());
        if (!listed_.count(name)) {
            problem(name, "is described as an array but not listed in files");
            return;
        }
        const auto shape = shape_of(shape_value, key + ".shape");
        if (!shape) return;
        const fs::path path = dir_ / name;
        std::error_code ec;
        if (!fs::is_regular_file(path, ec)) return;  // reported as missing already
        try {
            const npy::Header h = npy::read_header(path);
            if (h.descr != descr) problem(name, fmt::format("dtype '{}', the manifest expects '{}'", h.descr, descr));
            if (h.fortran_order) problem(name, "is in Fortran order, not C order");
            if (h.shape != *shape)
                problem(name, fmt::format("has shape {}, the manifest says {}", npy::shape_text(h.shape), npy::shape_text(*shape)));
            const std::uint64_t expected = h.data_offset + h.count() * 4;
            const auto size = fs::file_size(path, ec);
            if (size != expected) problem(name, fmt::format("holds {} bytes, its header implies {}", size, expected));
        } catch (const std::runtime_error& e) {
            problem(name, e.what());
        }
    }

    void check_positions(const json::object& entry, const std::string& key) {
        const json::value* positions = entry.if_contains("positions");
        const json::value* shape = entry.if_contains("shape");
        if (!positions || !positions->is_array() || !shape || !shape->is_array() || shape->as_array().empty()) return;
        std::string why;
        const auto rows = count(shape->as_array()[0], key + ".shape[0]", why);
        // attention_pattern: n_head rows per position (rows_per_position).
        std::optional<std::uint64_t> rows_each = 1;
        if (const json::value* per_position = entry.if_contains("rows_per_position"))
            rows_each = count(*per_position, key + ".rows_per_position", why);
        if (rows && rows_each && *rows != positions->as_array().size() * *rows_each)
            problem(text_of(member(entry, "file")).empty() ? std::string(kManifestName) : text_of(member(entry, "file")),
                    "has a row count different from its number of positions");
    }

    void check_arrays(const json::object& manifest) {
        auto object_entries = [](const json::value* v) {
            std::vector<const json::object*> out;
            if (v && v->is_array())
                for (const auto& e : v->as_array())
                    if (e.is_object()) out.push_back(&e.as_object());
            return out;
        };
        // "tensors" (runs and extractions) and "arrays" (capture) describe float32 arrays.
        for (const char* list : {"tensors", "arrays"}) {
            std::size_t i = 0;
            for (const json::object* t : object_entries(manifest.if_contains(list))) {
                const std::string key = fmt::format("{}[{}]", list, i++);
                check_array(member(*t, "file"), member(*t, "shape"), "<f4", key);
                check_positions(*t, key);
            }
        }
        if (const json::value* logits = manifest.if_contains("logits"); logits && logits->is_object()) {
            check_array(member(logits->as_object(), "file"), member(logits->as_object(), "shape"), "<f4", "logits");
        }
        if (const json::value* lens = manifest.if_contains("logit_lens"); lens && lens->is_object()) {
            std::size_t i = 0;
            for (const json::object* l : object_entries(lens->as_object().if_contains("layers"))) {
                const std::string key = fmt::format("logit_lens.layers[{}]", i++);
                check_array(member(*l, "ids_file"), member(*l, "shape"), "<i4", key);
                check_array(member(*l, "logits_file"), member(*l, "shape"), "<f4", key);
            }
        }
    }

    // Every file under the directory must be listed.
    void check_unlisted() {
        std::error_code ec;
        for (auto it = fs::recursive_directory_iterator(dir_, ec); !ec && it != fs::end(it); it.increment(ec)) {
            if (it->is_directory(ec) && !it->is_symlink(ec)) continue;
            const std::string name = it->path().lexically_relative(dir_).generic_string();
            // The lock record of a writer at work is not part of any run (record/dir_lock.hpp).
            if (name == kManifestName || name == kLockRecordName || listed_.count(name)) continue;
            problem(name, "is not listed in the manifest (the seal covers every file of the directory)");
        }
    }

    // A manifest.json listed in a subdirectory is that directory's own sealed manifest.
    void check_nested() {
        for (const std::string& name : listed_) {
            const fs::path p(name);
            if (p.filename() != kManifestName || !p.has_parent_path()) continue;
            const VerifyReport inner = verify_run_directory(dir_ / p.parent_path());
            for (const auto& q : inner.problems) problem((p.parent_path() / q.file).generic_string(), q.message);
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
    const json::object manifest = parse_strict_json(text, manifest_path.string()).as_object();  // seal_matches parsed it
    report.kind = text_of(member(manifest, "kind"));
    report.run_id = text_of(member(manifest, "run_id"));
    report.config_hash = text_of(member(manifest, "config_hash"));
    report.manifest_sha256 = text_of(member(manifest, "manifest_sha256"));
    if (const json::value* inputs = manifest.if_contains("inputs"); inputs && inputs->is_array())
        report.inputs = inputs->as_array();
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
    v.check_unlisted();
    v.check_nested();
    return report;
}

}  // namespace ember::record
