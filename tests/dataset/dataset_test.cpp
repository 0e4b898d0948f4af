// Rungs: activation-reference (a dataset's rows are the single-prompt extraction's, bit for
// bit, and llama.cpp's f32 goldens within the single-prompt tolerance) and smoke (malformed
// datasets refused by file:line before anything is written, empty selections named by
// sample id and line, --on-empty skip, resuming after an interruption at several points
// ends byte-identical, `ember verify` refuses an unfinished run).
#include <doctest/doctest.h>
#include <ember/npy.hpp>
#include <fmt/format.h>

#include <boost/json.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>

#include "common/error.hpp"
#include "config/run_config.hpp"
#include "dataset/dataset_support.hpp"
#include "extract/dataset_extraction.hpp"
#include "gguf/gguf_file.hpp"
#include "models/model_config.hpp"
#include "support/golden.hpp"
#include "support/temp_dir.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

std::string extract_single(const std::string& model, const fs::path& prompt_file, const fs::path& out,
                           const std::string& options) {
    return fmt::format("extract --model {} --file {} --out {} {}", shell_quote(model_file(model).string()),
                       shell_quote(prompt_file.string()), shell_quote(out.string()), options);
}

std::string extract_dataset(const std::string& model, const fs::path& dataset, const fs::path& out,
                            const std::string& options) {
    return fmt::format("extract --model {} --dataset {} --out {} {}", shell_quote(model_file(model).string()),
                       shell_quote(dataset.string()), shell_quote(out.string()), options);
}

config::RunConfig dataset_request(const std::string& model, const fs::path& dataset, const fs::path& out) {
    config::RunConfig c;
    c.model.path = model_file(model);
    c.model.threads = 1;
    c.dataset.path = dataset;
    c.dataset.select = "all";
    c.dataset.batch_tokens = 16;
    c.output.dir = out;
    c.output.extract = true;
    c.output.stages = {"after_attention", "after_layer"};
    return c;
}

}  // namespace

TEST_CASE("golden: a dataset's rows are each prompt's single-prompt extraction, bit for bit, and match llama.cpp") {
    for (const char* model : kDatasetModels) {
        CAPTURE(model);
        const auto file = gguf::File::open(model_file(model));
        const models::ModelConfig config = models::load_model_config(file);
        const Golden golden = load_golden(f32_golden_path(model));
        const double tol = f32_golden_tolerance(models::family_name(config.family));
        TempDir dir;
        // The golden prompts, with other samples between them.
        std::string lines;
        for (const GoldenPrompt& g : golden.prompts) {
            lines += jsonl_line("ثم كتب رسالة إلى المعلم", {{"id", "filler"}});
            lines += jsonl_line(g.text);
        }
        write_all(dir.path() / "d.jsonl", lines);
        const std::string common = "--route reference --threads 2 --stages after_layer,before_logits";
        const CommandResult r = ember(extract_dataset(model, dir.path() / "d.jsonl", dir.path() / "ds", common + " --select all"));
        REQUIRE_MESSAGE(r.exit_code == 0, r.output);
        const CommandResult v = ember(fmt::format("verify {}", shell_quote((dir.path() / "ds").string())));
        CHECK_MESSAGE(v.exit_code == 0, v.output);
        const auto samples = read_jsonl(dir.path() / "ds" / "samples.jsonl");
        REQUIRE(samples.size() == 2 * golden.prompts.size());

        for (std::size_t p = 0; p < golden.prompts.size(); ++p) {
            const GoldenPrompt& g = golden.prompts[p];
            CAPTURE(p);
            write_all(dir.path() / "prompt.txt", g.text);
            const fs::path single = dir.path() / fmt::format("single{}", p);
            const CommandResult s = ember(extract_single(model, dir.path() / "prompt.txt", single, common));
            REQUIRE_MESSAGE(s.exit_code == 0, s.output);
            const json::object& sample = samples[2 * p + 1];
            const std::size_t first = sample.at("first_row").to_number<std::size_t>();
            const std::size_t count = sample.at("row_count").to_number<std::size_t>();
            REQUIRE(count == g.tokens.size());
            for (std::uint32_t l = 0; l < config.n_layers; ++l) {
                const std::string name = fmt::format("after_layer.layer{}.npy", l);
                const std::vector<float> rows = rows_of(npy::read(dir.path() / "ds" / name), first, count);
                CHECK_MESSAGE(same_bits(rows, npy::read(single / name).values), name);
                CHECK(relative_error(rows, g.hidden.at(fmt::format("l_out-{}", l)).values) <= tol);
            }
            const std::vector<float> normed = rows_of(npy::read(dir.path() / "ds" / "before_logits.npy"), first, count);
            CHECK(same_bits(normed, npy::read(single / "before_logits.npy").values));
            CHECK(relative_error(normed, g.hidden.at("result_norm").values) <= tol);
            const json::array& ids = sample.at("token_ids").as_array();
            REQUIRE(ids.size() == g.tokens.size());
            for (std::size_t i = 0; i < ids.size(); ++i) CHECK(ids[i].as_int64() == g.tokens[i]);
        }
    }
}

