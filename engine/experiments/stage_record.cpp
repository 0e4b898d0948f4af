#include "experiments/stage_record.hpp"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <new>
#include <type_traits>

#include "common/error.hpp"

namespace ember::experiments {

static_assert(std::atomic<std::uint32_t>::is_always_lock_free && std::atomic<std::int64_t>::is_always_lock_free,
              "the record is shared between processes: its atomics must not need a lock");

std::optional<hooks::Phase> StageRecord::phase_value() const {
    if (!has_phase) return std::nullopt;
    for (hooks::Phase p : {hooks::Phase::Prefill, hooks::Phase::Decode})
        if (static_cast<std::uint32_t>(p) == phase) return p;
    return std::nullopt;
}

std::string StageRecord::where() const {
    if (!entered) return "";
    std::string out = stage_name();
    const std::optional<hooks::Phase> p = phase_value();
    if (p && has_layer)
        out += fmt::format(" (phase={}, layer={})", hooks::phase_name(*p), layer);
    else if (p)
        out += fmt::format(" (phase={})", hooks::phase_name(*p));
    return out;
}

namespace {

StageRecord* map_record(int fd) {
    void* memory = ::mmap(nullptr, sizeof(StageRecord), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (memory == MAP_FAILED) throw Error(fmt::format("cannot map the stage record: {}", std::strerror(errno)));
    return static_cast<StageRecord*>(memory);
}

}  // namespace

SharedStageRecord SharedStageRecord::create() {
    const int fd = ::memfd_create("ember-stage-record", MFD_CLOEXEC);
    if (fd < 0) throw Error(fmt::format("cannot create the stage record: {}", std::strerror(errno)));
    if (::ftruncate(fd, sizeof(StageRecord)) != 0) {
        const int saved = errno;
        ::close(fd);
        throw Error(fmt::format("cannot size the stage record: {}", std::strerror(saved)));
    }
    StageRecord* record = map_record(fd);
    new (record) StageRecord();
    return SharedStageRecord(fd, record);
}

SharedStageRecord SharedStageRecord::attach(int fd) { return SharedStageRecord(fd, map_record(fd)); }

SharedStageRecord::SharedStageRecord(SharedStageRecord&& other) noexcept : fd_(other.fd_), record_(other.record_) {
    other.fd_ = -1;
    other.record_ = nullptr;
}

SharedStageRecord::~SharedStageRecord() {
    if (record_) ::munmap(record_, sizeof(StageRecord));
    if (fd_ >= 0) ::close(fd_);
}

}  // namespace ember::experiments
