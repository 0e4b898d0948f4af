// Rung: smoke (ABI contract). The plugin ABI as design.md rule 10 asks: the headers
// compile as C11 and C++20 with -pedantic; sizes and offsets are fixed; a plugin built
// outside the project with `g++ -std=c++20 -shared -fPIC -I<sdk>` loads and runs; older
// and newer minors load (the host reads only what the plugin declared); a wrong major,
// a wrong magic, a missing entry symbol, a missing file and a bad name are refused with
// messages naming the plugin. Also `ember plugins validate`.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include <fstream>

#include "common/error.hpp"
#include "experiments/plugin_library.hpp"
#include "support/fixtures.hpp"
#include "synthetic_run.hpp"

using namespace ember;
using namespace ember::test;
using experiments::PluginLibrary;
using experiments::StageId;

namespace {

std::string sdk_include() { return shell_quote(EMBER_SDK_INCLUDE_DIR); }

void write_text(const std::filesystem::path& path, const std::string& text) {
    std::ofstream out(path);
    out << text;
}

const char* kHeaderUse = R"(#include <ember/plugin.h>
#include <ember/stages.h>
int use_header(void);
int use_header(void) {
    char text[8];
    ember_error_buffer error;
    ember_plugin_descriptor d;
    error.message = text;
    error.capacity = sizeof text;
    ember_error_set(&error, "a long message");
    d.abi.magic = EMBER_PLUGIN_MAGIC;
    return (int)d.abi.magic + text[0];
}
)";

}  // namespace

// The layout is part of the ABI: these must never change within major 1.
static_assert(EMBER_PLUGIN_ABI_MAJOR == 1);
static_assert(sizeof(ember_abi_header) == 16);
static_assert(offsetof(ember_plugin_descriptor, abi) == 0);
static_assert(offsetof(ember_abi_header, struct_size) == 12);
static_assert(offsetof(ember_plugin_descriptor, create) == 40);
static_assert(offsetof(ember_plugin_descriptor, destroy) == 48);
static_assert(offsetof(ember_plugin_descriptor, on_model_loaded) == 56);
static_assert(offsetof(ember_plugin_descriptor, after_logits) == 112);
static_assert(offsetof(ember_plugin_descriptor, on_error) == 128);
// ABI 1.0's descriptor ended at 136 bytes; 1.1 appends after it.
static_assert(offsetof(ember_plugin_descriptor, attention_pattern) == 136);
// 1.3 appends residual_mid after subscribed_stages.
static_assert(offsetof(ember_plugin_descriptor, residual_mid) == 176);
static_assert(offsetof(ember_plugin_descriptor, sae_features) == 184);
// 1.5 appends mlp_input after sae_features.
static_assert(offsetof(ember_plugin_descriptor, mlp_input) == 192);
static_assert(sizeof(ember_plugin_descriptor) == 200);
static_assert(offsetof(ember_execution_context, decode_step) == 40);
static_assert(offsetof(ember_layer_context, n_head) == 16);
static_assert(offsetof(ember_host_services, generated_token_ids) == 40);
static_assert(offsetof(ember_host_services, skip_inference) == 48);
static_assert(offsetof(ember_host_services, rewrite_prompt) == 56);
static_assert(sizeof(ember_tensor) == 32 && offsetof(ember_tensor, rows) == 8 && offsetof(ember_tensor, cols) == 16);
static_assert(offsetof(ember_execution_context, start_position) == 8);
static_assert(offsetof(ember_execution_context, input_token_count) == 16);
static_assert(offsetof(ember_layer_context, execution) == 8);
static_assert(offsetof(ember_generation_context, elapsed_ms) == 32);
static_assert(offsetof(ember_host_services, log) == 24);
static_assert(offsetof(ember_run_info, config_dir) == 56);
static_assert(offsetof(ember_run_info, prompt_token_ids) == 64);

TEST_CASE("plugin.h compiles as C11 and as C++20 with -pedantic, experiment.hpp as C++20") {
    TempDir dir;
    write_text(dir.path() / "use.c", kHeaderUse);
    write_text(dir.path() / "use.cpp", std::string(kHeaderUse) + "#include <ember/experiment.hpp>\n");
    const std::string warnings = " -Wall -Wextra -Werror -pedantic-errors -fsyntax-only -I" + sdk_include() + " ";
    const auto c = run_command(std::string(EMBER_C_COMPILER) + " -std=c11" + warnings +
                                   shell_quote((dir.path() / "use.c").string()),
                               true);
    CHECK_MESSAGE(c.exit_code == 0, c.output);
    const auto cxx = run_command(std::string(EMBER_CXX_COMPILER) + " -std=c++20" + warnings +
                                     shell_quote((dir.path() / "use.cpp").string()),
                                 true);
    CHECK_MESSAGE(cxx.exit_code == 0, cxx.output);
    // Plugin authors who build with strict warnings get none from the SDK.
    const auto strict = run_command(std::string(EMBER_CXX_COMPILER) + " -std=c++20" + warnings +
                                        "-Wconversion -Wsign-conversion -Wshadow -Wold-style-cast -Wnon-virtual-dtor " +
                                        shell_quote(std::string(EMBER_TEST_SOURCE_DIR) + "/outside/counter.cpp"),
                                    true);
    CHECK_MESSAGE(strict.exit_code == 0, strict.output);
}

