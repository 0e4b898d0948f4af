// A trace fingerprint: the SHA-256 of the execution structure without timings. Each
// operation contributes one line, in execution order,
//
//   NAME \t OP_KIND \t LAYER \t IN_ROWSxIN_COLS \t OUT_ROWSxOUT_COLS \n
//
// (LAYER is "-" for model-level operations), e.g. "attn_q\tprojection\t3\t7x64\t7x64\n".
// Equal models, prompts and routes give equal fingerprints; a change of the operations,
// their order or their shapes changes it. The journal computes it as it writes, and
// fingerprint_of_journal() recomputes it from a written trace (docs/formats.md).
#pragma once

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "common/sha256_file.hpp"

namespace ember::trace {

using Shape = std::array<std::size_t, 2>;

// The fingerprint line of one operation (layer < 0: model-level).
std::string fingerprint_line(std::string_view name, std::string_view op_kind, std::int32_t layer, Shape input,
                             Shape output);

class Fingerprint {
public:
    void add(std::string_view name, std::string_view op_kind, std::int32_t layer, Shape input, Shape output);
    std::string hex() const;  // of the operations added so far
    std::size_t operations() const { return operations_; }

private:
    Sha256 sha_;
    std::size_t operations_ = 0;
    fmt::memory_buffer line_;  // reused: no allocation per operation
};

// Recomputes the fingerprint of a trace journal (one JSON object per line). Throws
// ember::Error naming the file and line of anything malformed.
std::string fingerprint_of_journal(const std::filesystem::path& journal);

}  // namespace ember::trace
