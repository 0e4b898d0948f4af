#include "common/atomic_file.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>

#include "common/error.hpp"

namespace ember {

void write_file_atomically(const std::filesystem::path& path, std::string_view bytes) {
    write_file_atomically(path, [bytes](std::ostream& out) { out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
}

void write_file_atomically(const std::filesystem::path& path, const std::function<void(std::ostream& out)>& write) {
    std::filesystem::path tmp = path;
    tmp += fmt::format(".tmp.{}", ::getpid());
    const auto discard = [&] {
        std::error_code ignored;
        std::filesystem::remove(tmp, ignored);
    };
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw Error(fmt::format("{}: cannot create", tmp.string()));
        try {
            write(out);
        } catch (...) {
            out.close();
            discard();
            throw;
        }
        out.flush();
        if (!out) {
            out.close();
            discard();
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
