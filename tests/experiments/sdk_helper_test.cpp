// Rung: smoke (SDK). The C++ helper ember/experiment.hpp in-process: this test binary
// exports an experiment itself (EMBER_EXPORT_EXPERIMENT) and calls its descriptor the way
// the host does. Stage pointers are null exactly for the stages the class does not
// override; failures and exceptions become EMBER_FAILED with the message; ember::host()
// answers during calls; the contexts, TensorAccess, and ExperimentConfig's JSON reader.
#include <doctest/doctest.h>

#include <ember/experiment.hpp>

#include "hooks/stop_reason.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

std::vector<std::string> logged;

class Probe : public ember::Experiment {
public:
    explicit Probe(const ember::ExperimentConfig& config) : scale_(static_cast<float>(config.get_double("scale", 1.0))) {
        if (config.get_bool("explode", false)) throw std::runtime_error("constructor exploded");
        ember::host().info("created with run " + std::string(ember::host().run_info().run_id));
    }
    const char* name() const override { return "probe"; }

    ember::Status after_mlp(const ember::LayerContext& c, ember::TensorAccess& t) override {
        last_layer = c.layer_index;
        last_position = c.token_position();
        last_sequence = c.sequence_length();
        last_first_row = ember::first_row_position(c, t);
        if (t.shape()[1] == 0) return ember::Status::error("empty tensor");
        if (t.shape()[1] == 3) throw std::invalid_argument("three columns");
        for (float& v : t.values_mut()) v *= scale_;
        return {};
    }
    ember::Status on_error(const ember::GenerationContext& g, std::string_view message) override {
        ember::host().info("on_error " + std::string(message) + " " + std::string(g.run_id));
        return {};
    }

    static inline std::size_t last_layer = 0;
    static inline std::optional<std::size_t> last_position;
    static inline std::size_t last_sequence = 0;
    static inline std::size_t last_first_row = 0;

private:
    float scale_;
};

void record_log(void*, std::uint32_t, const char* message) { logged.emplace_back(message); }

}  // namespace

EMBER_EXPORT_EXPERIMENT(Probe, "probe", "2.1.0", "a probe for the helper's own tests")

namespace {

struct FakeHost {
    ember_run_info info{};
    ember_host_services services{};
    FakeHost() {
        info.struct_size = sizeof info;
        info.run_id = "run-7";
        info.config_dir = "/cfg";
        services = {sizeof services, 1, 0, 0, nullptr, record_log, &info};
    }
};

}  // namespace

static_assert(ember::detail::ExportNames("Counter").name[0] == 'c');

TEST_CASE("names derived from class names are kebab case") {
    CHECK(std::string(ember::detail::ExportNames("Counter").name.data()) == "counter");
    CHECK(std::string(ember::detail::ExportNames("FiniteCheck").name.data()) == "finite-check");
    CHECK(std::string(ember::detail::ExportNames("ns::HTTPServer2").name.data()) == "http-server2");
    CHECK(std::string(ember::detail::ExportNames("logit_lens").name.data()) == "logit_lens");
}

TEST_CASE("the exported descriptor: ABI block, static strings, null stages where not overridden") {
    const ember_plugin_descriptor* d = ember_plugin_entry();
    REQUIRE(d != nullptr);
    CHECK(d->abi.magic == EMBER_PLUGIN_MAGIC);
    CHECK(d->abi.abi_major == EMBER_PLUGIN_ABI_MAJOR);
    CHECK(d->abi.abi_minor == EMBER_PLUGIN_ABI_MINOR);
    CHECK(d->abi.struct_size == sizeof(ember_plugin_descriptor));
    CHECK(std::string(d->name) == "probe");
    CHECK(std::string(d->version) == "2.1.0");
    CHECK(std::string(d->description) == "a probe for the helper's own tests");
    CHECK((d->create != nullptr && d->destroy != nullptr));
    CHECK((d->after_mlp != nullptr && d->on_error != nullptr));
    CHECK((d->on_model_loaded == nullptr && d->before_prefill == nullptr && d->before_layer == nullptr));
    CHECK((d->after_attention == nullptr && d->after_layer == nullptr && d->before_logits == nullptr));
    CHECK((d->after_logits == nullptr && d->on_generation_complete == nullptr));
}