TEST_CASE("a plugin written outside the project builds with g++ -std=c++20 -shared -fPIC -I<sdk> and runs") {
    TempDir dir;
    const auto library = dir.path() / "libcounter.so";
    const auto build = run_command(std::string(EMBER_CXX_COMPILER) + " -std=c++20 -shared -fPIC -I" + sdk_include() +
                                       " " + shell_quote(std::string(EMBER_TEST_SOURCE_DIR) + "/outside/counter.cpp") +
                                       " -o " + shell_quote(library.string()),
                                   true);
    REQUIRE_MESSAGE(build.exit_code == 0, build.output);

    const auto plugin = PluginLibrary::load(library);
    CHECK(plugin->name() == "counter");  // derived from the class name
    CHECK(plugin->version() == "0.0.0");
    CHECK(plugin->implemented_stages().size() == 10);

    LogLines log;
    experiments::RunnerOptions options;
    options.log = log.sink();
    experiments::ExperimentRunner runner({spec(library)}, test_run_info(4), options);
    generate(runner, SyntheticModel{}, 4, 3);
    // on_model_loaded, before_prefill, 4 layer stages x 3 layers x 3 evaluations, 2 logits
    // stages x 3 evaluations, on_generation_complete, no on_error; the synthetic model's
    // stages come in order and keep the residual identities.
    REQUIRE(log.lines.size() == 2);
    CHECK(log.lines[0] == "counts 1 1 9 9 9 9 3 3 1 0");
    CHECK(log.lines[1] == "checks prefill=1 decode=2 order=0 chain=0 residual=0");
}

// The 1.0 headers as they shipped, frozen in tests/experiments/abi_1_0/include.
std::string frozen_1_0_include() { return std::string(EMBER_TEST_SOURCE_DIR) + "/abi_1_0/include"; }

std::filesystem::path build_counter(const TempDir& dir, const std::string& include, const std::string& name) {
    const auto library = dir.path() / name;
    const auto build = run_command(std::string(EMBER_CXX_COMPILER) + " -std=c++20 -shared -fPIC -I" + include + " " +
                                       shell_quote(std::string(EMBER_TEST_SOURCE_DIR) + "/outside/counter.cpp") +
                                       " -o " + shell_quote(library.string()),
                                   true);
    REQUIRE_MESSAGE(build.exit_code == 0, build.output);
    return library;
}

TEST_CASE("a plugin built from the frozen 1.0 headers loads on the 1.1 host and behaves as the same plugin built for 1.1") {
    TempDir dir;
    const auto old_build = build_counter(dir, frozen_1_0_include(), "libcounter-1.0.so");
    const auto new_build = build_counter(dir, sdk_include(), "libcounter-1.1.so");
    const auto old_plugin = PluginLibrary::load(old_build);
    const auto new_plugin = PluginLibrary::load(new_build);
    CHECK(old_plugin->abi_minor() == 0);
    CHECK(old_plugin->declared_size() == 136);
    CHECK(new_plugin->abi_minor() == EMBER_PLUGIN_ABI_MINOR);
    CHECK(new_plugin->declared_size() == sizeof(ember_plugin_descriptor));
    CHECK(old_plugin->implemented_stages() == new_plugin->implemented_stages());
    CHECK((old_plugin->descriptor().head_outputs == nullptr && old_plugin->descriptor().subscribed_stages == nullptr));

    std::vector<std::vector<std::string>> logs;
    std::vector<std::vector<Trace>> traces;
    for (const auto& library : {old_build, new_build}) {
        LogLines log;
        experiments::RunnerOptions options;
        options.log = log.sink();
        experiments::ExperimentRunner runner({spec(library, R"({"add_at_position_0": 0.5})")}, test_run_info(4), options);
        traces.push_back(generate(runner, SyntheticModel{}, 4, 3));
        logs.push_back(log.lines);
    }
    REQUIRE(logs[0].size() == 2);
    CHECK(logs[0] == logs[1]);
    CHECK(logs[0][0] == "counts 1 1 9 9 9 9 3 3 1 0");
    // Its write (at before_layer 0) changed the computation the same way.
    REQUIRE(traces[0].size() == traces[1].size());
    for (std::size_t i = 0; i < traces[0].size(); ++i) CHECK(traces[0][i].logits == traces[1][i].logits);
}

