// Rungs: activation-reference (batch invariance: packing several samples into one prefill
// evaluation changes no bit of any array, for --batch-tokens 1, the default and a prime,
// threads 1 and 2, on every family including Gemma 4's sliding window and shared KV; nor
// does leaving out the rows after a sample's last selected one),
// golden logits (target scoring equals the log-softmax of the full logits of the joined
// text, computed here from single-prompt `--logits all`) and interventions (experiments
// see each sample alone, in order, and a strict failure names the sample).
#include <doctest/doctest.h>
#include <ember/npy.hpp>
#include <fmt/format.h>

#include <boost/json.hpp>

#include <cmath>
#include <filesystem>

#include "dataset/dataset_support.hpp"
#include "support/temp_dir.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

std::string dataset_lines() {
    std::string lines;
    const char* const texts[] = {"كتب الطالب الدرس في المكتبة", "Once upon a time, there was a little girl",
                                 "The quick brown fox: 3 + 4 = 7, naïve café 🦊", "درس", "ثم كتب الطالب رسالة طويلة إلى المعلم",
                                 "a b c d e f g h i j k l m n o p"};
    for (int i = 0; i < 12; ++i) lines += jsonl_line(texts[i % 6], {{"id", i}});
    return lines;
}

std::string run(const std::string& model, const fs::path& data, const fs::path& out, const std::string& options) {
    const CommandResult r = ember(fmt::format("extract --model {} --dataset {} --out {} {}",
                                              shell_quote(model_file(model).string()), shell_quote(data.string()),
                                              shell_quote(out.string()), options));
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    return r.output;
}

// Every array of a dataset run with `--select SELECT` is the same for each batch size and
// thread count as with one sample per evaluation.
void check_batch_invariance(const char* model, const char* select) {
    CAPTURE(model);
    CAPTURE(select);
    TempDir dir;
    const fs::path data = dir.path() / "d.jsonl";
    write_all(data, dataset_lines());
    const std::string stages = fmt::format(
        "--select {} --stages before_layer,after_attention,after_mlp,after_layer,before_logits --logits selected", select);
    run(model, data, dir.path() / "one", stages + " --threads 1 --batch-tokens 1");
    const auto expected = run_files(dir.path() / "one");
    for (const char* options : {"--threads 1", "--threads 2", "--threads 1 --batch-tokens 37",
                                "--threads 2 --batch-tokens 37", "--threads 2 --batch-tokens 1"}) {
        CAPTURE(options);
        const fs::path out = dir.path() / "other";
        run(model, data, out, stages + " " + options);
        const auto files = run_files(out);
        REQUIRE(files.size() == expected.size());
        for (std::size_t i = 0; i < files.size(); ++i) CHECK_MESSAGE(files[i] == expected[i], files[i].first);
        fs::remove_all(out);
    }
}

}  // namespace

TEST_CASE("batch invariance: --batch-tokens 1, the default and a prime, threads 1 and 2, give identical bytes") {
    for (const char* model : kDatasetModels) check_batch_invariance(model, "all");
}

// A float LM head sums one row in another order than several (llama.cpp's tinyBLAS and
// vec_dot), so a packed evaluation gives each sample's logits exactly the rows an
// evaluation of it alone computes: here only the last (the F32 heads of these two).
TEST_CASE("batch invariance of the last row's logits with a float LM head (fast route)") {
    for (const char* model : {"stories260K", "llama-2-tiny-random"}) check_batch_invariance(model, "last");
}

TEST_CASE("batch invariance on the reference route, Gemma 4 with shared KV and a sliding window") {
    TempDir dir;
    const fs::path data = dir.path() / "d.jsonl";
    write_all(data, dataset_lines());
    const std::string common = "--route reference --select all --stages after_layer --logits selected";
    run("synth-gemma4-e-q8_0", data, dir.path() / "one", common + " --threads 1 --batch-tokens 1");
    run("synth-gemma4-e-q8_0", data, dir.path() / "packed", common + " --threads 2 --batch-tokens 101");
    CHECK(run_files(dir.path() / "one") == run_files(dir.path() / "packed"));
}

