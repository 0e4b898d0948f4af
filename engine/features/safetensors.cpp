#include "features/safetensors.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "common/checked.hpp"
#include "common/error.hpp"
#include "features/json_keys.hpp"
#include "kernels/float16.hpp"

namespace ember::features {
namespace {

namespace json = boost::json;

struct DtypeRow {
    TensorDtype dtype;
    std::string_view name;  // as the header spells it
    std::uint64_t size;     // bytes per element
};
constexpr std::array kDtypes = {
    DtypeRow{TensorDtype::F32, "F32", 4},  DtypeRow{TensorDtype::F16, "F16", 2}, DtypeRow{TensorDtype::BF16, "BF16", 2},
    DtypeRow{TensorDtype::F64, "F64", 8},  DtypeRow{TensorDtype::I64, "I64", 8}, DtypeRow{TensorDtype::I32, "I32", 4},
    DtypeRow{TensorDtype::I16, "I16", 2},  DtypeRow{TensorDtype::I8, "I8", 1},   DtypeRow{TensorDtype::U8, "U8", 1},
    DtypeRow{TensorDtype::Bool, "BOOL", 1},
};

const DtypeRow& row_of(TensorDtype dtype) {
    return *std::find_if(kDtypes.begin(), kDtypes.end(), [&](const DtypeRow& r) { return r.dtype == dtype; });
}

// Errors name the file, and the tensor when there is one.
struct Where {
    const std::filesystem::path& path;
    [[noreturn]] void fail(const std::string& message) const {
        throw Error(fmt::format("{}: {}", path.string(), message));
    }
    [[noreturn]] void fail(std::string_view key, const std::string& message) const {
        throw Error(fmt::format("{}: tensor '{}': {}", path.string(), key, message));
    }
};

std::uint64_t read_u64_le(const std::byte* p) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(p[i]);
    return v;
}

std::uint64_t unsigned_field(const Where& where, std::string_view key, const json::value& v, std::string_view what) {
    if (v.is_uint64()) return v.get_uint64();
    if (v.is_int64() && v.get_int64() >= 0) return static_cast<std::uint64_t>(v.get_int64());
    where.fail(key, fmt::format("{} must be non-negative integers", what));
}

// One header entry, its range still relative to the data section.
struct Entry {
    SafetensorsTensor tensor;
    std::uint64_t begin = 0, end = 0;
};

Entry parse_entry(const Where& where, std::string_view key, const json::value& value) {
    if (!value.is_object()) where.fail(key, "the header entry is not an object");
    const json::object& o = value.get_object();
    for (const auto& field : o)
        if (field.key() != "dtype" && field.key() != "shape" && field.key() != "data_offsets")
            where.fail(key, fmt::format("unknown field '{}' (dtype, shape, data_offsets)", std::string(field.key())));
    const json::value* dtype = o.if_contains("dtype");
    const json::value* shape = o.if_contains("shape");
    const json::value* offsets = o.if_contains("data_offsets");
    if (!dtype || !dtype->is_string()) where.fail(key, "no dtype string");
    if (!shape || !shape->is_array()) where.fail(key, "no shape array");
    if (!offsets || !offsets->is_array() || offsets->get_array().size() != 2)
        where.fail(key, "data_offsets must be [begin, end]");

    Entry e;
    e.tensor.name = std::string(key);
    const std::string_view dtype_text = dtype->get_string();
    const auto row = std::find_if(kDtypes.begin(), kDtypes.end(), [&](const DtypeRow& r) { return r.name == dtype_text; });
    if (row == kDtypes.end()) where.fail(key, fmt::format("unknown dtype '{}'", dtype_text));
    e.tensor.dtype = row->dtype;
    if (shape->get_array().size() > 8) where.fail(key, "more than 8 dimensions");
    for (const json::value& d : shape->get_array()) e.tensor.shape.push_back(unsigned_field(where, key, d, "shape dimensions"));
    std::uint64_t elements = 1;
    for (std::uint64_t n : e.tensor.shape) {
        const auto product = checked_mul(elements, n);
        if (!product) where.fail(key, fmt::format("shape {} overflows", shape_text(e.tensor.shape)));
        elements = *product;
    }
    e.tensor.elements = elements;
    e.begin = unsigned_field(where, key, offsets->get_array()[0], "data_offsets");
    e.end = unsigned_field(where, key, offsets->get_array()[1], "data_offsets");
    if (e.end < e.begin) where.fail(key, fmt::format("data_offsets [{}, {}] end before they begin", e.begin, e.end));
    const auto bytes = checked_mul(elements, row->size);
    if (!bytes || *bytes != e.end - e.begin)
        where.fail(key, fmt::format("{} {} needs {} bytes, but data_offsets [{}, {}] hold {}", dtype_text,
                                    shape_text(e.tensor.shape), bytes ? fmt::to_string(*bytes) : "too many",
                                    e.begin, e.end, e.end - e.begin));
    return e;
}

void read_metadata(const Where& where, const json::value& value, std::map<std::string, std::string>& out) {
    if (!value.is_object()) where.fail("header: __metadata__ is not an object");
    for (const auto& field : value.get_object()) {
        if (!field.value().is_string())
            where.fail(fmt::format("header: __metadata__ '{}' is not a string", std::string(field.key())));
        out[std::string(field.key())] = std::string(field.value().get_string());
    }
}

// The ranges tile the data section exactly: sorted by begin, each starts where the last ended.
void check_tiling(const Where& where, std::vector<Entry>& entries, std::uint64_t data_size) {
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    std::uint64_t covered = 0;
    const Entry* previous = nullptr;
    for (const Entry& e : entries) {
        if (e.begin < covered)
            where.fail(e.tensor.name, fmt::format("data_offsets [{}, {}] overlap tensor '{}'", e.begin, e.end,
                                                  previous->tensor.name));
        if (e.begin > covered)
            where.fail(e.tensor.name, fmt::format("data_offsets begin at {}, leaving bytes [{}, {}) of the data unused",
                                                  e.begin, covered, e.begin));
        if (e.end > data_size)
            where.fail(e.tensor.name, fmt::format("data_offsets [{}, {}] run past the end of the data ({} bytes: the "
                                                  "file is truncated)",
                                                  e.begin, e.end, data_size));
        covered = e.end;
        previous = &e;
    }
    if (covered != data_size)
        where.fail(fmt::format("{} bytes after the last tensor's data", data_size - covered));
}

}  // namespace

