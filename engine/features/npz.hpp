// NumPy's .npz (np.savez): a zip archive of .npy files, stored without compression. Gemma
// Scope ships its SAEs as params.npz. This is a reader for exactly that: the archive's
// central directory (zip64 included, which np.savez always writes), each member stored
// (method 0); a compressed member (np.savez_compressed) is refused by name, as are
// members whose ranges leave the file. Arrays are little-endian float32 or float64, C
// order; values are checked finite. Errors read `PATH: member 'NAME': what is wrong`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/mapped_file.hpp"

namespace ember::features {

struct NpzArray {
    std::string name;  // the member name without ".npy"
    std::vector<std::size_t> shape;
    std::string descr;                // "<f4" or "<f8"
    std::span<const std::byte> data;  // into the mapping
};

class NpzFile {
public:
    static NpzFile open(const std::filesystem::path& path);

    const std::filesystem::path& path() const { return file_.path(); }
    const std::vector<NpzArray>& arrays() const { return arrays_; }
    const NpzArray* find(std::string_view name) const;
    // The array `name` with exactly `shape`, as F32 (finite). Throws naming the file and member.
    std::vector<float> floats(std::string_view name, const std::vector<std::size_t>& shape) const;

private:
    explicit NpzFile(MappedFile file) : file_(std::move(file)) {}
    MappedFile file_;
    std::vector<NpzArray> arrays_;
};

}  // namespace ember::features
