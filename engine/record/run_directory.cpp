#include "record/run_directory.hpp"

#include <ember/manifest_seal.hpp>
#include <ember/npy.hpp>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <boost/json/parse.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <fstream>
#include <iterator>
#include <system_error>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "record/json_pretty.hpp"
#include "common/output_path.hpp"
#include "record/strict_parse.hpp"
#include "common/sha256_file.hpp"

namespace ember::record {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

const std::string kSealKey = "manifest_sha256";
constexpr const char* kStagingTag = ".ember-staging.";
constexpr const char* kReplacedTag = ".ember-replaced.";

void check_name(const std::string& name) {
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == ".." || name == kManifestName)
        throw Error(fmt::format("'{}' is not a plain file name for a run directory", name));
}

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A member of a JSON file's top object as text ("" when the file, the member or its type is missing).
std::string json_string_member(const fs::path& file, const char* key) {
    json::error_code ec;
    const json::value v = json::parse(read_file(file), ec);
    if (ec || !v.is_object()) return "";
    const json::value* m = v.as_object().if_contains(key);
    return m && m->is_string() ? std::string(m->as_string()) : "";
}

// `.NAME.ember-staging.PID` / `.NAME.ember-replaced.PID` beside `dir`.
fs::path sibling(const fs::path& dir, const char* tag, long pid) {
    return dir.parent_path() / fmt::format(".{}{}{}", dir.filename().string(), tag, pid);
}

bool process_alive(long pid) { return pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM; }

// Staging and replaced directories beside `dir` left by processes that died.
void remove_stale_siblings(const fs::path& dir) {
    const std::string prefix = "." + dir.filename().string();
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir.parent_path(), ec)) {
        const std::string name = entry.path().filename().string();
        for (const char* tag : {kStagingTag, kReplacedTag}) {
            const std::string start = prefix + tag;
            if (name.rfind(start, 0) != 0) continue;
            long pid = 0;
            try {
                pid = std::stol(name.substr(start.size()));
            } catch (const std::exception&) {
                continue;
            }
            if (!process_alive(pid)) {
                std::error_code remove_ec;
                fs::remove_all(entry.path(), remove_ec);
            }
        }
    }
}

// The files `dir` holds (recursively, '/'-separated) besides the lock record; empty
// subdirectories do not count.
std::vector<std::string> contents(const fs::path& dir) {
    std::vector<std::string> names;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it); it.increment(ec)) {
        if (it->is_directory(ec) && !it->is_symlink(ec)) continue;
        const std::string name = it->path().lexically_relative(dir).generic_string();
        if (name != kLockRecordName) names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    return names;
}

// "'a' and 3 more" for an error message.
std::string first_and_count(const std::vector<std::string>& names) {
    return fmt::format("'{}'{}", names.front(), names.size() > 1 ? fmt::format(" and {} more", names.size() - 1) : "");
}

// Whether `dir` holds an Ember run: a manifest, a run.json with a run id, a dataset run's
// progress record, or (`had_lock_record`) the lock record of a writer killed in it.
bool holds_ember_run(const fs::path& dir, bool had_lock_record) {
    std::error_code ec;
    return had_lock_record || fs::exists(dir / kManifestName, ec) || fs::exists(dir / "progress.json", ec) ||
           !recorded_run_id(dir).empty();
}

// A name Ember writes into a run directory without a manifest (a failed or unfinished run).
bool ember_file_name(const std::string& name) {
    static const std::set<std::string> fixed{"run.json", "progress.json", "trace.jsonl", "samples.jsonl",
                                             "rows.jsonl", "targets.jsonl", kManifestName};
    if (name.find('/') != std::string::npos) return false;
    return fixed.contains(name) || name.ends_with(".npy") || name.ends_with(".partial") ||
           (name.starts_with("logit_lens.layer") && name.ends_with(".pieces.json"));
}

// NAME.user-files-20261201T223500Z beside `dir` (with -2, -3... when that exists).
fs::path user_files_sibling(const fs::path& dir) {
    const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm utc{};
    ::gmtime_r(&now, &utc);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
    const fs::path base = dir.parent_path() / fmt::format("{}.user-files-{}", dir.filename().string(), stamp);
    fs::path candidate = base;
    std::error_code ec;
    for (int n = 2; fs::symlink_status(candidate, ec).type() != fs::file_type::not_found; ++n)
        candidate = fs::path(fmt::format("{}-{}", base.string(), n));
    return candidate;
}

