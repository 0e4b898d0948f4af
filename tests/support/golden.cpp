#include "support/golden.hpp"

#include <boost/json.hpp>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <iterator>
#include <stdexcept>

#include "support/fixtures.hpp"

namespace ember::test {
namespace {

namespace json = boost::json;

float as_float(const json::value& v) { return static_cast<float>(v.to_number<double>()); }

GoldenTensor read_tensor(const json::object& o) {
    GoldenTensor t;
    t.rows = o.at("rows").to_number<std::size_t>();
    t.cols = o.at("cols").to_number<std::size_t>();
    const json::array& values = o.at("values").as_array();
    if (values.size() != t.rows * t.cols) throw std::runtime_error("values do not match rows x cols");
    t.values.reserve(values.size());
    for (const auto& v : values) t.values.push_back(as_float(v));
    return t;
}

GoldenPrompt read_prompt(const json::object& o) {
    GoldenPrompt p;
    p.text = std::string(o.at("text").as_string());
    for (const auto& id : o.at("tokens").as_array()) p.tokens.push_back(id.to_number<std::int32_t>());
    for (const auto& piece : o.at("pieces_hex").as_array()) p.pieces.push_back(hex_to_bytes(piece.as_string()));
    for (const auto& pos : o.at("positions").as_array()) {
        GoldenPosition g;
        g.lse = pos.at("lse").to_number<double>();
        for (const auto& pair : pos.at("top").as_array()) {
            const auto& a = pair.as_array();
            g.top.emplace_back(a.at(0).to_number<std::int32_t>(), as_float(a.at(1)));
        }
        p.positions.push_back(std::move(g));
    }
    for (const auto& [name, tensor] : o.at("hidden").as_object()) {
        p.hidden.emplace(std::string(name), read_tensor(tensor.as_object()));
    }
    for (const auto& step : o.at("greedy").as_array()) {
        GoldenStep s;
        s.token = step.at("token").to_number<std::int32_t>();
        s.piece = hex_to_bytes(step.at("piece_hex").as_string());
        s.logit = as_float(step.at("logit"));
        s.margin = as_float(step.at("margin"));
        p.greedy.push_back(std::move(s));
    }
    return p;
}

}  // namespace

std::string hex_to_bytes(std::string_view hex) {
    if (hex.size() % 2 != 0) throw std::runtime_error("odd-length hex string");
    std::string out;
    for (std::size_t i = 0; i < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
    return out;
}

std::filesystem::path f32_golden_path(const std::string& model) { return fixture_path("golden/" + model + ".f32.golden.json"); }
std::filesystem::path golden_path(const std::string& model) { return fixture_path("golden/" + model + ".golden.json"); }

Golden load_golden(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE_MESSAGE(in.good(), "cannot open golden file " << path.string());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Golden g;
    try {
        const json::object root = json::parse(text).as_object();
        g.n_vocab = root.at("n_vocab").to_number<std::size_t>();
        g.add_bos = root.at("add_bos").as_bool();
        for (const auto& p : root.at("prompts").as_array()) g.prompts.push_back(read_prompt(p.as_object()));
    } catch (const std::exception& e) {
        FAIL("malformed golden file " << path.string() << ": " << e.what());
    }
    return g;
}

double relative_error(std::span<const float> ours, std::span<const float> golden) {
    if (ours.size() != golden.size()) return std::numeric_limits<double>::quiet_NaN();
    double scale = 0, worst = 0;
    for (float g : golden) scale = std::max(scale, static_cast<double>(std::abs(g)));
    for (std::size_t i = 0; i < golden.size(); ++i)
        worst = std::max(worst, std::abs(static_cast<double>(ours[i]) - golden[i]));
    return worst / scale;
}

double f32_golden_tolerance(std::string_view family) { return family == "gemma4" ? 2e-3 : 1e-5; }

}  // namespace ember::test
