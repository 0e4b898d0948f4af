#include "features/npz.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <sstream>

#include <ember/npy.hpp>

#include "common/checked.hpp"
#include "common/error.hpp"

namespace ember::features {
namespace {

constexpr std::uint32_t kEndOfDirectory = 0x06054b50;
constexpr std::uint32_t kZip64Locator = 0x07064b50;
constexpr std::uint32_t kZip64End = 0x06064b50;
constexpr std::uint32_t kDirectoryEntry = 0x02014b50;
constexpr std::uint32_t kLocalHeader = 0x04034b50;
constexpr std::uint32_t kMaxMembers = 4096;

// Little-endian reads, bounds-checked against the mapping.
struct Reader {
    std::span<const std::byte> bytes;
    const std::filesystem::path& path;

    [[noreturn]] void fail(const std::string& message) const {
        throw Error(fmt::format("{}: {}", path.string(), message));
    }
    std::uint64_t le(std::uint64_t at, int width) const {
        const auto end = checked_add(at, static_cast<std::uint64_t>(width));
        if (!end || *end > bytes.size()) fail(fmt::format("at byte {}: the archive is truncated", at));
        std::uint64_t v = 0;
        for (int i = width - 1; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(bytes[at + i]);
        return v;
    }
    std::uint16_t u16(std::uint64_t at) const { return static_cast<std::uint16_t>(le(at, 2)); }
    std::uint32_t u32(std::uint64_t at) const { return static_cast<std::uint32_t>(le(at, 4)); }
    std::uint64_t u64(std::uint64_t at) const { return le(at, 8); }
};

// Where the central directory starts and how many entries it has (zip64 when the
// classic record says so).
std::pair<std::uint64_t, std::uint64_t> find_directory(const Reader& r) {
    const std::uint64_t size = r.bytes.size();
    if (size < 22) r.fail("not a zip archive (too short for its end record)");
    // The end record is the last 22 bytes plus a comment of at most 64 KiB.
    std::uint64_t end = size - 22;
    const std::uint64_t lowest = size > 22 + 65535 ? size - 22 - 65535 : 0;
    while (r.u32(end) != kEndOfDirectory) {
        if (end == lowest) r.fail("not a zip archive (no end-of-directory record)");
        --end;
    }
    std::uint64_t entries = r.u16(end + 10);
    std::uint64_t offset = r.u32(end + 16);
    if ((entries == 0xFFFF || offset == 0xFFFFFFFF) && end >= 20 && r.u32(end - 20) == kZip64Locator) {
        const std::uint64_t zip64_end = r.u64(end - 20 + 8);
        if (r.u32(zip64_end) != kZip64End) r.fail("the zip64 locator does not point at a zip64 end record");
        entries = r.u64(zip64_end + 32);
        offset = r.u64(zip64_end + 48);
    }
    if (entries > kMaxMembers) r.fail(fmt::format("{} members: more than {}", entries, kMaxMembers));
    return {offset, entries};
}

// The zip64 extra field's values replace the 0xFFFFFFFF ones, in order.
void apply_zip64(const Reader& r, std::uint64_t extra, std::uint64_t extra_end, std::uint64_t& uncompressed,
                 std::uint64_t& compressed, std::uint64_t& local) {
    while (extra + 4 <= extra_end) {
        const std::uint16_t id = r.u16(extra), length = r.u16(extra + 2);
        std::uint64_t at = extra + 4;
        if (id == 1) {
            for (std::uint64_t* field : {&uncompressed, &compressed, &local}) {
                if (*field != 0xFFFFFFFF) continue;
                if (at + 8 > extra + 4 + length) r.fail("a zip64 extra field is shorter than its sizes");
                *field = r.u64(at);
                at += 8;
            }
        }
        extra += 4 + length;
    }
}

NpzArray read_member(const Reader& r, const std::string& name, std::uint64_t data, std::uint64_t size) {
    const auto where = [&](const std::string& message) { r.fail(fmt::format("member '{}': {}", name, message)); };
    const auto end = checked_add(data, size);
    if (!end || *end > r.bytes.size()) where("its data runs past the end of the file (truncated)");
    // The .npy header is parsed by the SDK's reader from a copy of its first bytes.
    const std::size_t head = static_cast<std::size_t>(std::min<std::uint64_t>(size, (1u << 20) + 12));
    std::istringstream in(std::string(reinterpret_cast<const char*>(r.bytes.data() + data), head));
    npy::Header h;
    try {
        h = npy::read_header(in, r.path / name);
    } catch (const std::exception& e) {
        where(e.what());
    }
    if (h.descr != "<f4" && h.descr != "<f8") where(fmt::format("dtype '{}' (Ember reads <f4 and <f8)", h.descr));
    if (h.fortran_order) where("Fortran order (Ember reads C order)");
    std::uint64_t count = 1;
    for (std::size_t d : h.shape) {
        const auto product = checked_mul(count, d);
        if (!product) where("its shape overflows");
        count = *product;
    }
    const std::uint64_t width = h.descr == "<f4" ? 4 : 8;
    if (h.data_offset > size || (size - h.data_offset) / width != count || (size - h.data_offset) % width != 0)
        where(fmt::format("shape {} needs {} bytes of data, the member holds {}", npy::shape_text(h.shape), count * width,
                          size > h.data_offset ? size - h.data_offset : 0));
    NpzArray a;
    a.name = name.size() > 4 && name.ends_with(".npy") ? name.substr(0, name.size() - 4) : name;
    a.shape = h.shape;
    a.descr = h.descr;
    a.data = r.bytes.subspan(data + h.data_offset, size - h.data_offset);
    return a;
}

}  // namespace

NpzFile NpzFile::open(const std::filesystem::path& path) {
    NpzFile out{MappedFile(path)};
    const Reader r{out.file_.bytes(), out.file_.path()};
    auto [at, entries] = find_directory(r);
    for (std::uint64_t i = 0; i < entries; ++i) {
        if (r.u32(at) != kDirectoryEntry) r.fail(fmt::format("at byte {}: not a central directory entry", at));
        const std::uint16_t flags = r.u16(at + 8), method = r.u16(at + 10);
        std::uint64_t compressed = r.u32(at + 20), uncompressed = r.u32(at + 24);
        const std::uint16_t name_length = r.u16(at + 28), extra_length = r.u16(at + 30), comment = r.u16(at + 32);
        std::uint64_t local = r.u32(at + 42);
        r.le(at + 46, name_length);  // in bounds
        const std::string name(reinterpret_cast<const char*>(r.bytes.data() + at + 46), name_length);
        apply_zip64(r, at + 46 + name_length, at + 46 + name_length + extra_length, uncompressed, compressed, local);
        if (method != 0)
            r.fail(fmt::format("member '{}': compressed (method {}; np.savez_compressed): Ember reads np.savez's stored "
                               "members only; save with np.savez",
                               name, method));
        if ((flags & 1) != 0) r.fail(fmt::format("member '{}': encrypted", name));
        if (compressed != uncompressed) r.fail(fmt::format("member '{}': stored with two different sizes", name));
        if (r.u32(local) != kLocalHeader) r.fail(fmt::format("member '{}': its local header is missing", name));
        const std::uint64_t data = local + 30 + r.u16(local + 26) + r.u16(local + 28);
        for (const NpzArray& a : out.arrays_)
            if (a.name + ".npy" == name || a.name == name) r.fail(fmt::format("member '{}' appears twice", name));
        out.arrays_.push_back(read_member(r, name, data, uncompressed));
        at += 46 + name_length + extra_length + comment;
    }
    return out;
}

const NpzArray* NpzFile::find(std::string_view name) const {
    for (const NpzArray& a : arrays_)
        if (a.name == name) return &a;
    return nullptr;
}

std::vector<float> NpzFile::floats(std::string_view name, const std::vector<std::size_t>& shape) const {
    const NpzArray* a = find(name);
    if (!a) throw Error(fmt::format("{}: member '{}.npy' is missing", path().string(), name));
    if (a->shape != shape)
        throw Error(fmt::format("{}: member '{}': shape {}, expected {}", path().string(), name, npy::shape_text(a->shape),
                                npy::shape_text(shape)));
    std::vector<float> out(npy::element_count(shape));
    for (std::size_t i = 0; i < out.size(); ++i) {
        if (a->descr == "<f4") {
            std::memcpy(&out[i], a->data.data() + 4 * i, 4);
        } else {
            double d;
            std::memcpy(&d, a->data.data() + 8 * i, 8);
            out[i] = static_cast<float>(d);
        }
        if (!std::isfinite(out[i]))
            throw Error(fmt::format("{}: member '{}': element {} is {}", path().string(), name, i,
                                    std::isnan(out[i]) ? "NaN" : "infinite (or beyond float32)"));
    }
    return out;
}

}  // namespace ember::features
