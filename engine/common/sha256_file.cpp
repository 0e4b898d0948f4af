#include "common/sha256_file.hpp"

#include <fstream>
#include <vector>

#include "common/error.hpp"

namespace ember {

std::string sha256_hex(std::span<const std::byte> data) {
    Sha256 h;
    h.update(data);
    return h.finish_hex();
}

std::string sha256_file_hex(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path.string() + ": cannot open for hashing");
    Sha256 h;
    std::vector<char> chunk(1 << 20);
    while (in) {
        in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
        const auto got = static_cast<std::size_t>(in.gcount());
        if (got > 0) h.update(std::as_bytes(std::span(chunk.data(), got)));
    }
    if (in.bad()) throw Error(path.string() + ": read error while hashing");
    return h.finish_hex();
}

}  // namespace ember
