// The reference route: kernels::Backend implemented by the plain kernels of this
// directory. Single precision values, double sums, no SIMD; matmul and attention are
// split over output rows and heads with oneTBB (in the caller's task_arena), which never
// changes a result bit.
#pragma once

#include <memory>

#include "kernels/backend.hpp"

namespace ember::kernels::reference {

std::unique_ptr<Backend> make_reference_backend();

}  // namespace ember::kernels::reference
