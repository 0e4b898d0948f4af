#include "common/atomic_file.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "common/error.hpp"

namespace ember {

namespace {
constexpr std::size_t kBufferBytes = std::size_t{1} << 20;
}

AtomicFile::AtomicFile(std::filesystem::path path)
    : path_(std::move(path)), temp_(path_.string() + ".tmp." + std::to_string(::getpid())) {
    file_ = std::fopen(temp_.c_str(), "wb");
    if (file_ == nullptr) throw Error(fmt::format("{}: cannot create ({})", temp_.string(), std::strerror(errno)));
    std::setvbuf(file_, nullptr, _IOFBF, kBufferBytes);
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() noexcept {
    if (file_ == nullptr) return;
    std::fclose(file_);
    file_ = nullptr;
    std::error_code ec;
    std::filesystem::remove(temp_, ec);
}

void AtomicFile::write(std::string_view bytes) { write(std::as_bytes(std::span(bytes.data(), bytes.size()))); }

void AtomicFile::write(std::span<const std::byte> bytes) {
    if (file_ == nullptr) throw Error(fmt::format("{}: written after commit", path_.string()));
    if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) failed_ = true;
}

void AtomicFile::commit() {
    if (file_ == nullptr) throw Error(fmt::format("{}: committed twice", path_.string()));
    const bool flushed = std::fflush(file_) == 0 && !failed_;
    const int saved_errno = errno;
    if (!flushed) {
        discard();
        throw Error(fmt::format("{}: cannot write ({})", temp_.string(), std::strerror(saved_errno)));
    }
    std::fclose(file_);
    file_ = nullptr;
    std::error_code ec;
    std::filesystem::rename(temp_, path_, ec);
    if (ec) {
        const std::string reason = ec.message();
        std::filesystem::remove(temp_, ec);
        throw Error(fmt::format("cannot rename {} to {}: {}", temp_.string(), path_.string(), reason));
    }
}

void write_file_atomically(const std::filesystem::path& path, std::string_view bytes) {
    AtomicFile out(path);
    out.write(bytes);
    out.commit();
}

}  // namespace ember
