#include "extract/shard_files.hpp"

#include <ember/npy.hpp>
#include <ember/sha256.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string_view>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "record/partial_file.hpp"

namespace ember::extract {
namespace {

namespace fs = std::filesystem;

std::size_t element_bytes(const std::string& descr, const fs::path& file) {
    if (descr == "<f4" || descr == "<i4") return 4;
    if (descr == "<f8" || descr == "<i8") return 8;
    throw Error(fmt::format("ember merge: {}: dtype '{}' is not one a dataset run writes", file.string(), descr));
}

// Appends `bytes` bytes of `file` from `offset` to `out`, hashing them.
void copy_bytes(const fs::path& file, std::uint64_t offset, std::uint64_t bytes, AtomicFile& out, Sha256& sha,
                std::vector<char>& buffer) {
    std::ifstream in(file, std::ios::binary);
    if (!in || !in.seekg(static_cast<std::streamoff>(offset))) throw Error(fmt::format("ember merge: {}: cannot read", file.string()));
    while (bytes > 0) {
        const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(bytes, buffer.size()));
        in.read(buffer.data(), static_cast<std::streamsize>(want));
        if (static_cast<std::size_t>(in.gcount()) != want)
            throw Error(fmt::format("ember merge: {}: shorter than its manifest says (changed while merging?)", file.string()));
        const std::string_view chunk(buffer.data(), want);
        out.write(chunk);
        sha.update(chunk);
        bytes -= want;
    }
}

}  // namespace

JoinedFile join_npy(const std::vector<fs::path>& shards, const std::string& name, const fs::path& dir,
                std::vector<char>& buffer) {
    std::vector<npy::Header> headers;
    JoinedFile j;
    for (const fs::path& dir_k : shards) {
        const fs::path file = dir_k / name;
        npy::Header h = npy::read_header(file);
        if (h.fortran_order || h.shape.empty() || h.shape.size() > 3)
            throw Error(fmt::format("ember merge: {}: not a C-order array of rows", file.string()));
        const npy::Header& first = headers.empty() ? h : headers.front();
        // Rows stack when everything after the row count agrees ([R], [R, C], [R, n_head, n_kv]).
        if (h.descr != first.descr || !std::equal(h.shape.begin() + 1, h.shape.end(), first.shape.begin() + 1, first.shape.end()))
            throw Error(fmt::format("ember merge: {}: dtype {} shape {} does not stack onto {}'s {} {}", file.string(),
                                    h.descr, npy::shape_text(h.shape), (shards.front() / name).string(),
                                    first.descr, npy::shape_text(first.shape)));
        j.rows += h.shape[0];
        headers.push_back(std::move(h));
    }
    const npy::Header& first = headers.front();
    const std::string head =
        record::NpyAppender::header(first.descr, j.rows, std::vector<std::size_t>(first.shape.begin() + 1, first.shape.end()));
    AtomicFile out(dir / name);
    Sha256 sha;
    out.write(head);
    sha.update(head);
    j.record = {name, head.size(), ""};
    for (std::size_t i = 0; i < shards.size(); ++i) {
        const fs::path file = shards[i] / name;
        const std::uint64_t bytes = headers[i].count() * element_bytes(headers[i].descr, file);
        copy_bytes(file, headers[i].data_offset, bytes, out, sha, buffer);
        j.record.bytes += bytes;
    }
    out.commit();
    j.record.sha256 = sha.finish_hex();
    return j;
}

JoinedFile join_indptr(const std::vector<fs::path>& shards, const std::string& name, const std::string& values,
                   const fs::path& dir) {
    std::vector<npy::Header> headers;
    JoinedFile j;
    for (const fs::path& dir_k : shards) {
        const fs::path file = dir_k / name;
        npy::Header h = npy::read_header(file);
        if (h.fortran_order || h.shape.size() != 1 || h.descr != "<i8" || h.shape[0] == 0)
            throw Error(fmt::format("ember merge: {}: not an int64 indptr [R + 1] (dtype {} shape {})", file.string(),
                                    h.descr, npy::shape_text(h.shape)));
        j.rows += h.shape[0] - (headers.empty() ? 0 : 1);
        headers.push_back(std::move(h));
    }
    const std::string head = record::NpyAppender::header("<i8", j.rows, {});
    AtomicFile out(dir / name);
    Sha256 sha;
    out.write(head);
    sha.update(head);
    j.record = {name, head.size(), ""};
    std::int64_t base = 0;
    for (std::size_t k = 0; k < shards.size(); ++k) {
        const fs::path file = shards[k] / name;
        std::vector<std::int64_t> v(headers[k].shape[0]);
        std::ifstream in(file, std::ios::binary);
        if (!in || !in.seekg(static_cast<std::streamoff>(headers[k].data_offset)) ||
            !in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(std::int64_t))))
            throw Error(fmt::format("ember merge: {}: shorter than its header says", file.string()));
        const std::uint64_t nnz = npy::read_header(shards[k] / values).count();
        if (v.front() != 0 || !std::is_sorted(v.begin(), v.end()) || static_cast<std::uint64_t>(v.back()) != nnz)
            throw Error(fmt::format("ember merge: {}: not a CSR indptr from 0 to the {} nonzeros of {}", file.string(), nnz,
                                    values));
        for (std::int64_t& e : v) e += base;
        base = v.back();
        const std::string_view chunk(reinterpret_cast<const char*>(v.data() + (k == 0 ? 0 : 1)),
                                     (v.size() - (k == 0 ? 0 : 1)) * sizeof(std::int64_t));
        out.write(chunk);
        sha.update(chunk);
        j.record.bytes += chunk.size();
    }
    out.commit();
    j.record.sha256 = sha.finish_hex();
    return j;
}

JoinedFile join_lines(const std::vector<fs::path>& shards, const std::string& name, const fs::path& dir,
                  std::vector<char>& buffer) {
    AtomicFile out(dir / name);
    Sha256 sha;
    JoinedFile j;
    j.record.name = name;
    for (const fs::path& dir_k : shards) {
        const fs::path file = dir_k / name;
        const std::uint64_t bytes = fs::file_size(file);
        copy_bytes(file, 0, bytes, out, sha, buffer);
        j.record.bytes += bytes;
    }
    out.commit();
    j.record.sha256 = sha.finish_hex();
    return j;
}

}  // namespace ember::extract
