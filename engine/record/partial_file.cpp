#include "record/partial_file.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "common/error.hpp"
#include "common/output_path.hpp"

namespace ember::record {
namespace fs = std::filesystem;

fs::path PartialFile::partial_path(const fs::path& final_path) {
    fs::path p = final_path;
    p += ".partial";
    return p;
}

PartialFile::PartialFile(fs::path final_path, std::optional<std::uint64_t> resume_bytes)
    : final_(std::move(final_path)), partial_(partial_path(final_)) {
    // Both names hold only files this run (or the run it resumes) made: never a link or a FIFO.
    check_output_file("", partial_);
    check_output_file("", final_);
    if (resume_bytes) {
        std::error_code ec;
        // A run killed while it renamed its files into place (finish) left some of them
        // under their final names, its progress still on record: take them back.
        if (!fs::exists(partial_, ec) && fs::exists(final_, ec)) fs::rename(final_, partial_, ec);
        const std::uintmax_t have = fs::file_size(partial_, ec);
        if (ec || have < *resume_bytes)
            throw Error(fmt::format("{}: cannot resume: the file is missing or shorter than its last finished batch "
                                    "({} bytes); remove the directory to start over",
                                    partial_.string(), *resume_bytes));
        fs::resize_file(partial_, *resume_bytes, ec);
        if (ec) throw Error(fmt::format("{}: cannot cut back to {} bytes: {}", partial_.string(), *resume_bytes, ec.message()));
        file_ = std::fopen(partial_.c_str(), "r+b");
        size_ = *resume_bytes;
        if (file_ && std::fseek(file_, 0, SEEK_END) != 0) throw Error(fmt::format("{}: cannot seek", partial_.string()));
    } else {
        file_ = std::fopen(partial_.c_str(), "w+b");
    }
    if (!file_) throw Error(fmt::format("{}: cannot open for writing: {}", partial_.string(), std::strerror(errno)));
}

PartialFile::~PartialFile() {
    if (file_) std::fclose(file_);  // left in place: a later run resumes from it
}

void PartialFile::write(const void* data, std::size_t bytes) {
    if (bytes > 0 && std::fwrite(data, 1, bytes, file_) != bytes)
        throw Error(fmt::format("{}: write failed: {}", partial_.string(), std::strerror(errno)));
    size_ += bytes;
}

void PartialFile::overwrite(std::uint64_t offset, std::string_view bytes) {
    if (std::fseek(file_, static_cast<long>(offset), SEEK_SET) != 0 ||
        std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size() || std::fseek(file_, 0, SEEK_END) != 0)
        throw Error(fmt::format("{}: cannot rewrite bytes at {}", partial_.string(), offset));
}

void PartialFile::flush() {
    if (std::fflush(file_) != 0) throw Error(fmt::format("{}: write failed: {}", partial_.string(), std::strerror(errno)));
}

void PartialFile::finish() {
    flush();
    if (::fsync(fileno(file_)) != 0) throw Error(fmt::format("{}: fsync failed: {}", partial_.string(), std::strerror(errno)));
    std::fclose(file_);
    file_ = nullptr;
    check_output_file("", final_);
    std::error_code ec;
    fs::rename(partial_, final_, ec);
    if (ec) throw Error(fmt::format("{}: cannot rename into place: {}", final_.string(), ec.message()));
}

std::string NpyAppender::header(std::string_view descr, std::size_t rows, const std::vector<std::size_t>& row_shape) {
    // Python's tuple text: "(R,)", "(R, C)", "(R, H, C)".
    std::string shape = fmt::format("({}", rows);
    for (std::size_t d : row_shape) shape += fmt::format(", {}", d);
    shape += row_shape.empty() ? ",)" : ")";
    std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape);
    constexpr std::size_t prefix = 10;  // magic (6), version (2), header length (2)
    if (prefix + dict.size() + 1 > kHeaderBytes) throw Error("npy header too long");
    dict.resize(kHeaderBytes - prefix - 1, ' ');
    dict += '\n';
    std::string out("\x93NUMPY\x01\x00", 8);
    out += static_cast<char>(dict.size() & 0xff);
    out += static_cast<char>(dict.size() >> 8);
    return out + dict;
}

NpyAppender::NpyAppender(fs::path final_path, std::string descr, std::vector<std::size_t> row_shape,
                         std::optional<std::uint64_t> resume_bytes)
    : file_(std::move(final_path), resume_bytes), descr_(std::move(descr)), row_shape_(std::move(row_shape)) {
    if (!resume_bytes) {
        file_.write(header(descr_, 0, row_shape_));
        return;
    }
    if (file_.size() < kHeaderBytes || (file_.size() - kHeaderBytes) % row_bytes() != 0)
        throw Error(fmt::format("{}: cannot resume: {} bytes is not a header and whole rows", file_.name(), file_.size()));
    rows_ = (file_.size() - kHeaderBytes) / row_bytes();
}

std::size_t NpyAppender::row_bytes() const {
    const std::size_t element = descr_ == "<f8" || descr_ == "<i8" ? 8 : 4;
    std::size_t elements = 1;
    for (std::size_t d : row_shape_) elements *= d;
    return element * elements;
}

std::vector<std::size_t> NpyAppender::shape() const {
    std::vector<std::size_t> out{rows_};
    out.insert(out.end(), row_shape_.begin(), row_shape_.end());
    return out;
}

void NpyAppender::append(const void* rows_data, std::size_t rows) {
    file_.write(rows_data, rows * row_bytes());
    rows_ += rows;
}

void NpyAppender::finish() {
    file_.overwrite(0, header(descr_, rows_, row_shape_));
    file_.finish();
}

}  // namespace ember::record