// Without logits, a target, attention patterns or experiments, a sample's rows after its
// last selected one are not evaluated: every array is still the bytes of the whole
// evaluation (`--evaluate whole`, or `--logits selected`, which reads the last rows), and
// samples.jsonl and the manifest say how many rows were evaluated.
TEST_CASE("rows after a sample's last selected one are not evaluated, and no selected row changes a bit") {
    for (const char* model : kDatasetModels) {
        for (const char* select : {"first", "substring:الطالب"}) {
            CAPTURE(model);
            CAPTURE(select);
            TempDir dir;
            const fs::path data = dir.path() / "d.jsonl";
            write_all(data, dataset_lines());
            const std::string common = fmt::format(
                "--select {} --on-empty skip --stages before_layer,after_attention,after_mlp,after_layer --threads 2",
                shell_quote(select));
            run(model, data, dir.path() / "cut", common);
            run(model, data, dir.path() / "whole", common + " --evaluate whole");
            run(model, data, dir.path() / "logits", common + " --logits selected");
            for (const auto& [name, bytes] : run_files(dir.path() / "cut")) {
                if (name == "samples.jsonl") continue;
                CHECK_MESSAGE(bytes == read_all(dir.path() / "whole" / name), name);
                CHECK_MESSAGE(bytes == read_all(dir.path() / "logits" / name), name);
            }
            CHECK(read_all(dir.path() / "whole" / "samples.jsonl") == read_all(dir.path() / "logits" / "samples.jsonl"));
            const auto rows = read_jsonl(dir.path() / "cut" / "rows.jsonl");
            const auto cut = read_jsonl(dir.path() / "cut" / "samples.jsonl");
            const auto whole = read_jsonl(dir.path() / "whole" / "samples.jsonl");
            REQUIRE(cut.size() == whole.size());
            std::size_t evaluated = 0, shorter = 0;
            for (std::size_t i = 0; i < cut.size(); ++i) {
                CAPTURE(i);
                const std::size_t n = cut[i].at("row_count").to_number<std::size_t>();
                const std::size_t first = cut[i].at("first_row").to_number<std::size_t>();
                const std::size_t expected = n == 0 ? 0 : rows[first + n - 1].at("position").to_number<std::size_t>() + 1;
                CHECK(cut[i].at("evaluated_tokens").to_number<std::size_t>() == expected);
                CHECK(whole[i].at("evaluated_tokens").to_number<std::size_t>() == (n == 0 ? 0 : whole[i].at("n_tokens").to_number<std::size_t>()));
                evaluated += expected;
                shorter += expected < cut[i].at("n_tokens").to_number<std::size_t>() ? 1 : 0;
            }
            CHECK(shorter > 0);
            const json::value manifest = json::parse(read_all(dir.path() / "cut" / "manifest.json"));
            CHECK(manifest.at("dataset").at("evaluated_tokens").to_number<std::size_t>() == evaluated);
        }
    }
}

TEST_CASE("target scoring equals the log-softmax of the joined text's full logits") {
    for (const char* model : {"stories260K", "synth-llama3-q8_0", "synth-gemma4-q8_0"}) {
        CAPTURE(model);
        TempDir dir;
        const fs::path data = dir.path() / "d.jsonl";
        const std::vector<std::pair<std::string, std::string>> pairs = {
            {"كتب الطالب", " الدرس في المكتبة"}, {"Once upon a time,", " there was a little girl"}, {"fox", " 🦊"}};
        std::string lines = jsonl_line("no target here");
        for (const auto& [prompt, target] : pairs) lines += jsonl_line(prompt, {{"target", target}});
        write_all(data, lines);
        run(model, data, dir.path() / "ds", "--threads 2 --select last --layers 0");
        const auto targets = read_jsonl(dir.path() / "ds" / "targets.jsonl");
        const npy::Array sums = npy::read(dir.path() / "ds" / "targets.npy");
        REQUIRE(targets.size() == pairs.size());
        REQUIRE(sums.shape == std::vector<std::size_t>{pairs.size() + 1});
        CHECK(std::isnan(sums.values[0]));
        for (std::size_t i = 0; i < pairs.size(); ++i) {
            CAPTURE(i);
            const std::string joined = pairs[i].first + pairs[i].second;
            const fs::path single = dir.path() / fmt::format("single{}", i);
            const CommandResult r = ember(fmt::format("extract --model {} --prompt {} --out {} --threads 1 --layers 0 --logits all",
                                                      shell_quote(model_file(model).string()), shell_quote(joined),
                                                      shell_quote(single.string())));
            REQUIRE_MESSAGE(r.exit_code == 0, r.output);
            const npy::Array logits = npy::read(single / "logits.npy");
            const json::array ids = json::parse(read_all(single / "manifest.json")).at("tokenizer").at("token_ids").as_array();
            const json::array& tokens = targets[i].at("tokens").as_array();
            const std::size_t n = ids.size(), V = logits.shape[1];
            REQUIRE(tokens.size() >= 1);
            double sum = 0;
            for (std::size_t t = 0; t < tokens.size(); ++t) {
                const std::size_t j = n - tokens.size() + t;  // the target's tokens end the joined text
                CHECK(tokens[t].at("id").as_int64() == ids[j].as_int64());
                CHECK(tokens[t].at("position").to_number<std::size_t>() == j);
                long double z = 0;
                for (std::size_t v = 0; v < V; ++v) z += std::exp(static_cast<long double>(logits.values[(j - 1) * V + v]));
                const double expected = static_cast<double>(logits.values[(j - 1) * V + ids[j].to_number<std::size_t>()] - std::log(z));
                CHECK(tokens[t].at("logprob").as_double() == doctest::Approx(expected).epsilon(1e-9));
                sum += expected;
            }
            CHECK(targets[i].at("logprob").as_double() == doctest::Approx(sum).epsilon(1e-9));
            CHECK(sums.values[i + 1] == doctest::Approx(sum).epsilon(1e-6));  // npy::read gives floats
        }
    }
}