std::string_view dtype_name(TensorDtype dtype) { return row_of(dtype).name; }

std::string shape_text(const std::vector<std::uint64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
    SafetensorsFile out{MappedFile(path)};
    const Where where{out.file_.path()};
    const std::span<const std::byte> bytes = out.file_.bytes();
    if (bytes.size() < 8) where.fail(fmt::format("{} bytes: too short for the header length", bytes.size()));
    const std::uint64_t header_size = read_u64_le(bytes.data());
    if (header_size > kMaxHeaderBytes)
        where.fail(fmt::format("header length {} is over the limit of {} bytes", header_size, kMaxHeaderBytes));
    if (header_size > bytes.size() - 8)
        where.fail(fmt::format("header length {} runs past the end of the file ({} bytes: truncated)", header_size,
                               bytes.size()));
    const std::string_view header(reinterpret_cast<const char*>(bytes.data() + 8), header_size);

    json::error_code ec;
    const json::value parsed = json::parse(header, ec);
    if (ec) where.fail(fmt::format("header: not JSON ({})", ec.message()));
    if (!parsed.is_object()) where.fail("header: not a JSON object");
    if (const auto key = first_duplicate_key(header)) where.fail(fmt::format("header: key '{}' appears twice", *key));

    std::vector<Entry> entries;
    for (const auto& field : parsed.get_object()) {
        if (field.key() == "__metadata__") {
            read_metadata(where, field.value(), out.metadata_);
            continue;
        }
        entries.push_back(parse_entry(where, field.key(), field.value()));
    }
    const std::uint64_t data_size = bytes.size() - 8 - header_size;
    check_tiling(where, entries, data_size);
    const std::byte* data = bytes.data() + 8 + header_size;
    for (Entry& e : entries) {
        e.tensor.bytes = std::span<const std::byte>(data + e.begin, e.end - e.begin);
        out.tensors_.push_back(std::move(e.tensor));
    }
    std::sort(out.tensors_.begin(), out.tensors_.end(),
              [](const SafetensorsTensor& a, const SafetensorsTensor& b) { return a.name < b.name; });
    return out;
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
    for (const SafetensorsTensor& t : tensors_)
        if (t.name == name) return &t;
    return nullptr;
}

const SafetensorsTensor& SafetensorsFile::require(std::string_view name, const std::vector<std::uint64_t>& shape) const {
    const Where where{path()};
    const SafetensorsTensor* t = find(name);
    if (!t) where.fail(name, "missing");
    if (t->shape != shape)
        where.fail(name, fmt::format("shape {}, expected {}", shape_text(t->shape), shape_text(shape)));
    return *t;
}

std::vector<float> SafetensorsFile::floats(const SafetensorsTensor& tensor) const {
    const Where where{path()};
    std::vector<float> out(tensor.elements);
    const std::byte* p = tensor.bytes.data();
    switch (tensor.dtype) {
        case TensorDtype::F32: std::memcpy(out.data(), p, out.size() * 4); break;
        case TensorDtype::F16:
        case TensorDtype::BF16:
            for (std::size_t i = 0; i < out.size(); ++i) {
                std::uint16_t h;
                std::memcpy(&h, p + 2 * i, 2);
                out[i] = tensor.dtype == TensorDtype::F16 ? kernels::fp16_to_fp32(h)
                                                          : kernels::bf16_to_fp32(h);
            }
            break;
        default:
            where.fail(tensor.name, fmt::format("dtype {}: Ember reads F32, F16 and BF16 weights", dtype_name(tensor.dtype)));
    }
    for (std::size_t i = 0; i < out.size(); ++i)
        if (!std::isfinite(out[i]))
            where.fail(tensor.name, fmt::format("element {} is {}", i, std::isnan(out[i]) ? "NaN" : "infinite"));
    return out;
}

}  // namespace ember::features