TEST_CASE("calls through the descriptor: success, Status::error, exceptions, host services") {
    const ember_plugin_descriptor* d = ember_plugin_entry();
    FakeHost host;
    char text[EMBER_ERROR_CAPACITY] = {};
    ember_error_buffer error{text, sizeof text};
    logged.clear();

    void* instance = nullptr;
    REQUIRE(d->create(R"({"scale": 2})", &host.services, &instance, &error) == EMBER_OK);
    REQUIRE(instance != nullptr);
    REQUIRE(logged.size() == 1);
    CHECK(logged[0] == "created with run run-7");
    CHECK(!ember::host().available());  // only during a call

    ember_model_context model{sizeof model, EMBER_FAMILY_GEMMA4, "m", 2, 2, 5, 0};
    ember_execution_context exec{sizeof exec, EMBER_PHASE_DECODE, 9, 1, EMBER_TRACING_DISABLED, 0, &model};
    ember_layer_context layer{sizeof layer, 1, &exec};
    std::vector<float> values = {1.0f, -2.0f};
    ember_tensor tensor{values.data(), 1, 2, EMBER_DTYPE_F32, 0};
    CHECK(d->after_mlp(instance, &layer, &tensor, &error) == EMBER_OK);
    CHECK(values == std::vector<float>{2.0f, -4.0f});
    CHECK(Probe::last_layer == 1);
    CHECK(Probe::last_position == std::optional<std::size_t>(9));
    CHECK(Probe::last_sequence == 10);
    CHECK(Probe::last_first_row == 9);

    ember_tensor empty{values.data(), 1, 0, EMBER_DTYPE_F32, 0};
    CHECK(d->after_mlp(instance, &layer, &empty, &error) == EMBER_FAILED);
    CHECK(std::string(text) == "empty tensor");

    std::vector<float> three(6, 1.0f);
    ember_tensor wide{three.data(), 2, 3, EMBER_DTYPE_F32, 0};
    exec.input_token_count = 2;
    CHECK(d->after_mlp(instance, &layer, &wide, &error) == EMBER_FAILED);
    CHECK(std::string(text) == "three columns");
    CHECK(Probe::last_position == std::nullopt);

    ember_tensor other_dtype{values.data(), 1, 2, 7, 0};
    CHECK(d->after_mlp(instance, &layer, &other_dtype, &error) == EMBER_FAILED);
    CHECK(std::string(text) == "unsupported tensor dtype");

    ember_generation_context gen{sizeof gen, EMBER_STOP_ERROR, 3, 4, "run-7", 1.5, nullptr};
    CHECK(d->on_error(instance, &gen, "it broke", &error) == EMBER_OK);
    CHECK(logged.back() == "on_error it broke run-7");
    d->destroy(instance);

    void* none = nullptr;
    CHECK(d->create(R"({"explode": true})", &host.services, &none, &error) == EMBER_FAILED);
    CHECK(std::string(text) == "constructor exploded");
    CHECK(none == nullptr);
    CHECK(d->create(R"({"scale": "big"})", &host.services, &none, &error) == EMBER_FAILED);
    CHECK(std::string(text) == "config key 'scale' must be a number");
    CHECK(d->create("{not json", &host.services, &none, &error) == EMBER_FAILED);
    CHECK(std::string(text).rfind("config JSON: ", 0) == 0);
}

namespace {

const char kPromptText[] = "كتب x";
const std::uint32_t kPromptIds[] = {1, 9, 4};
const ember_token_span kPromptSpans[] = {{0, 0}, {0, 6}, {6, 8}};

std::uint64_t fake_prompt_text(void*, const char** text) {
    *text = kPromptText;
    return sizeof kPromptText - 1;
}
std::uint64_t fake_prompt_ids(void*, const std::uint32_t** ids) {
    *ids = kPromptIds;
    return 3;
}
std::uint64_t fake_prompt_spans(void*, const ember_token_span** spans) {
    *spans = kPromptSpans;
    return 3;
}

}  // namespace