TEST_CASE("a target token straddling the prompt's end is an error naming the sample") {
    TempDir dir;
    const fs::path data = dir.path() / "d.jsonl";
    write_all(data, jsonl_line("Once up", {{"id", "split"}, {"target", "on a time"}}));
    const CommandResult r = ember(fmt::format("extract --model {} --dataset {} --out {} --threads 1",
                                              shell_quote(model_file("synth-llama3-q8_0").string()),
                                              shell_quote(data.string()), shell_quote((dir.path() / "o").string())));
    CHECK(r.exit_code != 0);
    CHECK_MESSAGE(r.output.find(data.string() + ":1: sample split: token") != std::string::npos, r.output);
    CHECK_MESSAGE(r.output.find("straddles the end of the prompt") != std::string::npos, r.output);
}

TEST_CASE("experiments on a dataset: each sample alone and in order, a strict failure names the sample") {
    TempDir dir;
    const fs::path data = dir.path() / "d.jsonl";
    write_all(data, jsonl_line("Once upon a time", {{"id", "a"}}) + jsonl_line("there was", {{"id", "b"}}) +
                        jsonl_line("a little girl named Lily", {{"id", "c"}}));
    const fs::path recorder = fs::path(EMBER_TEST_PLUGIN_DIR) / "librecorder.so";
    const std::string out = run("stories260K", data, dir.path() / "rec",
                                fmt::format("--threads 1 --layers 0 --batch-tokens 512 --experiment {}",
                                            shell_quote(recorder.string())));
    // on_model_loaded once; per sample: before_prefill, its stages (its own rows, start 0), completion with 0 tokens.
    std::vector<std::string> calls;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);)
        if (line.find("[recorder]") == 0) calls.push_back(line);
    std::size_t loaded = 0, prefills = 0, completes = 0;
    std::vector<std::string> counts;
    for (const std::string& c : calls) {
        loaded += c.find(" on_model_loaded ") != std::string::npos;
        if (c.find(" before_prefill ") != std::string::npos) {
            ++prefills;
            counts.push_back(c.substr(c.find("count="), c.find(' ', c.find("count=")) - c.find("count=")));
            CHECK(c.find("start=0") != std::string::npos);
        }
        if (c.find(" before_layer ") != std::string::npos) CHECK(c.find("start=0") != std::string::npos);
        if (c.find(" on_generation_complete ") != std::string::npos) {
            ++completes;
            CHECK(c.find("generated=0") != std::string::npos);
        }
    }
    CHECK(loaded == 1);
    CHECK(prefills == 3);
    CHECK(completes == 3);
    const auto samples = read_jsonl(dir.path() / "rec" / "samples.jsonl");
    REQUIRE(counts.size() == 3);
    for (std::size_t i = 0; i < 3; ++i) CHECK(counts[i] == fmt::format("count={}", samples[i].at("n_tokens").as_int64()));
    // The arrays are what the run without the (read-only) recorder writes.
    run("stories260K", data, dir.path() / "plain", "--threads 1 --layers 0");
    CHECK(run_files(dir.path() / "rec") == run_files(dir.path() / "plain"));

    const fs::path failing = fs::path(EMBER_TEST_PLUGIN_DIR) / "libfailing.so";
    const CommandResult r = ember(fmt::format("extract --model {} --dataset {} --out {} --threads 1 --experiment {}",
                                              shell_quote(model_file("stories260K").string()), shell_quote(data.string()),
                                              shell_quote((dir.path() / "fail").string()), shell_quote(failing.string())));
    CHECK(r.exit_code != 0);
    CHECK_MESSAGE(r.output.find(data.string() + ":1: sample a: ") != std::string::npos, r.output);
    CHECK(!fs::exists(dir.path() / "fail" / "manifest.json"));
}

}  // namespace ember::test
