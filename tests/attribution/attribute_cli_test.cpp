// Rung: smoke (bad input, the run directory; --ids and --corrupt-ids give, bit for bit,
// what the text they tokenize to gives) and interventions (--verify-top: real patching on
// the reference route next to the attribution-patching estimate).
// `ember attribute` run as a researcher runs it: every bad input is a clear error with
// exit status 1 and no directory left behind; a good run's directory passes `ember
// verify`; the metric the gradient forward computes is the reference route's own.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace ember {
namespace {

namespace fs = std::filesystem;

std::string attribute(const std::string& args) {
    return std::string(EMBER_BINARY) + " attribute --model " +
           test::shell_quote(test::fixture_path("models/stories260K.gguf").string()) + " " + args;
}

boost::json::object read_json(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return boost::json::parse(s.str()).as_object();
}

TEST_CASE("ember attribute refuses bad input by name, exit 1, and writes nothing") {
    const test::TempDir tmp;
    const std::string out = test::shell_quote((tmp.path() / "run").string());
    struct Case {
        std::string args;
        std::string message;
    };
    const Case cases[] = {
        {"--target ''", "--target is empty"},
        {"--target ' x' --stages after_logits", "stage after_logits has no gradient"},
        {"--target ' x' --route fast", "--route fast is refused: gradients are defined on the reference route"},
        {"--target ' x' --corrupt 'a b c d e f g'", "the corrupted prompt is 8 tokens and the clean prompt 5"},
        {"--target ' x y' --metric prob", "--metric prob reads one token"},
        {"--target ' x' --metric logit-diff", "--metric logit-diff needs --contrast"},
    };
    for (const Case& c : cases) {
        CAPTURE(c.args);
        const auto r = test::run_command(attribute("--prompt 'Once upon a time' --out " + out + " " + c.args) + " 2>&1");
        CHECK(r.exit_code == 1);
        CHECK(r.output.find(c.message) != std::string::npos);
        CHECK(!fs::exists(tmp.path() / "run"));
    }
}

TEST_CASE("ember attribute: a sealed run directory, and --verify-top patches the top sites on the reference route") {
    const test::TempDir tmp;
    const fs::path dir = tmp.path() / "run";
    const auto r = test::run_command(
        attribute("--prompt 'Once upon a time, there was a little girl named Lily' --corrupt 'Once upon a time, there "
                  "was a little boy named Lily' --target '. She' --stages after_layer,head_outputs,mlp_activation "
                  "--verify-top 20 --out " + test::shell_quote(dir.string())) + " 2>&1");
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    CHECK(test::run_command(std::string(EMBER_BINARY) + " verify " + test::shell_quote(dir.string())).exit_code == 0);

    const boost::json::object m = read_json(dir / "manifest.json");
    const auto& atp = m.at("attribution_patching").as_object();
    CHECK(atp.at("verified").to_number<double>() == 20);
    // The gradient forward's metric is the reference route's, to the last bit.
    CHECK(atp.at("clean_metric").as_double() == atp.at("route_clean_metric").as_double());
    std::size_t gradients = 0;
    for (const auto& e : m.at("tensors").as_array())
        gradients += e.as_object().at("kind").as_string() == "gradient";
    CHECK(gradients == 3 * 5);

    // attribution.jsonl: every unit, ranked by |estimate|, the first 20 with their measured effect.
    std::ifstream lines(dir / "attribution.jsonl");
    std::string line;
    std::size_t n = 0, with_effect = 0;
    double previous = 1e300;
    while (std::getline(lines, line)) {
        const auto o = boost::json::parse(line).as_object();
        const double e = std::abs(o.at("estimate").as_double());
        CHECK(e <= previous);
        previous = e;
        with_effect += o.contains("effect");
        ++n;
    }
    CHECK(n == atp.at("units").to_number<std::size_t>());
    CHECK(with_effect == 20);
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

double metric_value(const fs::path& dir) { return read_json(dir / "manifest.json").at("metric").at("value").as_double(); }

// Rung: interventions. Integrated gradients are complete: patching the embeddings
// (before_layer 0) at every prompt position turns the clean run into the corrupted one,
// so the estimates summed over every position equal M(corrupt) - M(clean).
TEST_CASE("--method ig: the estimates of before_layer 0 sum to M(corrupt) - M(clean)") {
    const test::TempDir tmp;
    const std::string clean = "Once upon a time, there was a little girl named Lily";
    const std::string corrupt = "Once upon a time, there was a little boy named Lily";
    const std::string common = " --target '. She' --stages before_layer --layers 0 --out ";
    const auto ig = test::run_command(attribute("--prompt " + test::shell_quote(clean) + " --corrupt " +
                                                test::shell_quote(corrupt) + " --method ig --steps 64" + common +
                                                test::shell_quote((tmp.path() / "ig").string())) + " 2>&1");
    REQUIRE_MESSAGE(ig.exit_code == 0, ig.output);
    const auto other = test::run_command(
        attribute("--prompt " + test::shell_quote(corrupt) + common + test::shell_quote((tmp.path() / "c").string())) + " 2>&1");
    REQUIRE_MESSAGE(other.exit_code == 0, other.output);
    std::ifstream lines(tmp.path() / "ig" / "attribution.jsonl");
    std::string line;
    double sum = 0;
    while (std::getline(lines, line)) sum += boost::json::parse(line).at("estimate").as_double();
    const double expected = metric_value(tmp.path() / "c") - metric_value(tmp.path() / "ig");
    CAPTURE(sum);
    CAPTURE(expected);
    CHECK(std::abs(sum - expected) <= 1e-3 * std::abs(expected));
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

std::string read_bytes(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string joined_ids(const boost::json::value& ids) {
    std::string out;
    for (const auto& id : ids.as_array()) out += (out.empty() ? "" : ",") + boost::json::serialize(id);
    return out;
}

// --ids is the prompt as the ids its text tokenizes to (BOS included): the same metric,
// gradients and estimates, byte for byte; an id outside the vocabulary is refused by index.
TEST_CASE("ember attribute --ids and --corrupt-ids: the text's attribution bit for bit, bad ids refused by index") {
    const test::TempDir tmp;
    const std::string clean = "Once upon a time, there was a little girl named Lily";
    const std::string corrupt = "Once upon a time, there was a little boy named Lily";
    const std::string common = " --target '. She' --stages after_layer,mlp_activation --layers 0,1 --out ";
    const auto text = test::run_command(attribute("--prompt " + test::shell_quote(clean) + " --corrupt " +
                                                  test::shell_quote(corrupt) + common +
                                                  test::shell_quote((tmp.path() / "text").string())) + " 2>&1");
    REQUIRE_MESSAGE(text.exit_code == 0, text.output);
    const boost::json::object m = read_json(tmp.path() / "text" / "manifest.json");
    const std::string ids = joined_ids(m.at("tokenizer").at("token_ids"));
    const std::string corrupt_ids = joined_ids(m.at("attribution_patching").at("corrupt_token_ids"));

    const auto by_ids = test::run_command(attribute("--ids " + ids + " --corrupt-ids " + corrupt_ids + common +
                                                    test::shell_quote((tmp.path() / "ids").string())) + " 2>&1");
    REQUIRE_MESSAGE(by_ids.exit_code == 0, by_ids.output);
    const boost::json::object mi = read_json(tmp.path() / "ids" / "manifest.json");
    CHECK(mi.at("metric").at("value").as_double() == m.at("metric").at("value").as_double());
    CHECK(mi.at("metric").at("evaluations") == m.at("metric").at("evaluations"));
    CHECK(mi.at("tokenizer").at("token_ids") == m.at("tokenizer").at("token_ids"));
    CHECK(mi.at("request").at("ids").as_array().size() == m.at("tokenizer").at("token_ids").as_array().size());
    std::size_t compared = 0;
    for (const auto& e : m.at("tensors").as_array()) {
        const std::string file(e.at("file").as_string());
        CAPTURE(file);
        CHECK(read_bytes(tmp.path() / "ids" / file) == read_bytes(tmp.path() / "text" / file));
        ++compared;
    }
    CHECK(compared == 2 * 2 * 2);  // two stages, two layers, gradient and activation
    CHECK(read_bytes(tmp.path() / "ids" / "attribution.jsonl") == read_bytes(tmp.path() / "text" / "attribution.jsonl"));
    CHECK(test::run_command(std::string(EMBER_BINARY) + " verify " + test::shell_quote((tmp.path() / "ids").string())).exit_code == 0);

    const std::string out = " --target '. She' --out " + test::shell_quote((tmp.path() / "bad").string());
    const auto outside = test::run_command(attribute("--ids 1,999999,5" + out) + " 2>&1");
    CHECK(outside.exit_code == 1);
    CHECK(outside.output.find("--ids: id 999999 (index 1) is not in the vocabulary of 512 tokens") != std::string::npos);
    const auto corrupt_outside = test::run_command(attribute("--ids " + ids + " --corrupt-ids 1,2,70000" + out) + " 2>&1");
    CHECK(corrupt_outside.exit_code == 1);
    CHECK(corrupt_outside.output.find("--corrupt-ids: id 70000 (index 2) is not in the vocabulary") != std::string::npos);
    const auto malformed = test::run_command(attribute("--ids 1,x" + out) + " 2>&1");
    CHECK(malformed.exit_code == 2);
    CHECK(malformed.output.find("--ids 1,x: 'x' (item 1) is not a token id") != std::string::npos);
    const auto both = test::run_command(attribute("--ids 1,2 --prompt hi" + out) + " 2>&1");
    CHECK(both.exit_code == 2);
    CHECK(!fs::exists(tmp.path() / "bad"));
}

}  // namespace
}  // namespace ember
