// Rung: smoke. `ember bench` runs both routes and both cache types on a fixture model,
// reports what the benchmark script reads (the medians, the spreads, every run, peak
// RSS, model and KV cache bytes, route, kernels), and refuses bad options by name.
#include <boost/json.hpp>
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "support/fixtures.hpp"

namespace ember::test {
namespace {

namespace json = boost::json;

CommandResult bench(const std::string& options, bool merge_stderr = false) {
    return run_command(std::string(EMBER_BINARY) + " bench --model " +
                           shell_quote(fixture_path("models/stories260K-q8_0.gguf").string()) + " " + options,
                       merge_stderr);
}

}  // namespace

TEST_CASE("ember bench --json: medians, spreads and runs, memory, route and kernels") {
    for (const char* route : test::built_routes()) {
        for (const char* kv : {"f32", "f16"}) {
            CAPTURE(route);
            CAPTURE(kv);
            const CommandResult r = bench(std::string("--json --prompt-tokens 20 --gen-tokens 5 --repeat 3 --warmup 0 --ctx 64 "
                                                      "--threads 2 --route ") + route + " --kv-type " + kv);
            REQUIRE_MESSAGE(r.exit_code == 0, r.output);
            const json::object o = json::parse(r.output).as_object();
            CHECK(o.at("route").as_string() == route);
            CHECK(o.at("kv_type").as_string() == kv);
            CHECK(!o.at("cpu_variant").as_string().empty());
            CHECK(o.at("threads").to_number<int>() == 2);
            CHECK(o.at("ctx").to_number<int>() == 64);
            for (const char* phase : {"prefill_tok_s", "decode_tok_s"}) {
                CAPTURE(phase);
                const double median = o.at(phase).to_number<double>();
                const json::object& spread = o.at(std::string(phase) + "_spread").as_object();
                CHECK(median > 0);
                CHECK(spread.at("min").to_number<double>() <= median);
                CHECK(spread.at("max").to_number<double>() >= median);
                CHECK(o.at(std::string(phase) + "_runs").as_array().size() == 3);
            }
            const auto model_bytes = o.at("model_bytes").to_number<std::uint64_t>();
            CHECK(model_bytes == std::filesystem::file_size(fixture_path("models/stories260K-q8_0.gguf")));
            CHECK(o.at("peak_rss_bytes").to_number<std::uint64_t>() > model_bytes);
            // 5 layers x 64 positions x (K and V) x 4 KV heads of 8 values
            CHECK(o.at("kv_cache_bytes").to_number<std::uint64_t>() == 5u * 64 * 2 * 32 * (std::string(kv) == "f32" ? 4 : 2));
        }
    }
}

TEST_CASE("ember bench: the plain report, and bad options as usage errors") {
    const CommandResult plain = bench("--prompt-tokens 8 --gen-tokens 3 --repeat 1 --ctx 32");
    REQUIRE(plain.exit_code == 0);
    CHECK(plain.output.find("prefill ") != std::string::npos);
    CHECK(plain.output.find("peak RSS") != std::string::npos);
    const CommandResult too_long = bench("--prompt-tokens 30 --gen-tokens 5 --ctx 32", true);
    CHECK(too_long.exit_code == 2);
    CHECK(too_long.output.find("do not fit --ctx 32") != std::string::npos);
    CHECK(bench("--route gpu", true).exit_code == 2);
    CHECK(bench("--kv-type q4", true).exit_code == 2);
    CHECK(bench("--repeat 0", true).exit_code == 2);
    CHECK(run_command(std::string(EMBER_BINARY) + " bench", true).exit_code == 2);
}

}  // namespace ember::test
