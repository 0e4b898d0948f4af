// Writing a run directory (docs/formats.md, "Extraction run directory"). One run per
// directory:
//   - opening takes an exclusive lock on the directory (record/dir_lock.hpp): a second
//     writer fails at once with DirectoryInUse naming the holder;
//   - temporaries left by dead processes are removed (and staging directories beside it);
//   - the directory itself must be a real directory or nothing (never a symbolic link, a
//     file or a device: common/output_path.hpp);
//   - a directory that holds anything (an earlier run, other files) is refused with an
//     error naming the earlier run's id, unless `overwrite`: then the new run is written
//     into a staging directory beside it (.NAME.ember-staging.PID) and swapped in with
//     renames when it ends (commit, or publish for a failed run), so no file of the old
//     run survives next to the new one and at every moment one complete run is in place;
//   - `overwrite` replaces only a directory that holds an Ember run (manifest.json,
//     run.json with a run id, a dataset run's progress.json, or the lock record a killed
//     writer left) and none of the run's inputs; files in it that the old run did not
//     write (not in its manifest; without one, not of a name Ember writes) are moved
//     aside into NAME.user-files-TIMESTAMP beside it, and stderr names them.
// Every file goes to a temporary name and is renamed into place; manifest.json comes last
// and lists every file under the directory (experiment outputs included) with its size and
// SHA-256. The manifest is sealed: its last member, "manifest_sha256", is the SHA-256 of
// the manifest file's own bytes with those 64 hex digits replaced by '0' characters.
#pragma once

#include <boost/json/object.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "record/dir_lock.hpp"
#include "common/error.hpp"

namespace ember::record {

inline constexpr const char* kManifestName = "manifest.json";

struct FileRecord {
    std::string name;  // relative to the directory, '/'-separated
    std::uint64_t bytes = 0;
    std::string sha256;
};

// The directory holds a result that makes this run unnecessary (see RunDirectoryOptions).
class RunNotNeeded : public Error {
public:
    using Error::Error;
};

struct RunDirectoryOptions {
    bool overwrite = false;  // replace a directory that is not empty
    std::string holder;      // who writes, for the lock record ("run 2025...-1a2b3c4d")
    // Asked with the lock held when the directory is not empty: a reason the run is not
    // needed (a sweep finding a verified result with the same key), which throws
    // RunNotNeeded, or nullopt to go on.
    std::function<std::optional<std::string>(const std::filesystem::path& dir)> not_needed;
    // Asked with the lock held when the directory is not empty: true when it holds an
    // unfinished run this writer continues in place (a dataset extraction's resume point),
    // so it is neither refused nor replaced.
    std::function<bool(const std::filesystem::path& dir)> resumable;
    // The run's input files and directories (model, config, dataset, plugins, prompt file,
    // a merge's shards): a directory holding any of them is never replaced.
    std::vector<std::filesystem::path> inputs = {};
};

class RunDirectoryWriter {
public:
    // Creates and locks `dir`, as above. ember::Error (DirectoryInUse, RunNotNeeded) naming the path.
    explicit RunDirectoryWriter(std::filesystem::path dir, RunDirectoryOptions options = {});
    ~RunDirectoryWriter();  // an unpublished staging directory is removed (the old run stays)
    RunDirectoryWriter(const RunDirectoryWriter&) = delete;
    RunDirectoryWriter& operator=(const RunDirectoryWriter&) = delete;

    FileRecord write_npy_f32(const std::string& name, const float* data, const std::vector<std::size_t>& shape);
    FileRecord write_npy_i32(const std::string& name, const std::int32_t* data, const std::vector<std::size_t>& shape);
    FileRecord write_npy_i64(const std::string& name, const std::int64_t* data, const std::vector<std::size_t>& shape);
    FileRecord write_npy_f64(const std::string& name, const double* data, const std::vector<std::size_t>& shape);
    FileRecord write_text(const std::string& name, std::string_view text);
    // A file the caller wrote into dir() itself (streamed, ember merge), with its size and
    // SHA-256, so that commit() lists it without reading it again.
    void add_file(FileRecord record);

    // Writes manifest.json: `manifest` plus "files" (every file under the directory:
    // name -> {bytes, sha256}) and the seal; then publishes. Refuses to replace a
    // manifest.json someone else (an experiment) wrote into the directory.
    void commit(boost::json::object manifest);
    // When replacing: swaps the staging directory in (a failed run's true record
    // replaces the old run). Nothing otherwise. Done by commit().
    void publish();

    // Where files are written now: the staging directory while replacing, else output_dir().
    const std::filesystem::path& dir() const { return staging_ ? *staging_ : dir_; }
    const std::filesystem::path& output_dir() const { return dir_; }
    // `path` (which may lie inside output_dir()) as it is placed while writing.
    std::filesystem::path place(const std::filesystem::path& path) const;
    // The files written through this writer (the manifest lists every file found).
    const std::vector<FileRecord>& files() const { return files_; }
    // The run id of the run being replaced ("" when none or unknown).
    const std::string& replaced_run_id() const { return replaced_run_id_; }
    // Where publish() moved the files of the replaced directory that its run did not write
    // (empty when there were none), and their names.
    const std::filesystem::path& user_files_dir() const { return user_files_dir_; }
    const std::vector<std::string>& user_files() const { return user_files_; }

    // Called after each file is in place (progress; tests stop a run here).
    std::function<void(const FileRecord&)> on_file_written;

private:
    FileRecord write_bytes(const std::string& name, std::string_view header, const void* data, std::size_t bytes);
    std::map<std::string, FileRecord> list_directory() const;
    void move_user_files_aside();

    std::filesystem::path dir_;
    std::optional<std::filesystem::path> staging_;
    std::optional<DirectoryLock> lock_;
    std::optional<DirectoryLock> staging_lock_;
    std::vector<FileRecord> files_;
    std::string replaced_run_id_;
    std::filesystem::path user_files_dir_;
    std::vector<std::string> user_files_;
    bool published_ = false;
};

// The files under `dir` that an Ember run did not write: those its sealed manifest.json
// does not list, or without a manifest, those not of a name Ember writes (run.json,
// progress.json, trace.jsonl, samples/rows/targets.jsonl, *.npy, *.partial,
// logit_lens.layerN.pieces.json). '/'-separated, sorted.
std::vector<std::string> files_not_from_run(const std::filesystem::path& dir);

// The run id recorded in DIR/run.json or DIR/manifest.json ("" when neither says).
std::string recorded_run_id(const std::filesystem::path& dir);

// The manifest's text with its seal (pretty JSON, "manifest_sha256" last, a final newline).
std::string seal_manifest(boost::json::object manifest);
// Whether `text` (a manifest file's bytes) carries a seal that matches; `why` says what is
// wrong otherwise.
bool seal_matches(std::string_view text, std::string& why);

}  // namespace ember::record