// Rung: activation-reference (the inner stages of a packed dataset evaluation are each
// prompt's own single-prompt extraction, bit for bit, at the layer's own width).
TEST_CASE("a dataset's head_outputs and mlp_activation rows are each prompt's, at the layer's width") {
    const std::string model = "stories260K";
    const auto file = gguf::File::open(model_file(model));
    const models::ModelConfig config = models::load_model_config(file);
    TempDir dir;
    const std::vector<std::string> texts = {"كتب الطالب الدرس", "ثم كتب رسالة إلى المعلم", "الطالب يدرس في المكتبة"};
    std::string lines;
    for (const std::string& t : texts) lines += jsonl_line(t);
    write_all(dir.path() / "d.jsonl", lines);
    const std::string common = "--route reference --threads 1 --stages head_outputs,mlp_activation --layers all";
    const CommandResult r = ember(extract_dataset(model, dir.path() / "d.jsonl", dir.path() / "ds", common + " --select all"));
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    const auto samples = read_jsonl(dir.path() / "ds" / "samples.jsonl");
    REQUIRE(samples.size() == texts.size());
    for (std::size_t i = 0; i < texts.size(); ++i) {
        CAPTURE(i);
        write_all(dir.path() / "prompt.txt", texts[i]);
        const fs::path single = dir.path() / fmt::format("single{}", i);
        const CommandResult s = ember(extract_single(model, dir.path() / "prompt.txt", single, common));
        REQUIRE_MESSAGE(s.exit_code == 0, s.output);
        const std::size_t first = samples[i].at("first_row").to_number<std::size_t>();
        const std::size_t count = samples[i].at("row_count").to_number<std::size_t>();
        for (std::uint32_t l = 0; l < config.n_layers; ++l) {
            const models::LayerConfig& L = config.layers[l];
            for (const auto& [stage, width] : {std::pair<std::string, std::size_t>{"head_outputs", L.n_head * L.head_dim},
                                               std::pair<std::string, std::size_t>{"mlp_activation", L.n_ff}}) {
                const std::string name = fmt::format("{}.layer{}.npy", stage, l);
                const npy::Array ds = npy::read(dir.path() / "ds" / name);
                REQUIRE(ds.shape.size() == 2);
                CHECK_MESSAGE(ds.shape[1] == width, name);
                CHECK_MESSAGE(same_bits(rows_of(ds, first, count), npy::read(single / name).values), name);
            }
        }
    }
}

