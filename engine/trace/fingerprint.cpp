#include "trace/fingerprint.hpp"

#include <fmt/format.h>

#include "trace/journal_reader.hpp"

namespace ember::trace {

std::string fingerprint_line(std::string_view name, std::string_view op_kind, std::int32_t layer, Shape input,
                             Shape output) {
    const std::string layer_text = layer < 0 ? std::string("-") : std::to_string(layer);
    return fmt::format("{}\t{}\t{}\t{}x{}\t{}x{}\n", name, op_kind, layer_text, input[0], input[1], output[0],
                       output[1]);
}

void Fingerprint::add(std::string_view name, std::string_view op_kind, std::int32_t layer, Shape input, Shape output) {
    sha_.update(fingerprint_line(name, op_kind, layer, input, output));
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
