#include "trace/fingerprint.hpp"

#include <fmt/format.h>

#include <iterator>

#include "trace/journal_reader.hpp"

namespace ember::trace {

namespace {

void append_line(fmt::memory_buffer& out, std::string_view name, std::string_view op_kind, std::int32_t layer,
                 Shape input, Shape output) {
    auto it = std::back_inserter(out);
    if (layer < 0) fmt::format_to(it, "{}\t{}\t-\t", name, op_kind);
    else fmt::format_to(it, "{}\t{}\t{}\t", name, op_kind, layer);
    fmt::format_to(it, "{}x{}\t{}x{}\n", input[0], input[1], output[0], output[1]);
}

}  // namespace

std::string fingerprint_line(std::string_view name, std::string_view op_kind, std::int32_t layer, Shape input,
                             Shape output) {
    fmt::memory_buffer line;
    append_line(line, name, op_kind, layer, input, output);
    return fmt::to_string(line);
}

void Fingerprint::add(std::string_view name, std::string_view op_kind, std::int32_t layer, Shape input, Shape output) {
    line_.clear();
    append_line(line_, name, op_kind, layer, input, output);
    sha_.update(std::string_view(line_.data(), line_.size()));
    ++operations_;
}

std::string Fingerprint::hex() const {
    Sha256 copy = sha_;
    return copy.finish_hex();
}

std::string fingerprint_of_journal(const std::filesystem::path& journal) {
    Fingerprint fingerprint;
    for_each_event(journal, [&](const TraceEvent& e) {
        fingerprint.add(e.name, e.op_kind, e.layer, e.input_shape, e.output_shape);
    });
    return fingerprint.hex();
}

}  // namespace ember::trace
