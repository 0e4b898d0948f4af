// NumPy .npy files (format versions 1.0-3.0), header-only, for plugins and the engine
// alike (no dependency but the C++ standard library):
// - write_f32 / write_i32: little-endian float32 / int32, C order, any rank, written to a
//   temporary name in the same directory and renamed, so a reader never sees half a
//   file. NumPy reads them with np.load and nothing else.
// - read_header: the dtype, order, shape and data offset of a file (what `ember verify`
//   checks against a manifest).
// - read: little-endian float32 or float64, C order, any rank; the values as float.
// Errors throw std::runtime_error naming the file.
//
//   ember::npy::write_f32(dir / "after_layer.layer3.npy", values.data(), {positions, n_embd});
//   const ember::npy::Array a = ember::npy::read("vector.npy");  // a.shape, a.values
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

namespace ember::npy {

static_assert(std::endian::native == std::endian::little, "the .npy code writes little-endian data as it is in memory");

struct Array {
    std::vector<std::size_t> shape;
    std::vector<float> values;
};

inline std::size_t element_count(const std::vector<std::size_t>& shape) {
    std::size_t n = 1;
    for (std::size_t d : shape) n *= d;
    return n;
}

struct Header {
    std::string descr;  // as written, e.g. "<f4"
    bool fortran_order = false;
    std::vector<std::size_t> shape;
    std::size_t data_offset = 0;  // bytes before the first value
    std::size_t count() const { return element_count(shape); }
};

// "(3, 4)", "(3,)", "()" as NumPy writes shapes.
inline std::string shape_text(const std::vector<std::size_t>& shape) {
    std::string out = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i > 0) out += ", ";
        out += std::to_string(shape[i]);
    }
    if (shape.size() == 1) out += ",";
    return out + ")";
}

// The header bytes of an array of `descr` ("<f4", "<i4") and `shape`: version 1.0, or 2.0
// when the dictionary does not fit 1.0's 16-bit length; padded so the data starts at a
// multiple of 64 bytes.
inline std::string header(std::string_view descr, const std::vector<std::size_t>& shape) {
    std::string dict = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + shape_text(shape) + ", }";
    const bool v2 = dict.size() + 11 + 64 > 0xFFFF;
    const std::size_t prefix = v2 ? 12 : 10;  // magic (6) + version (2) + length (2 or 4)
    dict.append((64 - (prefix + dict.size() + 1) % 64) % 64, ' ');
    dict += '\n';
    std::string out("\x93NUMPY", 6);
    out += static_cast<char>(v2 ? 2 : 1);
    out += '\0';
    const std::size_t len = dict.size();
    for (std::size_t i = 0; i < (v2 ? 4u : 2u); ++i) out += static_cast<char>((len >> (8 * i)) & 0xFF);
    return out + dict;
}

// Writes header + data to `path` through a temporary file in the same directory and a
// rename. The temporary is removed on failure.
inline void write_file_atomically(const std::filesystem::path& path, std::string_view head, const void* data,
                                  std::size_t bytes) {
    const std::filesystem::path temp = path.string() + ".tmp." + std::to_string(::getpid());
    {
        std::ofstream out(temp, std::ios::binary | std::ios::trunc);
        if (!out) throw std::runtime_error("cannot create " + temp.string());
        out.write(head.data(), static_cast<std::streamsize>(head.size()));
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
        const std::string reason = ec.message();
        std::filesystem::remove(temp, ec);
        throw std::runtime_error("cannot rename " + temp.string() + " to " + path.string() + ": " + reason);
    }
}

inline void write_f32(const std::filesystem::path& path, const float* data, const std::vector<std::size_t>& shape) {
    write_file_atomically(path, header("<f4", shape), data, element_count(shape) * sizeof(float));
}

inline void write_i32(const std::filesystem::path& path, const std::int32_t* data, const std::vector<std::size_t>& shape) {
    write_file_atomically(path, header("<i4", shape), data, element_count(shape) * sizeof(std::int32_t));
}

namespace detail {

inline std::string quoted_name(const std::filesystem::path& path) {
    std::string file = "'";  // built in steps: GCC 12 warns falsely (-Wrestrict) on "'" + string
    file += path.string();
    file += '\'';
    return file;
}

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
    if (end < dict.size() && dict[end] == '(') {
        end = dict.find(')', end);
        if (end == std::string::npos) throw std::runtime_error(file + ": malformed .npy header");
        ++end;
    } else {
        while (end < dict.size() && dict[end] != ',' && dict[end] != '}') ++end;
    }
    return dict.substr(at, end - at);
}

