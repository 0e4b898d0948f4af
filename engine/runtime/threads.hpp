// How many threads a run uses.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::runtime {

// --threads / model.threads: 0 means every hardware thread.
std::size_t effective_threads(std::uint32_t threads);

}  // namespace ember::runtime
