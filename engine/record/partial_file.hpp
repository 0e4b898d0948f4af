// Files a dataset run appends to batch by batch and, after an interruption, goes on
// appending to in a new process (docs/extraction.md, "Resuming"). A file lives as
// NAME.partial until finish() renames it to NAME, so a reader never takes a half-written
// file for a finished one.
//
// PartialFile: raw bytes. NpyAppender: a .npy array [rows, ROW_SHAPE...] whose header
// reserves room for any row count and is rewritten with the true count by finish().
//
//   NpyAppender a(dir / "after_layer.layer3.npy", "<f4", {n_embd}, std::nullopt);  // fresh
//   a.append(rows.data(), n_rows);  a.flush();   ... a.finish();
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::record {

class PartialFile {
public:
    // Opens final_path + ".partial": empty when `resume_bytes` is none, else cut back to
    // that many bytes (what a finished batch had written). ember::Error naming the file
    // when it cannot be opened or is shorter than `resume_bytes`.
    PartialFile(std::filesystem::path final_path, std::optional<std::uint64_t> resume_bytes);
    ~PartialFile();
    PartialFile(const PartialFile&) = delete;
    PartialFile& operator=(const PartialFile&) = delete;

    void write(const void* data, std::size_t bytes);
    void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
    // Writes `bytes` at `offset` (inside what was written) and returns to the end.
    void overwrite(std::uint64_t offset, std::string_view bytes);
    // Hands the buffered bytes to the kernel: they survive the process being killed.
    void flush();
    // Flushes, syncs, closes and renames to final_path().
    void finish();

    std::uint64_t size() const { return size_; }
    const std::filesystem::path& final_path() const { return final_; }
    std::string name() const { return final_.filename().string(); }
    static std::filesystem::path partial_path(const std::filesystem::path& final_path);

private:
    std::filesystem::path final_;
    std::filesystem::path partial_;
    std::FILE* file_ = nullptr;
    std::uint64_t size_ = 0;
};

class NpyAppender {
public:
    // `descr` is "<f4", "<i4" or "<f8"; an array [rows, row_shape...]: 1-D [rows] when
    // row_shape is empty, [rows, cols] for {cols}, [rows, n_head, n_kv] for {n_head, n_kv}.
    NpyAppender(std::filesystem::path final_path, std::string descr, std::vector<std::size_t> row_shape,
                std::optional<std::uint64_t> resume_bytes);

    void append(const void* rows_data, std::size_t rows);
    void flush() { file_.flush(); }
    void finish();  // the header's row count made true, then renamed

    std::size_t rows() const { return rows_; }
    const std::vector<std::size_t>& row_shape() const { return row_shape_; }
    std::vector<std::size_t> shape() const;  // {rows(), row_shape()...}
    const std::string& descr() const { return descr_; }
    const PartialFile& file() const { return file_; }

    // The header of a [rows, row_shape...] array, always kHeaderBytes long.
    static std::string header(std::string_view descr, std::size_t rows, const std::vector<std::size_t>& row_shape);
    static constexpr std::size_t kHeaderBytes = 128;

private:
    std::size_t row_bytes() const;

    PartialFile file_;
    std::string descr_;
    std::vector<std::size_t> row_shape_;
    std::size_t rows_ = 0;
};

}  // namespace ember::record