// "(3, 4)", "(3,)", "()": non-negative integers, at most 2^40 values in all; anything
// else (a negative or non-numeric dimension) is refused naming the shape.
inline std::vector<std::size_t> parse_shape(const std::string& text, const std::string& file) {
    const auto refuse = [&](const std::string& why) {
        return std::runtime_error(file + ": .npy shape " + text + " " + why);
    };
    if (text.size() < 2 || text.front() != '(' || text.back() != ')') throw refuse("is not a tuple of dimensions");
    std::vector<std::size_t> shape;
    std::size_t count = 1;
    bool expect_value = true;
    for (std::size_t i = 1; i + 1 < text.size();) {
        const char c = text[i];
        if (c == ' ') {
            ++i;
        } else if (c == ',' && !expect_value) {
            expect_value = true;
            ++i;
        } else if (c == '-') {
            throw refuse("has a negative dimension");
        } else if (c >= '0' && c <= '9' && expect_value) {
            std::size_t v = 0;
            while (i + 1 < text.size() && text[i] >= '0' && text[i] <= '9') {
                if (v > (std::size_t{1} << 40)) throw refuse("is too large (more than 2^40 values)");
                v = v * 10 + static_cast<std::size_t>(text[i++] - '0');
            }
            shape.push_back(v);
            if (v != 0 && count > (std::size_t{1} << 40) / v) throw refuse("is too large (more than 2^40 values)");
            count *= v;
            expect_value = false;
        } else {
            throw refuse("is not a tuple of non-negative integers");
        }
    }
    return shape;
}

}  // namespace detail

// Reads the header from `in` (positioned at the file's start).
inline Header read_header(std::istream& in, const std::filesystem::path& path) {
    const std::string file = detail::quoted_name(path);
    char magic[8];
    if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) throw std::runtime_error(file + ": not a .npy file");
    const int major = static_cast<unsigned char>(magic[6]);
    std::size_t header_len = 0;
    std::size_t prefix = 0;
    if (major == 1) {
        unsigned char len[2];
        if (!in.read(reinterpret_cast<char*>(len), 2)) throw std::runtime_error(file + ": truncated .npy header");
        header_len = len[0] | (static_cast<std::size_t>(len[1]) << 8);
        prefix = 10;
    } else if (major == 2 || major == 3) {
        unsigned char len[4];
        if (!in.read(reinterpret_cast<char*>(len), 4)) throw std::runtime_error(file + ": truncated .npy header");
        header_len = len[0] | (static_cast<std::size_t>(len[1]) << 8) | (static_cast<std::size_t>(len[2]) << 16) |
                     (static_cast<std::size_t>(len[3]) << 24);
        prefix = 12;
    } else {
        throw std::runtime_error(file + ": unsupported .npy version " + std::to_string(major));
    }
    if (header_len > (1u << 20)) throw std::runtime_error(file + ": .npy header too long");
    std::string dict(header_len, '\0');
    if (!in.read(dict.data(), static_cast<std::streamsize>(header_len)))
        throw std::runtime_error(file + ": truncated .npy header");

    Header h;
    std::string descr = detail::dict_value(dict, "descr", file);
    if (descr.size() >= 2 && (descr.front() == '\'' || descr.front() == '"')) descr = descr.substr(1, descr.size() - 2);
    h.descr = descr;
    const std::string order = detail::dict_value(dict, "fortran_order", file);
    if (order != "False" && order != "True") throw std::runtime_error(file + ": malformed fortran_order in .npy header");
    h.fortran_order = order == "True";
    h.shape = detail::parse_shape(detail::dict_value(dict, "shape", file), file);
    h.data_offset = prefix + header_len;
    return h;
}

inline Header read_header(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(detail::quoted_name(path) + ": cannot open");
    return read_header(in, path);
}

inline Array read(const std::filesystem::path& path) {
    const std::string file = detail::quoted_name(path);
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(file + ": cannot open");
    const Header h = read_header(in, path);
    const bool f32 = h.descr == "<f4";
    const bool f64 = h.descr == "<f8";
    if (!f32 && !f64) throw std::runtime_error(file + ": dtype '" + h.descr + "' is not float32 or float64 (little-endian)");
    if (h.fortran_order) throw std::runtime_error(file + ": Fortran-order arrays are not supported (save with C order)");

    Array array;
    array.shape = h.shape;
    const std::size_t count = h.count();
    const std::size_t width = f32 ? 4 : 8;
    // Checked against the file before anything is allocated: a header may claim any shape.
    std::error_code size_error;
    const std::uintmax_t file_size = std::filesystem::file_size(path, size_error);
    if (!size_error && (file_size < h.data_offset || (file_size - h.data_offset) / width < count)) {
        throw std::runtime_error(file + ": holds fewer values than its shape " + shape_text(h.shape) + " says (" +
                                 std::to_string(count) + " values of " + std::to_string(width) + " bytes)");
    }
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

}  // namespace ember::npy
