#include "gguf/gguf_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "common/checked.hpp"
#include "common/error.hpp"

namespace ember::gguf {

// Reads little-endian values from the untrusted bytes, failing with the offset.
class Cursor {
public:
    Cursor(std::span<const std::byte> bytes, const std::string& source) : bytes_(bytes), source_(source) {}

    std::uint64_t pos() const { return pos_; }
    std::uint64_t remaining() const { return bytes_.size() - pos_; }

    [[noreturn]] void fail(std::uint64_t at, std::string_view message) const {
        throw Error(fmt::format("{}: at byte {}: {}", source_, at, message));
    }

    void need(std::uint64_t n, std::string_view what) const {
        if (n > remaining()) {
            fail(pos_, fmt::format("file truncated: {} needs {} bytes, {} left", what, n, remaining()));
        }
    }

    template <class T>
    T read(std::string_view what) {
        need(sizeof(T), what);
        T value;
        std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return value;
    }

    std::string_view read_string(std::string_view what, std::uint64_t max_len) {
        return read_string([what] { return std::string(what); }, max_len);
    }

    // `describe()` names the string in an error; it runs only when there is one, so a
    // loop over a vocabulary of 262k strings formats nothing.
    template <class Describe>
        requires std::is_invocable_r_v<std::string, Describe>
    std::string_view read_string(Describe&& describe, std::uint64_t max_len) {
        const std::uint64_t at = pos_;
        if (remaining() < 8) need(8, describe());
        const auto len = read<std::uint64_t>("string length");
        if (len > max_len) fail(at, fmt::format("{} length {} exceeds the limit of {}", describe(), len, max_len));
        if (len > remaining()) need(len, describe());
        std::string_view s(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
        pos_ += len;
        return s;
    }

    void skip(std::uint64_t n, std::string_view what) {
        need(n, what);
        pos_ += n;
    }

private:
    std::span<const std::byte> bytes_;
    const std::string& source_;
    std::uint64_t pos_ = 0;
};

namespace {

constexpr std::uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr std::uint32_t kLastValueType = 12;

// Size of one scalar element of a metadata type; 0 for STRING and ARRAY.
std::uint64_t scalar_size(ValueType type) {
    switch (type) {
        case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
        case ValueType::UINT16: case ValueType::INT16: return 2;
        case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
        case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
        case ValueType::STRING: case ValueType::ARRAY: return 0;
    }
    return 0;
}

// Smallest number of bytes one element of this type occupies in the file.
std::uint64_t min_encoded_size(ValueType type) {
    if (type == ValueType::STRING) return 8;          // u64 length
    if (type == ValueType::ARRAY) return 4 + 8;       // element type + count
    return scalar_size(type);
}

ValueType read_value_type(Cursor& in, std::string_view what) {
    const std::uint64_t at = in.pos();
    const auto id = in.read<std::uint32_t>(what);
    if (id > kLastValueType) in.fail(at, fmt::format("{} has unknown value type id {}", what, id));
    return static_cast<ValueType>(id);
}

// Walks (and so validates) an array's elements; nested arrays are allowed up to a depth.
void skip_array_elements(Cursor& in, ValueType element_type, std::uint64_t count, std::uint32_t depth,
                         std::string_view key) {
    const std::uint64_t min_size = min_encoded_size(element_type);
    // Every element occupies at least min_size bytes: a count the file cannot hold is
    // refused before any loop runs over it.
    if (auto total = checked_mul(count, min_size); !total || *total > in.remaining()) {
        in.fail(in.pos(), fmt::format("array '{}' claims {} elements of type {}, more than the {} bytes left",
                                      key, count, value_type_name(element_type), in.remaining()));
    }
    if (element_type == ValueType::STRING) {
        for (std::uint64_t i = 0; i < count; ++i) {
            in.read_string([i, key] { return fmt::format("string {} of array '{}'", i, key); }, in.remaining());
        }
    } else if (element_type == ValueType::ARRAY) {
        if (depth + 1 >= Limits::max_array_depth) {
            in.fail(in.pos(), fmt::format("array '{}' nests deeper than {} levels", key, Limits::max_array_depth));
        }
        for (std::uint64_t i = 0; i < count; ++i) {
            const ValueType inner = read_value_type(in, fmt::format("element type of nested array in '{}'", key));
            const auto inner_count = in.read<std::uint64_t>("nested array count");
            skip_array_elements(in, inner, inner_count, depth + 1, key);
        }
    } else {
        in.skip(count * min_size, "array elements");
    }
}

// One metadata value after its key: the type id, then the scalar, string or array.
Value read_value(Cursor& in, std::string_view key) {
    Value v;
    v.type = read_value_type(in, fmt::format("value of '{}'", key));
    v.offset = in.pos();
    switch (v.type) {
        case ValueType::UINT8: v.uinteger = in.read<std::uint8_t>("UINT8"); v.integer = static_cast<std::int64_t>(v.uinteger); break;
        case ValueType::INT8: v.integer = in.read<std::int8_t>("INT8"); break;
        case ValueType::UINT16: v.uinteger = in.read<std::uint16_t>("UINT16"); v.integer = static_cast<std::int64_t>(v.uinteger); break;
        case ValueType::INT16: v.integer = in.read<std::int16_t>("INT16"); break;
        case ValueType::UINT32: v.uinteger = in.read<std::uint32_t>("UINT32"); v.integer = static_cast<std::int64_t>(v.uinteger); break;
        case ValueType::INT32: v.integer = in.read<std::int32_t>("INT32"); break;
        case ValueType::UINT64: v.uinteger = in.read<std::uint64_t>("UINT64"); v.integer = static_cast<std::int64_t>(v.uinteger); break;
        case ValueType::INT64: v.integer = in.read<std::int64_t>("INT64"); break;
        case ValueType::FLOAT32: v.real = in.read<float>("FLOAT32"); break;
        case ValueType::FLOAT64: v.real = in.read<double>("FLOAT64"); break;
        case ValueType::BOOL: {
            const auto b = in.read<std::uint8_t>("BOOL");
            if (b > 1) in.fail(v.offset, fmt::format("'{}' is a BOOL holding {}, not 0 or 1", key, b));
            v.boolean = b == 1;
            break;
        }
        case ValueType::STRING:
            v.string = in.read_string([key] { return fmt::format("string value of '{}'", key); }, in.remaining());
            break;
        case ValueType::ARRAY: {
            v.element_type = read_value_type(in, fmt::format("element type of array '{}'", key));
            v.count = in.read<std::uint64_t>("array count");
            v.elements_offset = in.pos();
            skip_array_elements(in, v.element_type, v.count, 0, key);
            break;
        }
    }
    return v;
}

// Tensor info `index`: name, dimensions, type (and so byte size) and data offset.
// `is_taken(name)` says whether an earlier tensor has the name.
template <class IsTaken>
TensorInfo read_tensor_info(Cursor& in, std::uint64_t index, std::uint64_t alignment, IsTaken&& is_taken) {
    TensorInfo t;
    t.info_offset = in.pos();
    t.name = in.read_string("tensor name", std::numeric_limits<std::uint64_t>::max());
    if (t.name.size() > Limits::max_tensor_name_bytes) {
        in.fail(t.info_offset, fmt::format("tensor {} has a name of {} bytes (the limit is {})", index,
                                           t.name.size(), Limits::max_tensor_name_bytes));
    }
    if (t.name.empty()) in.fail(t.info_offset, fmt::format("tensor {} has an empty name", index));
    if (is_taken(t.name)) in.fail(t.info_offset, fmt::format("duplicate tensor name '{}'", t.name));

    const std::uint64_t dims_at = in.pos();
    t.n_dims = in.read<std::uint32_t>("tensor dimension count");
    if (t.n_dims == 0 || t.n_dims > Limits::max_dims) {
        in.fail(dims_at, fmt::format("tensor '{}' has {} dimensions (1 to {} allowed)", t.name, t.n_dims, Limits::max_dims));
    }
    std::uint64_t n_elements = 1;
    for (std::uint32_t d = 0; d < t.n_dims; ++d) {
        const std::uint64_t ne_at = in.pos();
        const auto ne = in.read<std::int64_t>("tensor dimension");
        if (ne <= 0) in.fail(ne_at, fmt::format("tensor '{}' has dimension {} = {}", t.name, d, ne));
        t.ne[d] = static_cast<std::uint64_t>(ne);
        auto product = checked_mul(n_elements, t.ne[d]);
        if (!product || *product > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
            in.fail(ne_at, fmt::format("tensor '{}': the product of its dimensions overflows", t.name));
        }
        n_elements = *product;
    }
    t.n_elements = n_elements;

    const std::uint64_t type_at = in.pos();
    const auto type_id = in.read<std::uint32_t>("tensor type");
    const auto traits = type_traits(type_id);
    if (!traits) {
        in.fail(type_at, fmt::format("tensor '{}' has ggml type id {}: {}", t.name, type_id, invalid_type_reason(type_id)));
    }
    t.type = static_cast<GgmlType>(type_id);
    if (t.ne[0] % traits->block_size != 0) {
        in.fail(dims_at, fmt::format("tensor '{}' of type {}: row length {} is not a multiple of the block size {}",
                                     t.name, traits->name, t.ne[0], traits->block_size));
    }
    // nbytes = (ne0 / block) * type_size * ne1 * ne2 * ne3, every step checked.
    std::optional<std::uint64_t> nbytes = checked_mul(t.ne[0] / traits->block_size, traits->type_size);
    for (std::uint32_t d = 1; d < 4 && nbytes; ++d) nbytes = checked_mul(*nbytes, t.ne[d]);
    if (!nbytes) in.fail(dims_at, fmt::format("tensor '{}': its byte size overflows", t.name));
    t.nbytes = *nbytes;

    const std::uint64_t offset_at = in.pos();
    t.offset = in.read<std::uint64_t>("tensor data offset");
    if (t.offset % alignment != 0) {
        in.fail(offset_at, fmt::format("tensor '{}' data offset {} is not a multiple of the alignment {}",
                                       t.name, t.offset, alignment));
    }
    return t;
}

std::string shape_string(const TensorInfo& t) {
    std::string s = "[";
    for (std::uint32_t d = 0; d < t.n_dims; ++d) s += fmt::format("{}{}", d ? ", " : "", t.ne[d]);
    return s + "]";
}

}  // namespace

std::string_view value_type_name(ValueType type) {
    switch (type) {
        case ValueType::UINT8: return "UINT8";
        case ValueType::INT8: return "INT8";
        case ValueType::UINT16: return "UINT16";
        case ValueType::INT16: return "INT16";
        case ValueType::UINT32: return "UINT32";
        case ValueType::INT32: return "INT32";
        case ValueType::FLOAT32: return "FLOAT32";
        case ValueType::BOOL: return "BOOL";
        case ValueType::STRING: return "STRING";
        case ValueType::ARRAY: return "ARRAY";
        case ValueType::UINT64: return "UINT64";
        case ValueType::INT64: return "INT64";
        case ValueType::FLOAT64: return "FLOAT64";
    }
    return "INVALID";
}

bool is_integer(ValueType type) {
    switch (type) {
        case ValueType::UINT8: case ValueType::INT8: case ValueType::UINT16: case ValueType::INT16:
        case ValueType::UINT32: case ValueType::INT32: case ValueType::UINT64: case ValueType::INT64:
            return true;
        default:
            return false;
    }
}

File::File(File&&) noexcept = default;
File& File::operator=(File&&) noexcept = default;
File::~File() = default;

File File::open(const std::filesystem::path& path) {
    File f;
    f.source_ = path.string();
    f.mapping_ = std::make_unique<MappedFile>(path);
    f.bytes_ = f.mapping_->bytes();
    f.parse();
    return f;
}

File File::from_bytes(std::vector<std::byte> bytes, std::string source) {
    File f;
    f.source_ = std::move(source);
    f.owned_ = std::move(bytes);
    f.bytes_ = f.owned_;
    f.parse();
    return f;
}

// The file in the order it is laid out: header, metadata, tensor infos, data section.
void File::parse() {
    Cursor in(bytes_, source_);
    const Counts counts = read_header(in);
    read_metadata(in, counts.metadata);
    read_alignment(in);
    read_tensor_infos(in, counts.tensors);
    place_tensor_data(in);
}

// Magic, version and the two counts, each refused before anything is sized from it.
File::Counts File::read_header(Cursor& in) {
    const auto magic = in.read<std::uint32_t>("magic");
    if (magic != kMagic) {
        in.fail(0, "not a GGUF file (the magic bytes are not \"GGUF\")");
    }
    version_ = in.read<std::uint32_t>("version");
    if (version_ == 0x03000000 || version_ == 0x02000000) {
        in.fail(4, "big-endian GGUF files are not supported");
    }
    if (version_ == 1) in.fail(4, "GGUF version 1 is no longer supported (need 2 or 3)");
    if (version_ != 2 && version_ != 3) in.fail(4, fmt::format("unsupported GGUF version {} (need 2 or 3)", version_));

    const std::uint64_t tensors_at = in.pos();
    const auto n_tensors = in.read<std::int64_t>("tensor count");
    const std::uint64_t kv_at = in.pos();
    const auto n_kv = in.read<std::int64_t>("metadata count");
    if (n_tensors < 0) in.fail(tensors_at, fmt::format("negative tensor count {}", n_tensors));
    if (n_kv < 0) in.fail(kv_at, fmt::format("negative metadata count {}", n_kv));
    // A key/value record takes at least 8 + 4 + 1 bytes, a tensor info at least 8 + 4 + 4 + 8.
    if (static_cast<std::uint64_t>(n_tensors) > Limits::max_tensors ||
        static_cast<std::uint64_t>(n_tensors) > in.remaining() / 24) {
        in.fail(tensors_at, fmt::format("tensor count {} is impossible for a file of {} bytes", n_tensors, bytes_.size()));
    }
    if (static_cast<std::uint64_t>(n_kv) > Limits::max_metadata ||
        static_cast<std::uint64_t>(n_kv) > in.remaining() / 13) {
        in.fail(kv_at, fmt::format("metadata count {} is impossible for a file of {} bytes", n_kv, bytes_.size()));
    }
    return {static_cast<std::uint64_t>(n_tensors), static_cast<std::uint64_t>(n_kv)};
}

void File::read_metadata(Cursor& in, std::uint64_t count) {
    metadata_.reserve(static_cast<std::size_t>(count));
    for (std::uint64_t i = 0; i < count; ++i) {
        MetadataEntry entry;
        entry.offset = in.pos();
        entry.key = in.read_string("metadata key", Limits::max_key_bytes);
        if (entry.key.empty()) in.fail(entry.offset, fmt::format("metadata entry {} has an empty key", i));
        if (metadata_index_.count(entry.key)) {
            in.fail(entry.offset, fmt::format("duplicate metadata key '{}'", entry.key));
        }
        entry.value = read_value(in, entry.key);
        entry.end = in.pos();
        metadata_index_.emplace(entry.key, metadata_.size());
        metadata_.push_back(entry);
    }
}

// `general.alignment`, which the tensor offsets and the data section depend on.
void File::read_alignment(Cursor& in) {
    const MetadataEntry* a = find("general.alignment");
    if (!a) return;
    if (a->value.type != ValueType::UINT32) {
        in.fail(a->value.offset, fmt::format("'general.alignment' has type {}, expected UINT32",
                                             value_type_name(a->value.type)));
    }
    const std::uint64_t align = a->value.uinteger;
    if (!is_power_of_two(align)) {
        in.fail(a->value.offset, fmt::format("'general.alignment' is {}, not a non-zero power of two", align));
    }
    if (align > Limits::max_alignment) {
        in.fail(a->value.offset, fmt::format("'general.alignment' is {}, above the limit of {}", align, Limits::max_alignment));
    }
    alignment_ = align;
}

void File::read_tensor_infos(Cursor& in, std::uint64_t count) {
    tensors_.reserve(static_cast<std::size_t>(count));
    for (std::uint64_t i = 0; i < count; ++i) {
        const TensorInfo t = read_tensor_info(in, i, alignment_, [this](std::string_view name) {
            return tensor_index_.count(name) != 0;
        });
        tensor_index_.emplace(t.name, tensors_.size());
        tensors_.push_back(t);
    }
}

// The data section starts at the next aligned offset after the infos; every tensor's bytes
// must lie inside the file, and no two tensors' bytes may overlap.
void File::place_tensor_data(Cursor& in) {
    const std::uint64_t infos_end = in.pos();
    const auto data_start = checked_align_up(infos_end, alignment_);
    if (!data_start) in.fail(infos_end, "data section offset overflows");
    data_offset_ = *data_start;
    if (!tensors_.empty() && data_offset_ > bytes_.size()) {
        in.fail(infos_end, fmt::format("data section would start at byte {}, past the end of the {}-byte file",
                                       data_offset_, bytes_.size()));
    }
    for (TensorInfo& t : tensors_) {
        const auto start = checked_add(data_offset_, t.offset);
        const auto end = start ? checked_add(*start, t.nbytes) : std::nullopt;
        if (!end || *end > bytes_.size()) {
            in.fail(t.info_offset, fmt::format("tensor '{}' {} {} needs bytes [{}, {}) of data but the file has {} bytes",
                                               t.name, type_name(t.type), shape_string(t),
                                               start ? *start : t.offset, end ? fmt::format("{}", *end) : std::string("overflow"),
                                               bytes_.size()));
        }
        t.file_offset = *start;
    }
    // Tensors may come in any order.
    std::vector<const TensorInfo*> by_offset;
    by_offset.reserve(tensors_.size());
    for (const TensorInfo& t : tensors_) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->file_offset < b->file_offset; });
    for (std::size_t i = 1; i < by_offset.size(); ++i) {
        const TensorInfo& prev = *by_offset[i - 1];
        const TensorInfo& cur = *by_offset[i];
        if (prev.file_offset + prev.nbytes > cur.file_offset) {
            in.fail(cur.info_offset, fmt::format("tensor '{}' data [{}, +{}) overlaps tensor '{}' data [{}, +{})",
                                                 cur.name, cur.file_offset, cur.nbytes, prev.name, prev.file_offset, prev.nbytes));
        }
    }
}

