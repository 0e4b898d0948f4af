#include "trace/journal_reader.hpp"

#include <fmt/format.h>

#include <boost/json/parse.hpp>

#include <fstream>
#include <limits>

#include "common/error.hpp"

namespace ember::trace {
namespace {

namespace json = boost::json;

// The fields of one line, each checked; errors say where.
class LineReader {
public:
    LineReader(const json::object& o, const std::string& where) : o_(o), where_(where) {}

    const json::value& field(const char* key) const {
        const json::value* v = o_.if_contains(key);
        if (v == nullptr) throw Error(fmt::format("{}: missing field '{}'", where_, key));
        return *v;
    }
    std::uint64_t count(const char* key) const {
        const json::value& v = field(key);
        if (v.is_uint64()) return v.as_uint64();
        if (v.is_int64() && v.as_int64() >= 0) return static_cast<std::uint64_t>(v.as_int64());
        throw Error(fmt::format("{}: field '{}' must be a non-negative integer", where_, key));
    }
    std::string text(const char* key) const {
        const json::value& v = field(key);
        if (!v.is_string()) throw Error(fmt::format("{}: field '{}' must be a string", where_, key));
        return std::string(v.as_string());
    }
    std::optional<std::string> text_or_null(const char* key) const {
        if (field(key).is_null()) return std::nullopt;
        return text(key);
    }
    Shape shape(const char* key) const {
        const json::value& v = field(key);
        const json::array* a = v.if_array();
        if (a == nullptr || a->size() != 2 || !(*a)[0].is_number() || !(*a)[1].is_number())
            throw Error(fmt::format("{}: field '{}' must be [rows, cols]", where_, key));
        Shape s{};
        for (std::size_t i = 0; i < 2; ++i) {
            const json::value& d = (*a)[i];
            if (d.is_uint64()) s[i] = d.as_uint64();
            else if (d.is_int64() && d.as_int64() >= 0) s[i] = static_cast<std::size_t>(d.as_int64());
            else throw Error(fmt::format("{}: field '{}' must hold non-negative integers", where_, key));
        }
        return s;
    }
    std::int32_t layer() const {
        const json::value& v = field("layer");
        if (v.is_null()) return -1;
        if (v.is_int64() && v.as_int64() >= 0 && v.as_int64() <= std::numeric_limits<std::int32_t>::max())
            return static_cast<std::int32_t>(v.as_int64());
        if (v.is_uint64() && v.as_uint64() <= std::numeric_limits<std::int32_t>::max())
            return static_cast<std::int32_t>(v.as_uint64());
        throw Error(fmt::format("{}: field 'layer' must be null or a layer index", where_));
    }

private:
    const json::object& o_;
    const std::string& where_;
};

}  // namespace

void for_each_event(const std::filesystem::path& journal, const std::function<void(const TraceEvent&)>& visit) {
    std::ifstream in(journal, std::ios::binary);
    if (!in) throw Error(fmt::format("{}: cannot open", journal.string()));
    std::string line;
    std::size_t line_number = 0;
    while (std::getline(in, line)) {
        ++line_number;
        if (line.empty()) continue;
        const std::string where = fmt::format("{}:{}", journal.string(), line_number);
        boost::system::error_code ec;
        const json::value value = json::parse(line, ec);
        if (ec || !value.is_object()) throw Error(fmt::format("{}: not a JSON object", where));
        const LineReader r(value.as_object(), where);
        TraceEvent e;
        e.seq = r.count("seq");
        e.name = r.text("name");
        e.op_kind = r.text("op_kind");
        e.layer = r.layer();
        e.phase = r.text("phase");
        e.step = r.count("step");
        e.input_shape = r.shape("input_shape");
        e.output_shape = r.shape("output_shape");
        e.input_bytes = r.count("input_bytes");
        e.output_bytes = r.count("output_bytes");
        e.start_ns = r.count("start_ns");
        e.duration_ns = r.count("duration_ns");
        e.estimated_flops = r.count("estimated_flops");
        e.route = r.text("route");
        e.kernel = r.text("kernel");
        e.weight_type = r.text_or_null("weight_type");
        e.variant = r.text_or_null("variant");
        visit(e);
    }
    if (in.bad()) throw Error(fmt::format("{}: read error", journal.string()));
}

}  // namespace ember::trace