TEST_CASE("the 1.2 prompt services: read when the host declares them, empty on an older host") {
    ember_host_services services{};
    services.struct_size = sizeof services;
    services.prompt_text = fake_prompt_text;
    services.prompt_token_ids = fake_prompt_ids;
    services.prompt_token_spans = fake_prompt_spans;
    const ember::Host host(&services);
    CHECK(host.has_prompt_text());
    CHECK(host.prompt_text() == "كتب x");
    CHECK(std::vector<std::uint32_t>(host.prompt_token_ids().begin(), host.prompt_token_ids().end()) ==
          std::vector<std::uint32_t>{1, 9, 4});
    REQUIRE(host.prompt_token_spans().size() == 3);
    CHECK(host.prompt_token_spans()[1].start == 0);
    CHECK(host.prompt_token_spans()[1].end == 6);

    // A 1.1 host's table ends after generated_token_ids: whatever lies beyond is not read.
    services.struct_size = offsetof(ember_host_services, prompt_text);
    CHECK_FALSE(host.has_prompt_text());
    CHECK(host.prompt_text().empty());
    CHECK(host.prompt_token_ids().empty());
    CHECK(host.prompt_token_spans().empty());
    // A 1.2 host without them (null pointers).
    services = ember_host_services{};
    services.struct_size = sizeof services;
    CHECK_FALSE(host.has_prompt_text());
    CHECK(host.prompt_text().empty());
    CHECK(ember::Host(nullptr).prompt_token_spans().empty());
}

TEST_CASE("TensorAccess and the contexts") {
    std::vector<float> data = {1, 2, 3, 4, 5, 6};
    ember::TensorAccess t(data.data(), 2, 3);
    CHECK(t.shape() == std::array<std::size_t, 2>{2, 3});
    CHECK(t.dtype() == ember::TensorDType::F32);
    CHECK(t.values().size() == 6);
    CHECK(t.row(1)[0] == 4);
    t.row_mut(0)[2] = 9;
    CHECK(data[2] == 9);
    t.zero();
    for (float v : data) CHECK(v == 0.0f);

    const ember::ModelContext model{ember::ModelFamily::Llama, "x", 2, 3, 4};
    const ember::ExecutionContext prefill{ember::ExecutionPhase::Prefill, 0, 5, ember::TracingState::Enabled, model};
    CHECK(prefill.sequence_length() == 5);
    CHECK(!prefill.token_position());
    const ember::LayerContext decode{{ember::ExecutionPhase::Decode, 7, 1, ember::TracingState::Disabled, model}, 3};
    CHECK(decode.token_position() == std::optional<std::size_t>(7));
    CHECK(decode.layer_index == 3);
    CHECK(&decode.model == &model);
}

TEST_CASE("ExperimentConfig: typed getters with defaults, raw JSON, and a strict JSON reader") {
    const std::string raw =
        R"({"layers": [1, 2], "scale": 5E-1, "name": "a\"b\u00e9\ud83d\ude00", "on": true, "big": 9007199254740993,)"
        R"( "nested": {"x": [1.5, -2]}, "when": "1979-05-27T07:32:00Z", "none": null})";
    const ember::ExperimentConfig c(raw);
    CHECK(c.raw_json() == raw);
    CHECK(c.get_int_list("layers", {}) == std::vector<std::int64_t>{1, 2});
    CHECK(c.get_double("scale", 0) == 0.5);
    CHECK(c.get_string("name", "") == "a\"b\xC3\xA9\xF0\x9F\x98\x80");
    CHECK(c.get_bool("on", false));
    CHECK(c.get_int("big", 0) == 9007199254740993LL);  // integers stay exact
    CHECK(c.get_int("absent", 7) == 7);
    CHECK(c.get_string("absent", "dflt") == "dflt");
    CHECK(c.get_double("big", 0) == 9007199254740992.0);
    CHECK(c.get_double_list("absent", {1.0}) == std::vector<double>{1.0});
    CHECK(c.json().find("nested")->find("x")->items()[1].as_integer() == -2);
    CHECK(c.json().find("none")->is_null());
    CHECK(c.has("when"));
    CHECK_THROWS_WITH_AS(c.get_int("scale", 0), "config key 'scale' must be an integer", ember::ConfigError);
    CHECK_THROWS_WITH_AS(c.get_string_list("layers", {}), "config key 'layers' must be a list of strings",
                         ember::ConfigError);
    CHECK_THROWS_WITH_AS(c.expect_only({"layers"}), doctest::Contains("unknown config key 'scale'"), ember::ConfigError);
    CHECK(ember::ExperimentConfig().empty());

    for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "01", "1.", "\"\\x\"", "{} x", "\"\\ud800\"", "tru", "[1e]"}) {
        CAPTURE(bad);
        CHECK_THROWS_AS(ember::JsonValue::parse(bad), ember::ConfigError);
    }
    CHECK_THROWS_WITH_AS(ember::ExperimentConfig("[1]"), "config JSON: expected an object", ember::ConfigError);
    CHECK_THROWS_WITH_AS(ember::JsonValue::parse("1e999"), "config JSON: number out of range at byte 5",
                         ember::ConfigError);
}