// Removes the (empty) subdirectories of a directory that holds no file.
void remove_subdirectories(const fs::path& dir) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        std::error_code remove_ec;
        if (entry.is_directory(remove_ec) && !entry.is_symlink(remove_ec)) fs::remove_all(entry.path(), remove_ec);
    }
}

// Swaps `a` and `b` atomically (renameat2 RENAME_EXCHANGE); where the file system cannot,
// moves `b` aside and `a` into its place (both complete all along). `b` ends as `aside`.
void swap_into_place(const fs::path& a, const fs::path& b, const fs::path& aside) {
    if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0) {
        std::error_code ec;
        fs::rename(a, aside, ec);  // a now holds the old run
        if (ec) fs::remove_all(a, ec);
        return;
    }
    std::error_code ec;
    fs::rename(b, aside, ec);
    if (ec) throw Error(fmt::format("cannot move the earlier run {} aside: {}", b.string(), ec.message()));
    fs::rename(a, b, ec);
    if (ec) {
        const std::string reason = ec.message();
        fs::rename(aside, b, ec);
        throw Error(fmt::format("cannot move {} into place as {}: {}", a.string(), b.string(), reason));
    }
}

}  // namespace

std::string recorded_run_id(const fs::path& dir) {
    for (const char* file : {"run.json", kManifestName}) {
        const std::string id = json_string_member(dir / file, "run_id");
        if (!id.empty()) return id;
    }
    return "";
}

RunDirectoryWriter::RunDirectoryWriter(fs::path dir, RunDirectoryOptions options)
    : dir_(fs::absolute(std::move(dir)).lexically_normal()) {
    if (dir_.filename().empty()) dir_ = dir_.parent_path();
    install_signal_cleanup();
    check_output_directory("", dir_);
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec) throw Error(fmt::format("{}: cannot create the output directory: {}", dir_.string(), ec.message()));
    const bool had_lock_record = fs::symlink_status(dir_ / kLockRecordName, ec).type() == fs::file_type::regular;
    lock_.emplace(dir_, options.holder.empty() ? "ember" : options.holder);
    remove_stale_temporaries(dir_);
    remove_stale_siblings(dir_);

    const std::vector<std::string> found = contents(dir_);
    if (found.empty()) {
        remove_subdirectories(dir_);
        return;
    }
    if (options.not_needed) {
        if (auto reason = options.not_needed(dir_)) throw RunNotNeeded(*reason);
    }
    if (options.resumable && options.resumable(dir_)) return;
    // An interrupted run's record and nothing else (Ctrl-C before any result): the run
    // was stopped by its user, it has nothing to lose, and the new run takes its place.
    if (found == std::vector<std::string>{"run.json"} && json_string_member(dir_ / "run.json", "outcome") == "interrupted") {
        fs::remove(dir_ / "run.json", ec);
        return;
    }
    replaced_run_id_ = recorded_run_id(dir_);
    if (!options.overwrite) {
        const std::string what = replaced_run_id_.empty()
                                     ? fmt::format("holds files of no recorded run ({})", first_and_count(found))
                                     : fmt::format("holds run {}", replaced_run_id_);
        throw Error(fmt::format("{}: the output directory {}; --overwrite (or [output] overwrite = true) replaces it, "
                                "or choose another output.dir",
                                dir_.string(), what));
    }
    // Replacing deletes the directory: never one holding what this run reads, never one
    // that is not an Ember run (a project directory, a home directory).
    for (const fs::path& input : options.inputs)
        if (is_within(input, dir_))
            throw Error(fmt::format("{}: the output directory holds {}, an input of this run; overwrite never replaces "
                                    "a directory with the run's inputs in it (choose another output.dir)",
                                    dir_.string(), input.string()));
    if (!holds_ember_run(dir_, had_lock_record))
        throw Error(fmt::format("{}: the output directory holds files of no Ember run ({}); overwrite replaces only a "
                                "directory with an Ember run in it (manifest.json or run.json): choose another "
                                "output.dir, or move those files away",
                                dir_.string(), first_and_count(found)));
    staging_ = sibling(dir_, kStagingTag, ::getpid());
    fs::remove_all(*staging_, ec);
    fs::create_directory(*staging_, ec);
    if (ec) throw Error(fmt::format("{}: cannot create the staging directory: {}", staging_->string(), ec.message()));
    staging_lock_.emplace(*staging_, options.holder.empty() ? "ember" : options.holder);
}