TEST_CASE("rows.jsonl and samples.jsonl say which sample, position, token and spec each row is") {
    TempDir dir;
    write_all(dir.path() / "d.jsonl",
              jsonl_line("كتب الطالب الدرس ثم كتب رسالة", {{"id", "a"}, {"template", 3}}) +
                  jsonl_line("The fox and the fox", {{"select", {{"substring", "fox"}, {"occurrence", 2}}}}) +
                  "\n" + jsonl_line("one two three", {{"select", "-1"}}));
    const CommandResult r = ember(extract_dataset("synth-qwen3-q8_0", dir.path() / "d.jsonl", dir.path() / "out",
                                                  "--threads 1 --layers 1 --select substring:كتب#2:last"));
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    const auto rows = read_jsonl(dir.path() / "out" / "rows.jsonl");
    const auto samples = read_jsonl(dir.path() / "out" / "samples.jsonl");
    REQUIRE(samples.size() == 3);
    CHECK(samples[0].at("id").as_string() == "a");
    CHECK(samples[0].at("metadata").at("template").as_int64() == 3);
    CHECK(samples[1].at("id").as_int64() == 2);  // the line number
    CHECK(samples[2].at("id").as_int64() == 4);  // the blank line 3 is no sample
    CHECK(samples[2].at("index").as_int64() == 2);
    std::size_t expected_rows = 0;
    for (const auto& s : samples) {
        CHECK(s.at("first_row").to_number<std::size_t>() == expected_rows);
        expected_rows += s.at("row_count").to_number<std::size_t>();
    }
    REQUIRE(rows.size() == expected_rows);
    for (std::size_t i = 0; i < rows.size(); ++i) CHECK(rows[i].at("row").to_number<std::size_t>() == i);
    CHECK(rows[0].at("select").as_string() == "substring:كتب#2:last");
    // The row's byte span lies in the second كتب.
    const std::string text = samples[0].at("text").as_string().c_str();
    const std::size_t second = text.find("كتب", 1);
    CHECK(rows[0].at("byte_end").to_number<std::size_t>() == second + std::string("كتب").size());
    CHECK(rows.back().at("select").as_string() == "-1");
    CHECK(rows.back().at("position").to_number<std::size_t>() + 1 == samples[2].at("n_tokens").to_number<std::size_t>());
    const npy::Array a = npy::read(dir.path() / "out" / "after_layer.layer1.npy");
    CHECK(a.shape == std::vector<std::size_t>{rows.size(), 64});
}

TEST_CASE("a malformed dataset line is refused naming file and line before anything is written") {
    struct Case {
        std::string line;
        std::string error;
    };
    const Case cases[] = {
        {"{\"text\": ", "not valid JSON"},
        {"{\"text\": \"a\", \"text\": \"b\"}", "the key \"text\" appears twice in one object"},
        {"{\"text\": \"a\", \"meta\": {\"k\": 1, \"k\": 2}}", "the key \"k\" appears twice in one object"},
        {"[1, 2]", "a dataset line must be a JSON object"},
        {"{\"id\": 3}", "the sample has no \"text\""},
        {"{\"text\": 3}", "\"text\" must be a string"},
        {"{\"text\": \"\"}", "\"text\" is empty"},
        {"{\"text\": \"a\", \"id\": [1]}", "\"id\" must be a string or an integer"},
        {"{\"text\": \"a\", \"select\": \"bytes:4-2\"}", "the range is empty"},
        {"{\"text\": \"a\", \"select\": {\"nth\": 1}}", "unknown key 'nth'"},
        {"{\"text\": \"a\", \"target\": 5}", "\"target\" must be a non-empty string"},
        {"\xff\xfe", "not valid UTF-8"},
    };
    for (const Case& c : cases) {
        CAPTURE(c.line);
        TempDir dir;
        const fs::path data = dir.path() / "bad.input.jsonl";
        write_all(data, jsonl_line("fine") + "\n" + c.line + "\n");
        const CommandResult r = ember(extract_dataset("stories260K", data, dir.path() / "out", "--threads 1"));
        CHECK(r.exit_code != 0);
        CHECK_MESSAGE(r.output.find(data.string() + ":3: ") != std::string::npos, r.output);
        CHECK_MESSAGE(r.output.find(c.error) != std::string::npos, r.output);
        CHECK(!fs::exists(dir.path() / "out"));
    }
}

TEST_CASE("a byte order mark at the start of a dataset is named, in .jsonl and in .txt") {
    // Issue 24: a .txt dataset took the BOM into its first prompt, a .jsonl one said only
    // "syntax error".
    for (const char* name : {"bom.input.jsonl", "bom.txt"}) {
        TempDir dir;
        const fs::path data = dir.path() / name;
        write_all(data, std::string("\xEF\xBB\xBF") + (fs::path(name).extension() == ".txt" ? "Once upon a time\n"
                                                                                            : jsonl_line("Once")));
        const CommandResult r = ember(extract_dataset("stories260K", data, dir.path() / "out", "--threads 1"));
        CHECK(r.exit_code == 1);
        CHECK_MESSAGE(r.output.find(data.string() + ":1: the file starts with a UTF-8 byte order mark") !=
                          std::string::npos,
                      r.output);
        CHECK(!fs::exists(dir.path() / "out"));
    }
}