namespace {

std::uint32_t last_skip_first_id = 0;
ember_status refuse_skip(void*, const std::uint32_t* ids, std::uint64_t count, ember_error_buffer* reason) {
    last_skip_first_id = count > 0 ? ids[0] : 0;
    ember_error_set(reason, "skip_inference refused: it is accepted only during before_prefill");
    return EMBER_REFUSED_STAGE;
}
ember_status accept_rewrite(void*, const char*, std::uint64_t, ember_error_buffer*) { return EMBER_OK; }

}  // namespace

TEST_CASE("the 1.1 lifecycle helpers: the host's answer and reason, and a refusal by a 1.0 host's smaller table") {
    FakeHost host;
    // A 1.0 host's table ends before generated_token_ids: nothing beyond it is read.
    host.services.struct_size = offsetof(ember_host_services, generated_token_ids);
    host.services.skip_inference = refuse_skip;  // lies beyond the declared size: never called
    const std::uint32_t ids[] = {7, 8};
    ember::HostAnswer older = ember::Host(&host.services).skip_inference(ids);
    CHECK(older.refusal() == ember::HostAnswer::Refusal::OlderHost);
    CHECK(older.reason() == "skip_inference refused: this host (an older ABI) does not offer it");
    CHECK(!older.status().ok());
    CHECK(last_skip_first_id == 0);

    host.services.struct_size = sizeof(ember_host_services);
    host.services.rewrite_prompt = accept_rewrite;
    const ember::HostAnswer refused = ember::Host(&host.services).skip_inference(ids);
    CHECK(last_skip_first_id == 7);
    CHECK(refused.refusal() == ember::HostAnswer::Refusal::WrongStage);
    CHECK(refused.status().message() == "skip_inference refused: it is accepted only during before_prefill");
    const ember::HostAnswer accepted = ember::Host(&host.services).rewrite_prompt("مرحبا");
    CHECK(accepted.accepted());
    CHECK(accepted.reason().empty());
    CHECK(accepted.status().ok());
}

// Rung: smoke (ABI contract). A code the SDK does not know is refused, never read as
// another: today's host never sends one, a newer host might.
TEST_CASE("an unknown stop reason or family code is refused by name, not read as max_tokens or llama") {
    for (const ember::StopCode& s : ember::kStopCodes) CHECK(ember::detail::to_stop_reason(s.code) == s.reason);
    CHECK_THROWS_WITH_AS(ember::detail::to_stop_reason(99),
                         "the host passed stop reason code 99, which this plugin's SDK does not know (rebuild the "
                         "plugin against the host's SDK)",
                         std::runtime_error);
    ember_model_context model{};
    model.family = 7;
    CHECK_THROWS_AS(ember::detail::to_model_context(&model), std::runtime_error);
    for (const ember::FamilyCode& f : ember::kFamilyCodes) {
        model.family = f.code;
        CHECK(ember::detail::to_model_context(&model).family == f.family);
        CHECK(ember::family_name(f.family) == f.name);
    }
}

// Rung: smoke (ABI contract). The SDK's stop reasons and the host's are one list
// (plugin.h's EMBER_STOP_REASON_LIST): the same codes, in the same order, with the same names.
TEST_CASE("the SDK's stop reasons and the host's come from one list") {
    REQUIRE(std::size(ember::kStopCodes) == std::size(ember::hooks::kStopReasons));
    for (std::size_t i = 0; i < std::size(ember::kStopCodes); ++i) {
        const ember::StopCode& sdk = ember::kStopCodes[i];
        const ember::hooks::StopReasonRow& host = ember::hooks::kStopReasons[i];
        CHECK(sdk.code == static_cast<std::uint32_t>(host.reason));
        CHECK(sdk.code == static_cast<std::uint32_t>(sdk.reason));
        CHECK(sdk.name == host.name);
        CHECK(ember::stop_reason_name(sdk.reason) == ember::hooks::stop_reason_name(host.reason));
        CHECK(ember::hooks::stop_reason_from_name(host.name) == host.reason);
    }
    CHECK_FALSE(ember::hooks::stop_reason_from_name("maxtokens").has_value());
}