RunDirectoryWriter::~RunDirectoryWriter() {
    if (staging_ && !published_) {
        staging_lock_.reset();
        std::error_code ec;
        fs::remove_all(*staging_, ec);
    }
}

fs::path RunDirectoryWriter::place(const fs::path& path) const {
    if (!staging_) return path;
    const fs::path normal = fs::absolute(path).lexically_normal();
    const fs::path relative = normal.lexically_relative(dir_);
    if (relative.empty() || *relative.begin() == "..") return path;
    return *staging_ / relative;
}

FileRecord RunDirectoryWriter::write_bytes(const std::string& name, std::string_view header, const void* data,
                                           std::size_t bytes) {
    check_name(name);
    AtomicFile out(dir() / name);
    out.write(header);
    out.write(std::span(static_cast<const std::byte*>(data), bytes));
    out.commit();
    Sha256 sha;
    sha.update(header);
    sha.update(std::span(static_cast<const std::byte*>(data), bytes));
    FileRecord record{name, header.size() + bytes, sha.finish_hex()};
    files_.push_back(record);
    if (on_file_written) on_file_written(record);
    return record;
}

FileRecord RunDirectoryWriter::write_npy_f32(const std::string& name, const float* data,
                                             const std::vector<std::size_t>& shape) {
    return write_bytes(name, npy::header("<f4", shape), data, npy::element_count(shape) * sizeof(float));
}

FileRecord RunDirectoryWriter::write_npy_f64(const std::string& name, const double* data,
                                             const std::vector<std::size_t>& shape) {
    return write_bytes(name, npy::header("<f8", shape), data, npy::element_count(shape) * sizeof(double));
}

FileRecord RunDirectoryWriter::write_npy_i32(const std::string& name, const std::int32_t* data,
                                             const std::vector<std::size_t>& shape) {
    return write_bytes(name, npy::header("<i4", shape), data, npy::element_count(shape) * sizeof(std::int32_t));
}

FileRecord RunDirectoryWriter::write_npy_i64(const std::string& name, const std::int64_t* data,
                                             const std::vector<std::size_t>& shape) {
    return write_bytes(name, npy::header("<i8", shape), data, npy::element_count(shape) * sizeof(std::int64_t));
}

FileRecord RunDirectoryWriter::write_text(const std::string& name, std::string_view text) {
    return write_bytes(name, text, nullptr, 0);
}

void RunDirectoryWriter::add_file(FileRecord record) {
    check_name(record.name);
    files_.push_back(record);
    if (on_file_written) on_file_written(record);
}

std::map<std::string, FileRecord> RunDirectoryWriter::list_directory() const {
    std::map<std::string, FileRecord> written;
    for (const FileRecord& f : files_) written[f.name] = f;
    std::map<std::string, FileRecord> out;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir(), ec); it != fs::end(it); it.increment(ec)) {
        if (ec) break;
        const fs::path& path = it->path();
        const std::string name = path.lexically_relative(dir()).generic_string();
        if (it->is_symlink(ec) || (!it->is_regular_file(ec) && !it->is_directory(ec)))
            throw Error(fmt::format("{}: a run directory holds regular files only; this is not one", path.string()));
        if (it->is_directory(ec)) continue;
        const std::uint64_t size = it->file_size(ec);
        if (const auto w = written.find(name); w != written.end() && w->second.bytes == size) {
            out[name] = w->second;
        } else {
            out[name] = {name, size, sha256_file_hex(path)};
        }
    }
    if (ec) throw Error(fmt::format("{}: cannot list the output directory: {}", dir().string(), ec.message()));
    return out;
}

