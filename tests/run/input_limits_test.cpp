// Rung: smoke (hostile inputs). Every input limit of issue 13, through the CLI where a
// user meets it, each with its exact message: TOML nesting (a dotted key and arrays
// 40,000 levels deep, also through $EMBER_DEFAULTS) and size, checked before the TOML
// library sees the text; prompt files that are not regular files or are too large
// (EMBER_MAX_INPUT_BYTES); plugin log lines with escape sequences, invalid UTF-8 and
// 200,000 bytes; .npy shapes that are negative or larger than the file; --seed and
// --threads in the config's ranges; +inf logits chosen, an all -inf row an error
// naming the step.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <boost/json.hpp>

#include <fstream>
#include <set>

#include "ember/npy.hpp"
#include "ember_run.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;

const fs::path& hostile_plugin() {
    static const struct Built {
        TempDir dir;
        fs::path library;
        Built() {
            fs::copy_file(fs::path(EMBER_TEST_SOURCE_DIR) / "hostile" / "hostile.cpp", dir.path() / "hostile.cpp");
            const auto r = run_command(fmt::format("cd {} && g++ -std=c++20 -shared -fPIC -I{} hostile.cpp -o libhostile.so",
                                                   shell_quote(dir.path().string()), EMBER_SDK_INCLUDE_DIR),
                                       true);
            REQUIRE_MESSAGE(r.exit_code == 0, r.output);
            library = dir.path() / "libhostile.so";
        }
    } built;
    return built.library;
}

std::string stories(const std::string& more = "", int tokens = 4) {
    return run_config(fixture_path("models/stories260K.gguf"), "Once upon a time", tokens, more);
}

// stories(more, tokens) with `lines` added to its [generation] table.
std::string with_generation(const std::string& lines, const std::string& more = "", int tokens = 4) {
    std::string toml = stories(more, tokens);
    const std::string key = fmt::format("max_tokens = {}", tokens);
    return toml.replace(toml.find(key), key.size(), key + "\n" + lines);
}

// stories() reading its prompt from `file` instead of its text.
std::string with_prompt_file(const std::string& file) {
    std::string toml = stories();
    const std::string text = "text = 'Once upon a time'";
    return toml.replace(toml.find(text), text.size(), "file = " + toml_literal(file));
}

std::string error_of(const EmberRun& run) {
    const auto errors = run.err_lines("error: ");
    REQUIRE_MESSAGE(errors.size() == 1, run.err);
    return errors[0].substr(7);
}

const std::string kTooDeep =
    "nested deeper than 64 levels (tables, dotted keys, arrays and inline tables together); a run config needs a handful";

CommandResult ember(const std::string& args) {
    return run_command(fmt::format("{} {} 2>&1", shell_quote(EMBER_BINARY), args));
}

}  // namespace

TEST_CASE("TOML nested 40,000 levels deep is a named error, never a crash, also as the defaults file") {
    std::string dotted;
    for (int i = 0; i < 40000; ++i) dotted += "a.";
    dotted += "a = 1\n";
    {
        TempDir dir;
        const auto run = ember_run(dir, dotted);
        CHECK(run.exit_code == 1);
        CHECK(error_of(run) == "run.toml:1:128: " + kTooDeep);  // the 64th dot
    }
    {
        TempDir dir;
        write_text(dir.path() / "defaults.toml", dotted);
        const auto run = ember_run(dir, stories(), "", "EMBER_DEFAULTS=" + (dir.path() / "defaults.toml").string());
        CHECK(run.exit_code == 1);
        CHECK(error_of(run) == (dir.path() / "defaults.toml").string() + ":1:128: " + kTooDeep);
    }
    {
        TempDir dir;
        const auto run = ember_run(dir, "[model]\nx = " + std::string(40000, '[') + std::string(40000, ']') + "\n");
        CHECK(run.exit_code == 1);
        CHECK(error_of(run) == "run.toml:2:68: " + kTooDeep);  // [model] is one level, 63 brackets more
    }
    {
        TempDir dir;  // inline tables count too; a dotted key inside one adds its parts
        std::string inline_tables = "x = ";
        for (int i = 0; i < 100; ++i) inline_tables += "{ a = ";
        const auto run = ember_run(dir, inline_tables + "1" + std::string(100, '}') + "\n");
        CHECK(run.exit_code == 1);
        CHECK(error_of(run) == "run.toml:1:385: " + kTooDeep);  // the key inside the 64th table
    }
}