TEST_CASE("samples.jsonl keeps metadata strict: non-finite numbers as null with a marker, big integers exact") {
    // Issue 24: 1e999 metadata was written as Infinity (no strict parser reads it) and an
    // integer beyond 64 bits as a rounded double. TempDir's strict check reads every file.
    TempDir dir;
    write_all(dir.path() / "d.input.jsonl", "{\"text\": \"Once upon\", \"big\": 123456789012345678901234, \"inf\": 1e999, "
                                      "\"ninf\": -1e999, \"u64\": 18446744073709551615, \"list\": [1e999, 2], "
                                      "\"bigs\": [1, 123456789012345678901234, [2, -98765432109876543210987]], "
                                      "\"own_bigint\": \"kept\", \"own\": 123456789012345678901234}\n");
    const CommandResult r = ember(extract_dataset("stories260K", dir.path() / "d.input.jsonl", dir.path() / "out",
                                                  "--threads 1 --layers 0 --select last"));
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    const std::string text = read_all(dir.path() / "out" / "samples.jsonl");
    CHECK(text.find("Infinity") == std::string::npos);
    const auto samples = read_jsonl(dir.path() / "out" / "samples.jsonl");
    REQUIRE(samples.size() == 1);
    const json::object& m = samples[0].at("metadata").as_object();
    CHECK(m.at("big") == "123456789012345678901234");
    CHECK(m.at("big_bigint") == true);  // the marker tells it from a string of digits
    CHECK(m.at("bigs").as_array()[1] == "123456789012345678901234");
    CHECK(m.at("bigs").as_array()[2].as_array()[1] == "-98765432109876543210987");
    CHECK(m.at("bigs_bigint") == json::parse(R"({"1": true, "2.1": true})"));
    CHECK(m.at("own_bigint") == "kept");  // a member of the line is never replaced by a marker
    CHECK(!m.contains("u64_bigint"));
    CHECK(m.at("inf").is_null());
    CHECK(m.at("inf_nonfinite") == "inf");
    CHECK(m.at("ninf_nonfinite") == "-inf");
    CHECK(m.at("u64").as_uint64() == 18446744073709551615ull);
    CHECK(m.at("list").as_array()[0].is_null());
    CHECK(m.at("list_nonfinite").at("0") == "inf");
    CHECK(ember("verify " + shell_quote((dir.path() / "out").string())).exit_code == 0);
}

TEST_CASE("a sample whose selection is empty is an error naming it, or skipped with --on-empty skip") {
    TempDir dir;
    const fs::path data = dir.path() / "d.jsonl";
    write_all(data, jsonl_line("كتب الطالب") + jsonl_line("لا شيء هنا", {{"id", "s2"}}) + jsonl_line("كتب"));
    const CommandResult r = ember(extract_dataset("stories260K", data, dir.path() / "out", "--threads 1 --select substring:كتب"));
    CHECK(r.exit_code != 0);
    CHECK_MESSAGE(r.output.find(data.string() + ":2: sample s2: selection 'substring:كتب' selects nothing") !=
                      std::string::npos,
                  r.output);
    CHECK(!fs::exists(dir.path() / "out"));
    const CommandResult skip =
        ember(extract_dataset("stories260K", data, dir.path() / "out", "--threads 1 --select substring:كتب --on-empty skip"));
    REQUIRE_MESSAGE(skip.exit_code == 0, skip.output);
    const auto samples = read_jsonl(dir.path() / "out" / "samples.jsonl");
    REQUIRE(samples.size() == 3);
    CHECK(samples[1].at("skipped").is_string());
    CHECK(samples[1].at("row_count").as_int64() == 0);
    CHECK(samples[0].at("skipped").is_null());
}