const MetadataEntry* File::find(std::string_view key) const {
    const auto it = metadata_index_.find(key);
    return it == metadata_index_.end() ? nullptr : &metadata_[it->second];
}

const TensorInfo* File::find_tensor(std::string_view name) const {
    const auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const std::byte> File::tensor_data(const TensorInfo& tensor) const {
    return bytes_.subspan(tensor.file_offset, tensor.nbytes);
}

std::string File::describe_error(std::uint64_t offset, std::string_view message) const {
    return fmt::format("{}: at byte {}: {}", source_, offset, message);
}

void File::fail_type(const MetadataEntry& entry, std::string_view expected) const {
    std::string actual(value_type_name(entry.value.type));
    if (entry.value.type == ValueType::ARRAY) actual = fmt::format("ARRAY of {}", value_type_name(entry.value.element_type));
    throw Error(describe_error(entry.value.offset,
                               fmt::format("metadata key '{}' has type {}, expected {}", entry.key, actual, expected)));
}

std::optional<std::string_view> File::get_string(std::string_view key) const {
    const MetadataEntry* e = find(key);
    if (!e) return std::nullopt;
    if (e->value.type != ValueType::STRING) fail_type(*e, "STRING");
    return e->value.string;
}

std::optional<std::uint64_t> File::get_uint(std::string_view key) const {
    const MetadataEntry* e = find(key);
    if (!e) return std::nullopt;
    if (!is_integer(e->value.type)) fail_type(*e, "an unsigned integer");
    const bool is_unsigned = e->value.type == ValueType::UINT8 || e->value.type == ValueType::UINT16 ||
                             e->value.type == ValueType::UINT32 || e->value.type == ValueType::UINT64;
    if (is_unsigned) return e->value.uinteger;
    if (e->value.integer < 0) {
        throw Error(describe_error(e->value.offset, fmt::format("metadata key '{}' is {}, expected a non-negative integer",
                                                                key, e->value.integer)));
    }
    return static_cast<std::uint64_t>(e->value.integer);
}

std::optional<std::uint32_t> File::get_u32(std::string_view key) const {
    const auto v = get_uint(key);
    if (!v) return std::nullopt;
    if (*v > std::numeric_limits<std::uint32_t>::max()) {
        throw Error(describe_error(find(key)->value.offset,
                                   fmt::format("metadata key '{}' is {}, too large for a 32-bit count", key, *v)));
    }
    return static_cast<std::uint32_t>(*v);
}

std::optional<float> File::get_f32(std::string_view key) const {
    const MetadataEntry* e = find(key);
    if (!e) return std::nullopt;
    if (e->value.type != ValueType::FLOAT32 && e->value.type != ValueType::FLOAT64) fail_type(*e, "FLOAT32");
    return static_cast<float>(e->value.real);
}

std::optional<bool> File::get_bool(std::string_view key) const {
    const MetadataEntry* e = find(key);
    if (!e) return std::nullopt;
    if (e->value.type != ValueType::BOOL) fail_type(*e, "BOOL");
    return e->value.boolean;
}

std::optional<std::vector<std::string_view>> File::get_string_array(std::string_view key) const {
    const MetadataEntry* e = find(key);
    if (!e) return std::nullopt;
    if (e->value.type != ValueType::ARRAY || e->value.element_type != ValueType::STRING) fail_type(*e, "ARRAY of STRING");
    // The parser already walked these strings, so every length is known to be in bounds.
    std::vector<std::string_view> out;
    out.reserve(e->value.count);
    const auto* p = reinterpret_cast<const char*>(bytes_.data()) + e->value.elements_offset;
    for (std::uint64_t i = 0; i < e->value.count; ++i) {
        std::uint64_t len;
        std::memcpy(&len, p, 8);
        out.emplace_back(p + 8, len);
        p += 8 + len;
    }
    return out;
}

std::optional<std::vector<float>> File::get_f32_array(std::string_view key) const {
    const MetadataEntry* e = find(key);
    if (!e) return std::nullopt;
    if (e->value.type != ValueType::ARRAY ||
        (e->value.element_type != ValueType::FLOAT32 && e->value.element_type != ValueType::FLOAT64)) {
        fail_type(*e, "ARRAY of FLOAT32");
    }
    std::vector<float> out(e->value.count);
    const std::byte* p = bytes_.data() + e->value.elements_offset;
    for (std::uint64_t i = 0; i < e->value.count; ++i) {
        if (e->value.element_type == ValueType::FLOAT32) {
            std::memcpy(&out[i], p + 4 * i, 4);
        } else {
            double d;
            std::memcpy(&d, p + 8 * i, 8);
            out[i] = static_cast<float>(d);
        }
    }
    return out;
}

std::vector<std::int64_t> File::read_int_elements(const MetadataEntry& entry, bool allow_bool) const {
    const ValueType et = entry.value.element_type;
    if (entry.value.type != ValueType::ARRAY || !(is_integer(et) || (allow_bool && et == ValueType::BOOL))) {
        fail_type(entry, allow_bool ? "ARRAY of integers or BOOL" : "ARRAY of integers");
    }
    const std::uint64_t size = scalar_size(et);
    std::vector<std::int64_t> out(entry.value.count);
    const std::byte* p = bytes_.data() + entry.value.elements_offset;
    for (std::uint64_t i = 0; i < entry.value.count; ++i, p += size) {
        switch (et) {
            case ValueType::BOOL:
            case ValueType::UINT8: { std::uint8_t v; std::memcpy(&v, p, 1); out[i] = v; break; }
            case ValueType::INT8: { std::int8_t v; std::memcpy(&v, p, 1); out[i] = v; break; }
            case ValueType::UINT16: { std::uint16_t v; std::memcpy(&v, p, 2); out[i] = v; break; }
            case ValueType::INT16: { std::int16_t v; std::memcpy(&v, p, 2); out[i] = v; break; }
            case ValueType::UINT32: { std::uint32_t v; std::memcpy(&v, p, 4); out[i] = v; break; }
            case ValueType::INT32: { std::int32_t v; std::memcpy(&v, p, 4); out[i] = v; break; }
            case ValueType::UINT64: {
                std::uint64_t v;
                std::memcpy(&v, p, 8);
                if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
                    throw Error(describe_error(entry.value.elements_offset + i * 8,
                                               fmt::format("element {} of '{}' is too large", i, entry.key)));
                }
                out[i] = static_cast<std::int64_t>(v);
                break;
            }
            case ValueType::INT64: { std::int64_t v; std::memcpy(&v, p, 8); out[i] = v; break; }
            default: break;
        }
    }
    return out;
}

std::optional<std::vector<std::int64_t>> File::get_int_array(std::string_view key) const {
    const MetadataEntry* e = find(key);
    if (!e) return std::nullopt;
    return read_int_elements(*e, false);
}

std::optional<std::vector<std::int64_t>> File::get_per_layer(std::string_view key, std::size_t n) const {
    const MetadataEntry* e = find(key);
    if (!e) return std::nullopt;
    if (e->value.type == ValueType::ARRAY) {
        if (e->value.count != n) {
            throw Error(describe_error(e->value.offset, fmt::format("metadata key '{}' has {} entries, expected one per layer ({})",
                                                                    key, e->value.count, n)));
        }
        return read_int_elements(*e, true);
    }
    if (e->value.type == ValueType::BOOL) return std::vector<std::int64_t>(n, e->value.boolean ? 1 : 0);
    if (!is_integer(e->value.type)) fail_type(*e, "an integer or an ARRAY of integers");
    return std::vector<std::int64_t>(n, e->value.integer);
}

}  // namespace ember::gguf
