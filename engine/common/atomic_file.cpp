#include "common/atomic_file.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>

#include "common/error.hpp"

namespace ember {

void write_file_atomically(const std::filesystem::path& path, std::string_view bytes) {
    std::filesystem::path tmp = path;
    tmp += fmt::format(".tmp.{}", ::getpid());
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw Error(fmt::format("{}: cannot create", tmp.string()));
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        out.flush();
        if (!out) {
            out.close();
            std::error_code ignored;
            std::filesystem::remove(tmp, ignored);
            throw Error(fmt::format("{}: write failed (disk full?)", tmp.string()));
        }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        std::error_code ignored;
        std::filesystem::remove(tmp, ignored);
        throw Error(fmt::format("{}: cannot rename into place: {}", path.string(), ec.message()));
    }
}

}  // namespace ember
