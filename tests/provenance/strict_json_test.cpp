// Rung: smoke. Every JSON file Ember writes is RFC 8259 (common/strict_json.hpp): through
// the CLI, a run whose logits are +inf and -inf (steer adds an infinite vector to the
// logits) writes strict JSON, and a plugin error message that is not UTF-8 reaches
// run.json and capture's manifest as valid UTF-8. (Every TempDir also checks its JSON files strict when it is removed:
// tests/support/temp_dir.hpp.) Plus the rules themselves on nested values.
#include <doctest/doctest.h>
#include <ember/npy.hpp>
#include <fmt/format.h>

#include <boost/json.hpp>

#include <limits>

#include "record/json_pretty.hpp"
#include "record/strict_json.hpp"
#include "run/ember_run.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

const fs::path kModel = fixture_path("models/stories260K.gguf");
constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("infinite logits are written as null with a sibling naming them") {
    TempDir dir;
    constexpr std::size_t kVocab = 512;  // stories260K
    std::vector<float> v(kVocab, 0.0f);
    v[100] = std::numeric_limits<float>::infinity();
    v[200] = -std::numeric_limits<float>::infinity();
    npy::write_f32(dir.path() / "inf.npy", v.data(), {kVocab});
    const auto run = ember_run(dir, run_config(kModel, "Once upon a time", 2,
                                               experiment(builtin_plugin("steer"), "vector = 'inf.npy'\nstage = \"after_logits\"")));
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    const json::array& steps = run.report.at("generated").at("steps").as_array();
    REQUIRE(!steps.empty());
    CHECK(steps[0].at("token") == 100);
    CHECK(str(steps[0].at("logit")) == "+inf");  // a chosen logit's own spelling (generation_output)
    const std::string text = read_text(run.output_dir / "run.json");
    CHECK(text.find("Infinity") == std::string::npos);
    CHECK(text.find("1e99999") == std::string::npos);
}

TEST_CASE("a plugin error that is not UTF-8 is replaced, its raw bytes kept in hex") {
    TempDir dir;
    const auto run = ember_run(dir, run_config(kModel, "Once upon a time", 2,
                                               experiment(builtin_plugin("capture")) +
                                                   experiment(test_plugin("failing"),
                                                              "stage = \"after_layer\"\nhow = \"bad_utf8\"")));
    CHECK(run.exit_code == 1);
    REQUIRE(run.has_report);
    CHECK(run.report.at("outcome") == "failed");
    // The host sanitizes plugin text first (experiments/log_line.hpp); whatever reaches a
    // JSON writer is valid UTF-8, and the strict writer keeps the raw bytes of any that is not.
    const std::string error = str(run.report.at("error"));
    CHECK(error.find("planned failure") != std::string::npos);
    CHECK(is_valid_utf8(error));
    const json::object capture = json::parse(read_text(run.output_dir / "capture" / "manifest.json")).as_object();
    CHECK(capture.at("complete") == false);
    CHECK(is_valid_utf8(str(capture.at("error"))));
}

TEST_CASE("the strict rules on nested values") {
    const json::value v = json::object{
        {"ok", 1.5},
        {"x", kInf},
        {"s", "a\xFF"},
        {"list", json::array{1.0, -kInf, json::array{std::nan(""), "b\xC3"}, json::object{{"y", -kInf}}}},
    };
    const std::string text = strict_json(v);
    CAPTURE(text);
    const json::object o = json::parse(text).as_object();
    CHECK(o.at("ok") == 1.5);
    CHECK(o.at("x").is_null());
    CHECK(o.at("x_nonfinite") == "inf");
    CHECK(o.at("s") == "a\xEF\xBF\xBD");
    CHECK(o.at("s_hex") == "61ff");
    CHECK(o.at("list").at(1).is_null());
    CHECK(o.at("list_nonfinite").at("1") == "-inf");
    CHECK(o.at("list_nonfinite").at("2.0") == "nan");
    CHECK(o.at("list_hex").at("2.1") == "62c3");
    CHECK(o.at("list").at(3).at("y").is_null());
    CHECK(o.at("list").at(3).at("y_nonfinite") == "-inf");
    CHECK(pretty_json(v).find("null") != std::string::npos);
    // Valid text and finite numbers are untouched.
    const json::value clean = json::object{{"t", "مرحبا"}, {"n", 3}};
    CHECK(strict_json(clean) == json::serialize(clean));
}

}  // namespace ember::test