TEST_CASE("an interrupted dataset run resumes after its last finished batch and ends byte-identical") {
    const extract::LoadedModel model(model_file("stories260K"), std::nullopt);
    TempDir dir;
    const fs::path data = dir.path() / "d.jsonl";
    std::string lines;
    for (int i = 0; i < 40; ++i)
        lines += jsonl_line(fmt::format("كتب الطالب {} الدرس", i), {{"target", " ok"}, {"select", i % 3 ? "all" : "last"}});
    write_all(data, lines);
    config::RunConfig c = dataset_request("stories260K", data, dir.path() / "whole");
    c.output.logit_lens = 3;
    extract::run_dataset_extraction(model, c);
    const auto whole = run_files(c.output.dir);

    for (const std::size_t stop_after : {1, 4, 9}) {
        CAPTURE(stop_after);
        c.output.dir = dir.path() / fmt::format("resumed{}", stop_after);
        extract::DatasetRunOptions options;
        std::size_t batches = 0;
        options.on_batch = [&](std::size_t) {
            if (++batches == stop_after) throw Error("simulated kill");
        };
        CHECK_THROWS_WITH_AS(extract::run_dataset_extraction(model, c, options), "simulated kill", Error);
        CHECK(!fs::exists(c.output.dir / "manifest.json"));
        const CommandResult v = ember(fmt::format("verify {}", shell_quote(c.output.dir.string())));
        CHECK(v.exit_code != 0);
        CHECK_MESSAGE(v.output.find("missing") != std::string::npos, v.output);
        // A killed process may have written part of the next batch: bytes past the resume point.
        for (const auto& e : fs::directory_iterator(c.output.dir))
            if (e.path().extension() == ".partial") std::ofstream(e.path(), std::ios::app | std::ios::binary) << "junk";
        const extract::DatasetResult r = extract::run_dataset_extraction(model, c);
        CHECK(r.resumed_samples > 0);
        CHECK(r.samples == 40);
        CHECK(run_files(c.output.dir) == whole);
        const CommandResult ok = ember(fmt::format("verify {}", shell_quote(c.output.dir.string())));
        CHECK_MESSAGE(ok.exit_code == 0, ok.output);
    }
}

TEST_CASE("kill -9 at several points: the same command again finishes the run, byte-identical") {
    TempDir dir;
    const fs::path data = dir.path() / "d.txt";
    std::string lines;
    for (int i = 0; i < 400; ++i) lines += fmt::format("Once upon a time {} there was a little girl named Lily\n", i);
    write_all(data, lines);
    const std::string options = "--threads 1 --select all --batch-tokens 32 --stages after_attention,after_mlp,after_layer";
    const auto start = std::chrono::steady_clock::now();
    const CommandResult r = ember(extract_dataset("stories260K", data, dir.path() / "whole", options));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    const auto whole = run_files(dir.path() / "whole");
    // Early (maybe before the first batch), in the middle, late.
    for (const double fraction : {0.05, 0.4, 0.75}) {
        const std::string delay = fmt::format("{:.3f}", fraction * seconds);
        CAPTURE(delay);
        const fs::path out = dir.path() / fmt::format("killed{}", fraction);
        const std::string command = fmt::format("{} {}", EMBER_BINARY, extract_dataset("stories260K", data, out, options));
        run_command(fmt::format("{} >/dev/null 2>&1 & pid=$!; sleep {}; kill -9 $pid; wait $pid", command, delay));
        if (fs::exists(out / "manifest.json")) {
            MESSAGE("the run finished before kill -9 at " << delay << " s: this point tested nothing");
            continue;
        }
        const CommandResult again = ember(extract_dataset("stories260K", data, out, options));
        REQUIRE_MESSAGE(again.exit_code == 0, again.output);
        CHECK(run_files(out) == whole);
    }
}

}  // namespace ember::test

