#include "trace/journal.hpp"

#include <iterator>

namespace ember::trace {
namespace {

std::filesystem::path with_parent_created(const std::filesystem::path& path) {
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    return path;
}

// `text` as a JSON string (names and kernel names are ASCII identifiers, but say so safely).
void append_string(fmt::memory_buffer& out, std::string_view text) {
    out.push_back('"');
    for (const char c : text) {
        if (c == '"' || c == '\\') {
            out.push_back('\\');
            out.push_back(c);
        } else if (static_cast<unsigned char>(c) < 0x20) {
            fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned>(c));
        } else {
            out.push_back(c);
        }
    }
    out.push_back('"');
}

void append_string_or_null(fmt::memory_buffer& out, std::string_view text) {
    if (text.empty()) fmt::format_to(std::back_inserter(out), "null");
    else append_string(out, text);
}

}  // namespace

Journal::Journal(const std::filesystem::path& path)
    : out_(with_parent_created(path)), origin_(std::chrono::steady_clock::now()) {}

void Journal::begin_evaluation(const kernels::EvaluationMark& mark) {
    phase_.assign(mark.phase);
    step_ = mark.step;
    ++evaluations_;
}

void Journal::on_op(const kernels::OpRecord& r) {
    const std::string_view kind = kernels::op_kind_name(r.site.kind);
    const auto start_ns = r.start < origin_ ? 0 : std::chrono::duration_cast<std::chrono::nanoseconds>(r.start - origin_).count();
    auto out = std::back_inserter(line_);
    line_.clear();
    fmt::format_to(out, "{{\"seq\":{},\"name\":", fingerprint_.operations());
    append_string(line_, r.site.name);
    fmt::format_to(out, ",\"op_kind\":\"{}\",\"layer\":", kind);
    if (r.site.layer < 0) fmt::format_to(out, "null");
    else fmt::format_to(out, "{}", r.site.layer);
    fmt::format_to(out,
                   ",\"phase\":\"{}\",\"step\":{},\"input_shape\":[{},{}],\"output_shape\":[{},{}],\"input_bytes\":{},"
                   "\"output_bytes\":{},\"start_ns\":{},\"duration_ns\":{},\"estimated_flops\":{},\"route\":",
                   phase_, step_, r.input_shape[0], r.input_shape[1], r.output_shape[0], r.output_shape[1],
                   r.input_bytes, r.output_bytes, start_ns, r.duration_ns, r.estimated_flops);
    append_string(line_, r.route);
    fmt::format_to(out, ",\"kernel\":");
    append_string(line_, r.kernel);
    fmt::format_to(out, ",\"weight_type\":");
    append_string_or_null(line_, r.weight_type ? gguf::type_name(*r.weight_type) : std::string_view{});
    fmt::format_to(out, ",\"variant\":");
    append_string_or_null(line_, r.variant);
    fmt::format_to(out, "}}\n");
    out_.write(std::string_view(line_.data(), line_.size()));

    fingerprint_.add(r.site.name, kind, r.site.layer, r.input_shape, r.output_shape);
    traced_ns_ += r.duration_ns;
}

JournalSummary Journal::finish() {
    out_.commit();
    return {out_.path(), fingerprint_.operations(), evaluations_, traced_ns_, fingerprint_.hex()};
}

}  // namespace ember::trace