TEST_CASE("a TOML file larger than 16 MiB or not a regular file is refused by name") {
    TempDir dir;
    const auto big = ember_run(dir, "# " + std::string(16u << 20, 'x') + "\n");
    CHECK(big.exit_code == 1);
    CHECK(error_of(big) == "run.toml: 16777219 bytes, more than the 16777216 bytes a TOML file may hold");
    const auto directory = ember(fmt::format("run {}", shell_quote(dir.path().string())));
    CHECK(directory.exit_code == 1);
    CHECK(directory.output == fmt::format("error: {}: not a regular file (a run config is a TOML file)\n", dir.path().string()));
}

TEST_CASE("prompt files: /dev/zero, a directory and a file over the limit are refused naming the path") {
    const std::string model = shell_quote(fixture_path("models/stories260K.gguf").string());
    const auto zero = ember(fmt::format("generate --model {} --file /dev/zero", model));
    CHECK(zero.exit_code == 1);
    CHECK(zero.output == "error: /dev/zero: not a regular file (a prompt file must be one)\n");
    const auto directory = ember(fmt::format("generate --model {} --file /tmp", model));
    CHECK(directory.exit_code == 1);
    CHECK(directory.output == "error: /tmp: is a directory, not a prompt file\n");

    TempDir dir;
    write_text(dir.path() / "prompt.txt", "Once upon a time there was");  // 26 bytes
    const std::string config = with_prompt_file("prompt.txt");
    const auto over = ember_run(dir, config, "", "EMBER_MAX_INPUT_BYTES=10");
    CHECK(over.exit_code == 1);
    CHECK(error_of(over) == (dir.path() / "prompt.txt").string() +
                                ": prompt file is 26 bytes, more than the limit of 10 bytes (set EMBER_MAX_INPUT_BYTES to raise it)");
    const auto raised = ember_run(dir, config, "", "EMBER_MAX_INPUT_BYTES=26");
    CHECK_MESSAGE(raised.exit_code == 0, raised.err);
    const auto zero_config = ember_run(dir, with_prompt_file("/dev/zero"));
    CHECK(zero_config.exit_code == 1);
    CHECK(error_of(zero_config) == "/dev/zero: not a regular file (a prompt file must be one)");
    const auto bad_limit = ember_run(dir, config, "", "EMBER_MAX_INPUT_BYTES=lots");
    CHECK(error_of(bad_limit) == "$EMBER_MAX_INPUT_BYTES = 'lots' must be a positive integer (bytes)");
}

TEST_CASE("plugin log lines: escape sequences and control characters escaped, invalid UTF-8 replaced, long lines cut") {
    TempDir dir;
    const auto run = ember_run(dir, stories(experiment(hostile_plugin(), "act = \"log\"\nstage = \"after_logits\"\nphase = \"prefill\"")));
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    const auto lines = run.err_lines("[hostile] info: ");
    REQUIRE(lines.size() == 2);
    CHECK(lines[0] == "[hostile] info: bell\\x07 escape\\x1b[31mred\\x1b[0m tab\\x09 cr\\x0d invalid \xEF\xBF\xBD\xEF\xBF\xBD utf8 done");
    CHECK(lines[1] == "[hostile] info: " + std::string(4096, 'x') + " [... 195904 more bytes]");
    CHECK(run.err.find('\x1b') == std::string::npos);
}

