#include "trace/chrome_export.hpp"

#include <boost/json/value.hpp>

#include <string>

#include "common/atomic_file.hpp"
#include "record/strict_json.hpp"
#include "trace/journal_reader.hpp"

namespace ember::trace {
namespace {

namespace json = boost::json;

json::array shape_json(const Shape& s) { return {s[0], s[1]}; }

json::object chrome_event(const TraceEvent& e) {
    json::object args{
        {"seq", e.seq},
        {"layer", e.layer < 0 ? json::value(nullptr) : json::value(e.layer)},
        {"phase", e.phase},
        {"step", e.step},
        {"input_shape", shape_json(e.input_shape)},
        {"output_shape", shape_json(e.output_shape)},
        {"input_bytes", e.input_bytes},
        {"output_bytes", e.output_bytes},
        {"estimated_flops", e.estimated_flops},
        {"route", e.route},
        {"kernel", e.kernel},
        {"weight_type", e.weight_type ? json::value(*e.weight_type) : json::value(nullptr)},
        {"variant", e.variant ? json::value(*e.variant) : json::value(nullptr)},
    };
    return {
        {"name", e.layer < 0 ? e.name : e.name + "-" + std::to_string(e.layer)},
        {"cat", e.op_kind},
        {"ph", "X"},
        {"ts", static_cast<double>(e.start_ns) / 1000.0},
        {"dur", static_cast<double>(e.duration_ns) / 1000.0},
        {"pid", 1},
        {"tid", 1},
        {"args", std::move(args)},
    };
}

}  // namespace

std::size_t export_chrome_trace(const std::filesystem::path& journal, const std::filesystem::path& out) {
    AtomicFile file(out);
    file.write("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    std::size_t events = 0;
    for_each_event(journal, [&](const TraceEvent& e) {
        if (events > 0) file.write(",\n");
        file.write(strict_json(chrome_event(e)));
        ++events;
    });
    file.write("\n]}\n");
    file.commit();
    return events;
}

}  // namespace ember::trace
