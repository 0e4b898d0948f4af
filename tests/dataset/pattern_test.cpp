// Rung: activation-reference. attention_pattern in a dataset run: every sample's rows are
// the pattern over its own KV positions only, bit for bit what a single-prompt `ember
// extract` of the same text and selection writes ([rows, n_head, n_kv]: the dataset's
// array is [R, n_head, longest n_kv]), then zeros up to the longest sample; `--batch-tokens 1` and the default give
// identical bytes; on both routes, Gemma 4 with a sliding window and shared KV included.
#include <doctest/doctest.h>
#include <ember/npy.hpp>
#include <fmt/format.h>

#include <boost/json.hpp>

#include <filesystem>

#include "dataset/dataset_support.hpp"
#include "support/temp_dir.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;

struct PatternSample {
    const char* text;
    const char* select;  // the sample's own spec
};

const PatternSample kSamples[] = {
    {"كتب الطالب الدرس في المكتبة", "all"},
    {"ثم ذهب", "all"},
    {"The quick brown fox: 3 + 4 = 7, naïve café 🦊", "substring:fox"},
    {"ثم كتب الطالب رسالة طويلة إلى المعلم", "substring:كتب:last"},
};

CommandResult extract(const std::string& args) {
    const CommandResult r = ember("extract --threads 1 " + args);
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    return r;
}

void check_patterns(const std::string& model, const std::string& route) {
    TempDir dir;
    std::string lines;
    for (const auto& s : kSamples) lines += jsonl_line(s.text, {{"select", s.select}});
    const fs::path data = dir.path() / "d.jsonl";
    write_all(data, lines);
    const std::string common = fmt::format("--model {} --route {} --stages attention_pattern,after_layer --layers all",
                                           shell_quote(model_file(model).string()), route);
    extract(fmt::format("{} --dataset {} --out {}", common, shell_quote(data.string()),
                        shell_quote((dir.path() / "packed").string())));
    extract(fmt::format("{} --dataset {} --out {} --batch-tokens 1", common, shell_quote(data.string()),
                        shell_quote((dir.path() / "alone").string())));
    CHECK(run_files(dir.path() / "packed") == run_files(dir.path() / "alone"));

    const auto manifest = boost::json::parse(read_all(dir.path() / "packed/manifest.json")).as_object();
    const auto samples = read_jsonl(dir.path() / "packed/samples.jsonl");
    REQUIRE(samples.size() == std::size(kSamples));
    std::size_t patterns = 0;
    for (const auto& t : manifest.at("tensors").as_array()) {
        if (t.at("stage").as_string() != "attention_pattern") continue;
        ++patterns;
        const std::string file(t.at("file").as_string());
        CAPTURE(file);
        const auto all = npy::read(dir.path() / "packed" / file);
        REQUIRE(all.shape.size() == 3);  // [rows, n_head, longest n_kv]
        CHECK(t.at("layout").as_string() == "[rows, n_head, n_kv]");
        const std::size_t n_head = all.shape.at(1);
        const std::size_t width = all.shape.at(2);
        for (std::size_t i = 0; i < samples.size(); ++i) {
            CAPTURE(kSamples[i].text);
            const fs::path one = dir.path() / fmt::format("one{}", i);
            if (!fs::exists(one))
                extract(fmt::format("{} --prompt {} --select {} --out {}", common, shell_quote(kSamples[i].text),
                                    shell_quote(kSamples[i].select), shell_quote(one.string())));
            const auto single = npy::read(one / file);
            REQUIRE(single.shape.size() == 3);
            const std::size_t n_kv = single.shape.at(2);
            const std::size_t first = samples[i].at("first_row").to_number<std::size_t>();
            const std::size_t count = samples[i].at("row_count").to_number<std::size_t>();
            REQUIRE(single.shape.at(0) == count);
            REQUIRE(single.shape.at(1) == n_head);
            REQUIRE(n_kv <= width);
            const auto mine = rows_of(all, first, count);
            std::vector<float> own, beyond;
            for (std::size_t r = 0; r < count * n_head; ++r) {  // each (row, head)
                own.insert(own.end(), mine.begin() + r * width, mine.begin() + r * width + n_kv);
                beyond.insert(beyond.end(), mine.begin() + r * width + n_kv, mine.begin() + (r + 1) * width);
            }
            CHECK(same_bits(own, single.values));
            CHECK(beyond == std::vector<float>(beyond.size(), 0.0f));
        }
    }
    CHECK(patterns == manifest.at("tensor_contract").at("layers").as_array().size());
    const CommandResult verified = ember(fmt::format("verify {}", shell_quote((dir.path() / "packed").string())));
    CHECK_MESSAGE(verified.exit_code == 0, verified.output);
}

}  // namespace

TEST_CASE("attention_pattern in a dataset run equals each sample's single-prompt extraction, reference route") {
    for (const char* model : {"stories260K", "synth-qwen3-q8_0", "synth-gemma4-e-q8_0"}) {
        CAPTURE(model);
        check_patterns(model, "reference");
    }
}

TEST_CASE("attention_pattern in a dataset run equals each sample's single-prompt extraction, fast route") {
    if (test::fast_route_missing()) return;
    for (const char* model : {"synth-llama3-q8_0", "synth-gemma4-q8_0"}) {
        CAPTURE(model);
        check_patterns(model, "fast");
    }
}

}  // namespace ember::test