TEST_CASE("a plugin may define its own phase_name(ember::ExecutionPhase): the SDK's helpers are not found by ADL") {
    TempDir dir;
    write_text(dir.path() / "own.cpp", R"(#include <ember/experiment.hpp>
#include <string_view>
std::string_view phase_name(ember::ExecutionPhase) { return "mine"; }
std::size_t first_row_position(const ember::ExecutionContext&, const ember::TensorView&) { return 0; }
class Own : public ember::Experiment {
public:
    const char* name() const override { return "own"; }
    ember::Status before_prefill(const ember::ExecutionContext& c) override {
        return phase_name(c.phase) == "mine" && ember::phase_name(c.phase) == "prefill" ? ember::Status{}
                                                                                       : ember::Status::error("no");
    }
};
EMBER_EXPORT_EXPERIMENT(Own)
)");
    const std::string flags = " -std=c++20 -Wall -Wextra -Werror -fsyntax-only -I";
    const auto now = run_command(std::string(EMBER_CXX_COMPILER) + flags + sdk_include() + " " +
                                     shell_quote((dir.path() / "own.cpp").string()),
                                 true);
    CHECK_MESSAGE(now.exit_code == 0, now.output);
    // The 1.0 headers had the clash (the reason for the change): the check can fail.
    write_text(dir.path() / "own_1_0.cpp", R"(#include <ember/experiment.hpp>
#include <string_view>
std::string_view phase_name(ember::ExecutionPhase) { return "mine"; }
std::string_view use(ember::ExecutionPhase p) { return phase_name(p); }
)");
    const auto before = run_command(std::string(EMBER_CXX_COMPILER) + flags + frozen_1_0_include() + " " +
                                        shell_quote((dir.path() / "own_1_0.cpp").string()),
                                    true);
    CHECK(before.exit_code != 0);
}

TEST_CASE("a plugin built against an older minor loads, the fields it did not declare read as null") {
    const auto plugin = PluginLibrary::load(test_plugin("abi-older-minor"));
    CHECK(plugin->name() == "older-minor");
    CHECK(plugin->abi_minor() == 0);
    CHECK(plugin->declared_size() == offsetof(ember_plugin_descriptor, on_generation_complete));
    // Its static descriptor holds aborting functions beyond its declared size.
    CHECK((plugin->descriptor().on_generation_complete == nullptr));
    CHECK((plugin->descriptor().on_error == nullptr));
    CHECK(plugin->implemented_stages() == std::vector<StageId>{StageId::AfterLayer});

    // A whole run, failing at the end so that on_error is sent too: neither reaches it.
    LogLines log;
    experiments::RunnerOptions options;
    options.log = log.sink();
    experiments::ExperimentRunner runner({spec(test_plugin("abi-older-minor"))}, test_run_info(2), options);
    const auto traces = generate(runner, SyntheticModel{}, 2, 2);
    runner.notify_error("the run failed after all");
    const SyntheticModel m;
    experiments::ExperimentRunner plain({}, test_run_info(2), options);
    const auto clean = forward(plain, m, prefill_eval(2));
    CHECK(traces[0].after_layer[0][0] == clean.after_layer[0][0] + 1.0f);
}

TEST_CASE("a plugin built against a newer minor loads, fields beyond this host's descriptor are ignored") {
    const auto plugin = PluginLibrary::load(test_plugin("abi-newer-minor"));
    CHECK(plugin->name() == "newer-minor");
    CHECK(plugin->abi_minor() == EMBER_PLUGIN_ABI_MINOR + 1);
    CHECK(plugin->declared_size() == sizeof(ember_plugin_descriptor) + 16);
    experiments::RunnerOptions options;
    experiments::ExperimentRunner runner({spec(test_plugin("abi-newer-minor"))}, test_run_info(2), options);
    CHECK_NOTHROW(generate(runner, SyntheticModel{}, 2, 2));
}

