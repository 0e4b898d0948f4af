#include "common/input_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include "common/error.hpp"

namespace ember {

std::uint64_t max_input_bytes() {
    const char* env = std::getenv("EMBER_MAX_INPUT_BYTES");
    if (env == nullptr || *env == '\0') return kDefaultMaxInputBytes;
    const std::string_view text(env);
    std::uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value == 0)
        throw Error(fmt::format("$EMBER_MAX_INPUT_BYTES = '{}' must be a positive integer (bytes)", text));
    return value;
}

std::string read_input_file(const std::filesystem::path& path, std::string_view what) {
    const std::uint64_t limit = max_input_bytes();
    // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below anyway.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) throw Error(fmt::format("{}: cannot open {} ({})", path.string(), what, std::strerror(errno)));
    struct FdCloser {
        int fd;
        ~FdCloser() { ::close(fd); }
    } closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw Error(fmt::format("{}: cannot read {} ({})", path.string(), what, std::strerror(errno)));
    if (S_ISDIR(st.st_mode)) throw Error(fmt::format("{}: is a directory, not a {}", path.string(), what));
    if (!S_ISREG(st.st_mode)) throw Error(fmt::format("{}: not a regular file (a {} must be one)", path.string(), what));
    const auto too_large = [&](std::uint64_t size) {
        return Error(fmt::format("{}: {} is {} bytes, more than the limit of {} bytes (set EMBER_MAX_INPUT_BYTES to raise it)",
                                 path.string(), what, size, limit));
    };
    if (static_cast<std::uint64_t>(st.st_size) > limit) throw too_large(static_cast<std::uint64_t>(st.st_size));

    std::string bytes;
    bytes.reserve(static_cast<std::size_t>(st.st_size));
    char buffer[65536];
    for (;;) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw Error(fmt::format("{}: cannot read {} ({})", path.string(), what, std::strerror(errno)));
        if (n == 0) return bytes;
        bytes.append(buffer, static_cast<std::size_t>(n));
        if (bytes.size() > limit) throw too_large(bytes.size());  // it grew while being read
    }
}

}  // namespace ember