TEST_CASE("sampling: +inf logits are chosen (uniformly among them), an all -inf row is an error naming the step") {
    TempDir greedy_dir, seeded_dir, minus_dir;
    const std::string two_inf = experiment(hostile_plugin(), "act = \"plus_inf_2\"\nstage = \"after_logits\"\ntoken = 100");
    const auto greedy = ember_run(greedy_dir, stories(two_inf, 6));
    REQUIRE_MESSAGE(greedy.exit_code == 0, greedy.err);
    CHECK(int_list(greedy.report.at("generated").at("tokens")) == std::vector<std::int64_t>(6, 100));  // the lower id
    CHECK(str(greedy.report.at("generated").at("steps").at(0).at("logit")) == "+inf");  // strict JSON: no Infinity

    const auto seeded = ember_run(seeded_dir, with_generation("temperature = 1.0\nseed = 5", two_inf, 24));
    REQUIRE_MESSAGE(seeded.exit_code == 0, seeded.err);
    const auto tokens = int_list(seeded.report.at("generated").at("tokens"));
    CHECK(tokens.size() == 24);
    CHECK(std::set<std::int64_t>(tokens.begin(), tokens.end()) == std::set<std::int64_t>{100, 101});  // both, nothing else

    const auto minus = ember_run(minus_dir, stories(experiment(hostile_plugin(), "act = \"all_minus_inf\"\nstage = \"after_logits\"\nstep = 2")));
    CHECK(minus.exit_code == 1);
    CHECK(error_of(minus) == "every logit is -inf at step 2; cannot choose a token");
    REQUIRE(minus.has_report);
    CHECK(str(minus.report.at("outcome")) == "failed");
    CHECK(minus.report.at("generated").at("tokens").as_array().size() == 2);
}

TEST_CASE("--seed and --threads take the ranges of generation.seed and model.threads") {
    const std::string model = shell_quote(fixture_path("models/stories260K.gguf").string());
    CHECK(ember(fmt::format("generate --model {} --prompt hi --seed -1", model)).output ==
          "error: ember generate: --seed -1 must be in [0, 9223372036854775807]\n");
    CHECK(ember(fmt::format("generate --model {} --prompt hi --threads 5000", model)).output ==
          "error: ember generate: --threads 5000 must be in [1, 4096]\n");
    TempDir dir;
    std::string many_threads = stories();
    const auto threads = ember_run(dir, many_threads.replace(many_threads.find("threads = 1"), 11, "threads = 5000"));
    CHECK(error_of(threads) == "run.toml:4:11: model.threads = 5000 is outside [0, 4096]");
    const auto seed = ember_run(dir, with_generation("seed = -1"));
    CHECK(error_of(seed).ends_with("generation.seed = -1 is outside [0, 9223372036854775807]"));
}

TEST_CASE(".npy inputs with a negative, malformed or absurd shape, or fewer values than the shape, are refused") {
    TempDir dir;
    const auto npy_with = [&](const std::string& name, const std::string& shape, std::size_t data_bytes) {
        std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
        dict.append(63 - (10 + dict.size()) % 64, ' ');
        dict += '\n';
        std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
        bytes += static_cast<char>(dict.size() & 0xFF);
        bytes += static_cast<char>(dict.size() >> 8);
        bytes += dict + std::string(data_bytes, '\0');
        write_text(dir.path() / name, bytes);
        return dir.path() / name;
    };
    const auto error_reading = [](const fs::path& file) -> std::string {
        try {
            npy::read(file);
        } catch (const std::runtime_error& e) {
            return e.what();
        }
        return "(read)";
    };
    const auto negative = npy_with("negative.npy", "(-3, 4)", 48);
    CHECK(error_reading(negative) == "'" + negative.string() + "': .npy shape (-3, 4) has a negative dimension");
    const auto words = npy_with("words.npy", "(3, four)", 48);
    CHECK(error_reading(words) == "'" + words.string() + "': .npy shape (3, four) is not a tuple of non-negative integers");
    const auto absurd = npy_with("absurd.npy", "(1099511627776, 1099511627776)", 16);
    CHECK(error_reading(absurd) == "'" + absurd.string() + "': .npy shape (1099511627776, 1099511627776) is too large (more than 2^40 values)");
    const auto short_file = npy_with("short.npy", "(1000000000,)", 16);
    CHECK(error_reading(short_file) == "'" + short_file.string() +
                                           "': holds fewer values than its shape (1000000000,) says (1000000000 values of 4 bytes)");
    const auto fine = npy_with("fine.npy", "(2, 2)", 16);
    CHECK(npy::read(fine).values.size() == 4);
}

}  // namespace ember::test
