// NumPy .npy files (format versions 1.0-3.0), as the built-in experiments need them:
// - write_npy_f32: float32, C order, 1-D or 2-D, written to a temporary name and renamed,
//   so a reader never sees half a file. NumPy reads it with np.load and nothing else.
// - read_npy: little-endian float32 or float64, C order, any rank; values as float.
// Errors throw std::runtime_error naming the file.
#pragma once

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

namespace ember_plugins {

static_assert(std::endian::native == std::endian::little, "the .npy code writes little-endian data as it is in memory");

struct NpyArray {
    std::vector<std::size_t> shape;
    std::vector<float> values;
};

// Writes `bytes` to `path` through a temporary file in the same directory and a rename.
inline void write_file_atomically(const std::filesystem::path& path, std::string_view header, const void* data,
                                  std::size_t bytes) {
    const std::filesystem::path temp = path.string() + ".tmp." + std::to_string(::getpid());
    {
        std::ofstream out(temp, std::ios::binary | std::ios::trunc);
        if (!out) throw std::runtime_error("cannot create " + temp.string());
        out.write(header.data(), static_cast<std::streamsize>(header.size()));
        if (bytes) out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
        out.flush();
        if (!out) {
            out.close();
            std::filesystem::remove(temp);
            throw std::runtime_error("cannot write " + temp.string() + " (disk full?)");
        }
    }
    std::error_code ec;
    std::filesystem::rename(temp, path, ec);
    if (ec) {
        std::filesystem::remove(temp);
        throw std::runtime_error("cannot rename " + temp.string() + " to " + path.string() + ": " + ec.message());
    }
}

inline void write_npy_f32(const std::filesystem::path& path, const float* data, const std::vector<std::size_t>& shape) {
    std::string dims;
    std::size_t count = 1;
    for (std::size_t d : shape) {
        dims += std::to_string(d) + ", ";
        count *= d;
    }
    if (shape.size() > 1) dims.resize(dims.size() - 2);  // "(3, 4)"; a 1-D shape keeps "(3,)"
    else if (shape.size() == 1) dims.resize(dims.size() - 1);
    std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
    // Magic (6) + version (2) + length (2) + dict + padding + '\n' is a multiple of 64.
    std::size_t total = 10 + dict.size() + 1;
    dict.append((64 - total % 64) % 64, ' ');
    dict += '\n';
    std::string header("\x93NUMPY\x01\x00", 8);
    header += static_cast<char>(dict.size() & 0xFF);
    header += static_cast<char>((dict.size() >> 8) & 0xFF);
    header += dict;
    write_file_atomically(path, header, data, count * sizeof(float));
}

namespace npy_detail {

// The value of `key` in the header dict, as written (e.g. "'<f4'", "False", "(3, 4)").
inline std::string dict_value(const std::string& dict, const std::string& key, const std::string& file) {
    const std::string quoted = "'" + key + "'";
    auto at = dict.find(quoted);
    if (at == std::string::npos) throw std::runtime_error(file + ": .npy header has no " + quoted);
    at = dict.find(':', at + quoted.size());
    if (at == std::string::npos) throw std::runtime_error(file + ": malformed .npy header");
    ++at;
    while (at < dict.size() && dict[at] == ' ') ++at;
    std::size_t end = at;
    if (end < dict.size() && dict[end] == '(') end = dict.find(')', end) + 1;
    else while (end < dict.size() && dict[end] != ',' && dict[end] != '}') ++end;
    if (end == std::string::npos || end > dict.size()) throw std::runtime_error(file + ": malformed .npy header");
    return dict.substr(at, end - at);
}

}  // namespace npy_detail

inline NpyArray read_npy(const std::filesystem::path& path) {
    std::string file = "'";  // built in steps: GCC 12 warns falsely (-Wrestrict) on "'" + string
    file += path.string();
    file += '\'';
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(file + ": cannot open");
    char magic[8];
    if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
        throw std::runtime_error(file + ": not a .npy file");
    const int major = static_cast<unsigned char>(magic[6]);
    std::size_t header_len = 0;
    if (major == 1) {
        unsigned char len[2];
        if (!in.read(reinterpret_cast<char*>(len), 2)) throw std::runtime_error(file + ": truncated .npy header");
        header_len = len[0] | (static_cast<std::size_t>(len[1]) << 8);
    } else if (major == 2 || major == 3) {
        unsigned char len[4];
        if (!in.read(reinterpret_cast<char*>(len), 4)) throw std::runtime_error(file + ": truncated .npy header");
        header_len = len[0] | (static_cast<std::size_t>(len[1]) << 8) | (static_cast<std::size_t>(len[2]) << 16) |
                     (static_cast<std::size_t>(len[3]) << 24);
    } else {
        throw std::runtime_error(file + ": unsupported .npy version " + std::to_string(major));
    }
    if (header_len > (1u << 20)) throw std::runtime_error(file + ": .npy header too long");
    std::string dict(header_len, '\0');
    if (!in.read(dict.data(), static_cast<std::streamsize>(header_len)))
        throw std::runtime_error(file + ": truncated .npy header");

    const std::string descr = npy_detail::dict_value(dict, "descr", file);
    const bool f32 = descr == "'<f4'";
    const bool f64 = descr == "'<f8'";
    if (!f32 && !f64) throw std::runtime_error(file + ": dtype " + descr + " is not float32 or float64 (little-endian)");
    if (npy_detail::dict_value(dict, "fortran_order", file) != "False")
        throw std::runtime_error(file + ": Fortran-order arrays are not supported (save with C order)");

    NpyArray array;
    const std::string shape = npy_detail::dict_value(dict, "shape", file);
    std::size_t count = 1;
    for (std::size_t i = 1; i < shape.size();) {
        if (shape[i] >= '0' && shape[i] <= '9') {
            std::size_t v = 0;
            while (i < shape.size() && shape[i] >= '0' && shape[i] <= '9') v = v * 10 + static_cast<std::size_t>(shape[i++] - '0');
            array.shape.push_back(v);
            if (v != 0 && count > (std::size_t{1} << 40) / v) throw std::runtime_error(file + ": array too large");
            count *= v;
        } else {
            ++i;
        }
    }
    const std::size_t width = f32 ? 4 : 8;
    std::vector<char> raw(count * width);
    if (!in.read(raw.data(), static_cast<std::streamsize>(raw.size())))
        throw std::runtime_error(file + ": holds fewer values than its shape says");
    array.values.resize(count);
    for (std::size_t i = 0; i < count; ++i) {
        if (f32) {
            std::memcpy(&array.values[i], raw.data() + i * 4, 4);
        } else {
            double d;
            std::memcpy(&d, raw.data() + i * 8, 8);
            array.values[i] = static_cast<float>(d);
        }
    }
    return array;
}

}  // namespace ember_plugins