namespace ember::test {

TEST_CASE("[dataset] in a run config is the same request as the options") {
    TempDir dir;
    const fs::path data = dir.path() / "d.jsonl";
    write_all(data, jsonl_line("كتب الطالب الدرس") + jsonl_line("ثم كتب رسالة", {{"target", " طويلة"}}));
    const std::string model = model_file("synth-qwen3-q8_0").string();
    // `options` on the command line and `dataset_keys` in [dataset] write the same files.
    const auto same_run = [&](const std::string& name, const std::string& options, const std::string& dataset_keys) {
        const CommandResult a = ember(fmt::format("extract --model {} --dataset {} --out {} --threads 1 --layers 0,1 {}",
                                                  shell_quote(model), shell_quote(data.string()),
                                                  shell_quote((dir.path() / (name + "-options")).string()), options));
        REQUIRE_MESSAGE(a.exit_code == 0, a.output);
        const fs::path config = dir.path() / (name + ".toml");
        write_all(config, fmt::format("[model]\npath = \"{}\"\nthreads = 1\n[dataset]\npath = \"d.jsonl\"\n{}[output]\n"
                                      "dir = \"{}-config\"\nlayers = [0, 1]\n",
                                      model, dataset_keys, name));
        const CommandResult b = ember(fmt::format("extract {}", shell_quote(config.string())));
        REQUIRE_MESSAGE(b.exit_code == 0, b.output);
        CHECK(run_files(dir.path() / (name + "-options")) == run_files(dir.path() / (name + "-config")));
    };
    same_run("run", "--select substring:كتب --batch-tokens 7", "select = \"substring:كتب\"\nbatch_tokens = 7\n");

    write_all(dir.path() / "bad.toml", fmt::format("[model]\npath = \"{}\"\n[dataset]\npath = \"d.jsonl\"\nselect = \"bytes:9-2\"\n", model));
    const CommandResult bad = ember(fmt::format("extract {}", shell_quote((dir.path() / "bad.toml").string())));
    CHECK(bad.exit_code != 0);
    CHECK_MESSAGE(bad.output.find("bad.toml:5:10: dataset.select: selection 'bytes:9-2': the range is empty") !=
                      std::string::npos,
                  bad.output);

    // dataset.evaluate = "whole" is --evaluate whole; a typo is refused by file, line and key.
    same_run("whole", "--select substring:كتب --evaluate whole", "select = \"substring:كتب\"\nevaluate = \"whole\"\n");
    write_all(dir.path() / "typo.toml", fmt::format("[model]\npath = \"{}\"\n[dataset]\npath = \"d.jsonl\"\nevaluate = \"al\"\n", model));
    const CommandResult typo = ember(fmt::format("extract {}", shell_quote((dir.path() / "typo.toml").string())));
    CHECK(typo.exit_code != 0);
    CHECK_MESSAGE(typo.output.find("typo.toml:5") != std::string::npos, typo.output);
    CHECK_MESSAGE(typo.output.find("evaluate") != std::string::npos, typo.output);
}

TEST_CASE("single-prompt extract --select writes the rows the spec names") {
    TempDir dir;
    const std::string text = "كتب الطالب الدرس ثم كتب رسالة";
    const std::string model = model_file("stories260K").string();
    const CommandResult all = ember(fmt::format("extract --model {} --prompt {} --out {} --threads 1 --layers 2",
                                                shell_quote(model), shell_quote(text), shell_quote((dir.path() / "all").string())));
    REQUIRE_MESSAGE(all.exit_code == 0, all.output);
    const CommandResult some = ember(fmt::format("extract --model {} --prompt {} --out {} --threads 1 --layers 2 --select {}",
                                                 shell_quote(model), shell_quote(text), shell_quote((dir.path() / "some").string()),
                                                 shell_quote("substring:كتب#2")));
    REQUIRE_MESSAGE(some.exit_code == 0, some.output);
    const json::object manifest = json::parse(read_all(dir.path() / "some" / "manifest.json")).as_object();
    const json::object& contract = manifest.at("tensor_contract").as_object();
    CHECK(contract.at("select").as_string() == "substring:كتب#2");
    const json::array& positions = contract.at("positions").as_array();
    const json::array& tokens = manifest.at("tokenizer").at("tokens").as_array();
    const std::size_t second = text.find("كتب", 1);
    REQUIRE(!positions.empty());
    const npy::Array full = npy::read(dir.path() / "all" / "after_layer.layer2.npy");
    const npy::Array chosen = npy::read(dir.path() / "some" / "after_layer.layer2.npy");
    for (std::size_t i = 0; i < positions.size(); ++i) {
        const std::size_t p = positions[i].to_number<std::size_t>();
        const json::object& t = tokens[p].as_object();
        CHECK(t.at("start").to_number<std::size_t>() < second + std::string("كتب").size());
        CHECK(t.at("end").to_number<std::size_t>() > second);
        CHECK(same_bits(rows_of(chosen, i, 1), rows_of(full, p, 1)));
    }
    const CommandResult none = ember(fmt::format("extract --model {} --prompt {} --out {} --select {}", shell_quote(model),
                                                 shell_quote(text), shell_quote((dir.path() / "none").string()),
                                                 shell_quote("substring:درس#2")));
    CHECK(none.exit_code == 1);
    CHECK(none.output.find("selects nothing") != std::string::npos);
}

}  // namespace ember::test
