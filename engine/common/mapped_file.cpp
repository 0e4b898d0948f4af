#include "common/mapped_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <utility>

#include "common/error.hpp"

namespace ember {
namespace {

// The SIGBUS handler's table of mappings (see the header). begin == 0: a free slot.
struct MappingSlot {
    std::atomic<std::uintptr_t> begin{0};
    std::atomic<std::uintptr_t> end{0};  // page-rounded
    std::atomic<bool> truncated{false};
    std::atomic<std::uintptr_t> first_fault{0};
};
constexpr int kMappingSlots = 256;
MappingSlot g_slots[kMappingSlots];
struct sigaction g_previous {};
std::uintptr_t g_page_size = 4096;
static_assert(std::atomic<std::uintptr_t>::is_always_lock_free && std::atomic<bool>::is_always_lock_free);

void pass_on(int sig, siginfo_t* info, void* context) {
    if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
        g_previous.sa_sigaction(sig, info, context);
        return;
    }
    if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN && g_previous.sa_handler != nullptr) {
        g_previous.sa_handler(sig);
        return;
    }
    ::signal(sig, SIG_DFL);  // the default action: the process ends with SIGBUS as before
    ::raise(sig);
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
    const auto address = reinterpret_cast<std::uintptr_t>(info->si_addr);
    for (MappingSlot& slot : g_slots) {
        const std::uintptr_t begin = slot.begin.load(std::memory_order_acquire);
        const std::uintptr_t end = slot.end.load(std::memory_order_acquire);
        if (begin == 0 || address < begin || address >= end) continue;
        const std::uintptr_t page = address & ~(g_page_size - 1);
        // mmap is a plain system call: safe in a signal handler on Linux.
        void* zeros = ::mmap(reinterpret_cast<void*>(page), end - page, PROT_READ,
                             MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (zeros == MAP_FAILED) break;
        std::uintptr_t none = 0;
        slot.first_fault.compare_exchange_strong(none, address - begin + 1);
        slot.truncated.store(true, std::memory_order_release);
        return;
    }
    pass_on(sig, info, context);
}

void install_handler() {
    static std::once_flag once;
    std::call_once(once, [] {
        g_page_size = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
        struct sigaction action {};
        action.sa_sigaction = on_sigbus;
        action.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&action.sa_mask);
        ::sigaction(SIGBUS, &action, &g_previous);
    });
}

// The slot now holding [begin, begin + size), or -1 when the table is full (the mapping
// then has no protection; 256 files mapped at once is far beyond any run). Registration
// takes a lock; the handler only reads, end before begin is published.
std::mutex g_register_lock;

int register_mapping(const std::byte* begin, std::size_t size) {
    install_handler();
    const auto b = reinterpret_cast<std::uintptr_t>(begin);
    const std::uintptr_t end = (b + size + g_page_size - 1) & ~(g_page_size - 1);
    const std::lock_guard<std::mutex> lock(g_register_lock);
    for (int i = 0; i < kMappingSlots; ++i) {
        MappingSlot& slot = g_slots[i];
        if (slot.begin.load() != 0) continue;
        slot.truncated.store(false);
        slot.first_fault.store(0);
        slot.end.store(end, std::memory_order_release);
        slot.begin.store(b, std::memory_order_release);
        return i;
    }
    return -1;
}

void unregister_mapping(int index) {
    const std::lock_guard<std::mutex> lock(g_register_lock);
    g_slots[index].begin.store(0, std::memory_order_release);
    g_slots[index].end.store(0, std::memory_order_release);
}

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        throw Error(path.string() + ": cannot open: " + std::strerror(errno));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        throw Error(path.string() + ": cannot stat: " + std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error(path.string() + ": not a regular file");
    }
    size_ = static_cast<std::size_t>(st.st_size);
    state_ = FileState::of(st);
    if (size_ > 0) {
        void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            const int err = errno;
            ::close(fd);
            throw Error(path.string() + ": cannot map: " + std::strerror(err));
        }
        data_ = static_cast<const std::byte*>(p);
        slot_ = register_mapping(data_, size_);
    }
    ::close(fd);  // the mapping keeps the file alive
}

void MappedFile::unregister() {
    if (slot_ < 0) return;
    unregister_mapping(slot_);
    slot_ = -1;
}

MappedFile::~MappedFile() {
    unregister();
    if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      state_(other.state_),
      slot_(std::exchange(other.slot_, -1)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        unregister();
        if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
        path_ = std::move(other.path_);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        state_ = other.state_;
        slot_ = std::exchange(other.slot_, -1);
    }
    return *this;
}

bool MappedFile::truncated() const { return slot_ >= 0 && g_slots[slot_].truncated.load(std::memory_order_acquire); }

std::size_t MappedFile::truncated_at() const {
    if (slot_ < 0) return 0;
    const std::uintptr_t at = g_slots[slot_].first_fault.load();
    return at == 0 ? 0 : static_cast<std::size_t>(at - 1);
}

}  // namespace ember