TEST_CASE("refused plugins: errors name the plugin, and a wrong major is reported first and alone") {
    const auto path = [](const char* name) { return test_plugin(name).string(); };
    CHECK_THROWS_WITH_AS(PluginLibrary::load(test_plugin("abi-wrong-major")),
                         ("plugin '" + path("abi-wrong-major") +
                          "' was built for plugin ABI 2.0, but this ember implements ABI 1.5; rebuild it against this "
                          "ember's plugin SDK")
                             .c_str(),
                         Error);
    CHECK_THROWS_WITH_AS(PluginLibrary::load(test_plugin("abi-wrong-magic")),
                         ("plugin '" + path("abi-wrong-magic") +
                          "': descriptor magic 0xdeadbeef is not Ember's 0x52424d45 (not an Ember plugin)")
                             .c_str(),
                         Error);
    CHECK_THROWS_WITH_AS(PluginLibrary::load(test_plugin("abi-no-entry")),
                         ("plugin '" + path("abi-no-entry") +
                          "' does not export ember_plugin_entry (not an Ember plugin? C++ plugins export it with "
                          "EMBER_EXPORT_EXPERIMENT)")
                             .c_str(),
                         Error);
    CHECK_THROWS_WITH_AS(PluginLibrary::load("/no/such/dir/libmissing.so"),
                         "plugin '/no/such/dir/libmissing.so': no such file", Error);
    CHECK_THROWS_WITH_AS(PluginLibrary::load(test_plugin("abi-bad-name")),
                         ("plugin '" + path("abi-bad-name") +
                          "': descriptor name 'Bad Name' is not 1-63 characters of [a-z0-9._-]")
                             .c_str(),
                         Error);
    CHECK_THROWS_WITH_AS(PluginLibrary::load(test_plugin("abi-too-small")),
                         ("plugin '" + path("abi-too-small") +
                          "': descriptor declares 40 bytes, fewer than ABI 1's required 56")
                             .c_str(),
                         Error);
}

TEST_CASE("a file that is not a shared object is refused with the loader's message") {
    TempDir dir;
    const auto fake = dir.path() / "libfake.so";
    write_text(fake, std::string(4096, 'x'));
    try {
        PluginLibrary::load(fake);
        FAIL("loaded a text file");
    } catch (const Error& e) {
        const std::string what = e.what();
        CHECK(what.rfind("plugin '" + fake.string() + "' cannot be loaded: ", 0) == 0);
        CHECK(what.find("invalid ELF header") != std::string::npos);  // the dlerror() text
    }
}

TEST_CASE("a relative path is loaded as an absolute one") {
    const auto cwd = std::filesystem::current_path();
    std::filesystem::current_path(EMBER_TEST_PLUGIN_DIR);
    const auto plugin = PluginLibrary::load("librecorder.so");
    std::filesystem::current_path(cwd);
    CHECK(plugin->path() == test_plugin("recorder"));
}

TEST_CASE("ember_error_set copies, or cuts at a character boundary and ends in ...") {
    char text[16];
    ember_error_buffer error{text, sizeof text};
    ember_error_set(&error, "short");
    CHECK(std::string(text) == "short");
    ember_error_set(&error, "exactly 15 char");  // 15 bytes + NUL fit
    CHECK(std::string(text) == "exactly 15 char");
    ember_error_set(&error, "sixteen bytes!!!");
    CHECK(std::string(text) == "sixteen byte...");  // 12 bytes kept, then "...\0"
    ember_error_set(&error, "abcdefghijk\xC3\xA9xyz");  // byte 12 is inside "é": cut before it
    CHECK(std::string(text) == "abcdefghijk...");
    ember_error_set(&error, nullptr);
    CHECK(std::string(text).empty());
    char tiny[3] = {'x', 'x', 'x'};
    ember_error_buffer small{tiny, sizeof tiny};
    ember_error_set(&small, "too long");
    CHECK(tiny[0] == '\0');
}

TEST_CASE("ember plugins validate prints the descriptor without running the plugin") {
    const std::string ember = EMBER_BINARY;
    const auto text = run_command(ember + " plugins validate " + shell_quote(builtin_plugin("ablate").string()), true);
    REQUIRE_MESSAGE(text.exit_code == 0, text.output);
    CHECK(text.output.find("name:        ablate\n") != std::string::npos);
    CHECK(text.output.find("version:     1.0.0\n") != std::string::npos);
    CHECK(text.output.find("abi:         1.5 (descriptor 200 bytes; this ember implements 1.5)\n") != std::string::npos);
    CHECK(text.output.find("stages:      on_model_loaded, before_prefill, before_layer, attention_pattern, head_outputs, after_attention, "
                           "residual_mid, mlp_input, mlp_activation, after_mlp, after_layer, sae_features, before_logits, after_logits\n") != std::string::npos);

    // The older-minor plugin aborts if any undeclared stage were called; validate calls none.
    const auto json = run_command(ember + " plugins validate --json " + shell_quote(test_plugin("abi-older-minor").string()));
    REQUIRE_MESSAGE(json.exit_code == 0, json.output);
    const auto o = boost::json::parse(json.output).as_object();
    CHECK(o.at("name").as_string() == "older-minor");
    CHECK(o.at("abi").as_string() == "1.0");
    CHECK(o.at("stages").as_array().size() == 1);

    const auto refused = run_command(ember + " plugins validate " + shell_quote(test_plugin("abi-wrong-major").string()), true);
    CHECK(refused.exit_code == 1);
    CHECK(refused.output.find("abi-wrong-major.so' was built for plugin ABI 2.0") != std::string::npos);
    const auto usage = run_command(ember + " plugins frobnicate x.so", true);
    CHECK(usage.exit_code == 2);
}