void RunDirectoryWriter::commit(json::object manifest) {
    const fs::path manifest_path = dir() / kManifestName;
    std::error_code ec;
    if (fs::exists(manifest_path, ec)) {
        const std::string kind = json_string_member(manifest_path, "kind");
        throw Error(fmt::format("{}: an experiment wrote a manifest.json (kind '{}') into the run's output directory; "
                                "the run's manifest will not overwrite it (give the experiment its own directory)",
                                manifest_path.string(), kind.empty() ? "unknown" : kind));
    }
    lock_->remove_record();
    if (staging_lock_) staging_lock_->remove_record();
    json::object files;
    for (const auto& [name, f] : list_directory()) files[name] = {{"bytes", f.bytes}, {"sha256", f.sha256}};
    manifest["files"] = std::move(files);
    write_file_atomically(manifest_path, seal_manifest(std::move(manifest)));
    publish();
}

void RunDirectoryWriter::publish() {
    if (!staging_ || published_) return;
    lock_->remove_record();
    staging_lock_->remove_record();
    move_user_files_aside();
    swap_into_place(*staging_, dir_, sibling(dir_, kReplacedTag, ::getpid()));
    std::error_code ec;
    fs::remove_all(sibling(dir_, kReplacedTag, ::getpid()), ec);
    published_ = true;
    staging_.reset();
}

void RunDirectoryWriter::move_user_files_aside() {
    user_files_ = files_not_from_run(dir_);
    if (user_files_.empty()) return;
    user_files_dir_ = user_files_sibling(dir_);
    std::error_code ec;
    for (const std::string& name : user_files_) {
        const fs::path to = user_files_dir_ / name;
        fs::create_directories(to.parent_path(), ec);
        if (!ec) fs::rename(dir_ / name, to, ec);
        if (ec)  // the old run stays in place, with the user's files
            throw Error(fmt::format("{}: cannot move '{}' (a file the earlier run did not write) aside into {}: {}; "
                                    "the earlier run is left in place",
                                    dir_.string(), name, user_files_dir_.string(), ec.message()));
    }
    fmt::print(stderr, "ember: {}: moved {} file{} the replaced run did not write into {}: {}\n", dir_.string(),
               user_files_.size(), user_files_.size() == 1 ? "" : "s", user_files_dir_.string(),
               fmt::join(user_files_, ", "));
}

std::vector<std::string> files_not_from_run(const fs::path& dir) {
    std::vector<std::string> found = contents(dir);
    std::set<std::string> listed;
    bool has_manifest = false;
    json::error_code ec;
    const json::value manifest = json::parse(read_file(dir / kManifestName), ec);
    if (!ec && manifest.is_object()) {
        if (const json::value* files = manifest.as_object().if_contains("files"); files && files->is_object()) {
            has_manifest = true;
            for (const auto& f : files->as_object()) listed.insert(std::string(f.key()));
            listed.insert(kManifestName);
        }
    }
    std::vector<std::string> out;
    long pid = 0;
    for (const std::string& name : found) {
        if (temporary_pid(fs::path(name).filename().native(), pid)) continue;
        if (has_manifest ? listed.contains(name) : ember_file_name(name)) continue;
        out.push_back(name);
    }
    return out;
}

std::string seal_manifest(json::object manifest) {
    manifest.erase(kSealKey);
    manifest[kSealKey] = seal::zeros();  // inserted last, so written last
    return seal::sealed(pretty_json(manifest) + "\n");
}

bool seal_matches(std::string_view text, std::string& why) {
    json::value value;
    try {
        value = parse_strict_json(text, kManifestName);  // a key twice: two readers could disagree
    } catch (const Error& e) {
        why = e.what();
        return false;
    }
    if (!value.is_object()) {
        why = "not a valid JSON object";
        return false;
    }
    const json::value* claimed = value.as_object().if_contains(kSealKey);
    if (claimed == nullptr || !claimed->is_string() || claimed->as_string().size() != 64) {
        why = "has no manifest_sha256 seal";
        return false;
    }
    const std::string digest(claimed->as_string());
    const std::string actual = seal::content_digest(text, digest);
    if (actual.empty()) {
        why = "manifest_sha256 is not written as the seal";
        return false;
    }
    if (actual != digest) {
        why = fmt::format("its bytes do not match its seal (manifest_sha256 {}, content hashes to {})", digest, actual);
        return false;
    }
    return true;
}

}  // namespace ember::record
