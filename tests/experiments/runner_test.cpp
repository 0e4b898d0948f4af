// Rung: interventions (policy level, no model). The ExperimentRunner driven through
// hooks::ActiveHooks by the synthetic forward pass of synthetic_run.hpp, with the test
// plugins of tests/experiments/plugins: call counts and order, composition, strict and
// fail_open, timeouts, on_error exactly once, the exact failure messages, exceptions in
// constructors and stages, destruction order, the run.json report, and a dispatch that
// does not allocate.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>

#include "experiments/run_report.hpp"
#include "synthetic_run.hpp"

namespace {

// Counts heap allocations while `counting` is set (for the no-allocation test).
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};

}  // namespace

// GCC cannot see that these replace the global pair, and warns that free() does not match new.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t size) {
    if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(size ? size : 1)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

using namespace ember;
using namespace ember::test;
using experiments::ExperimentFailure;
using experiments::ExperimentRunner;
using experiments::Outcome;
using experiments::RunnerOptions;
using experiments::StageId;

namespace {

RunnerOptions options_with(LogLines& log, config::FailurePolicy policy = config::FailurePolicy::Strict,
                           std::uint32_t timeout_ms = 0) {
    RunnerOptions o;
    o.failure = policy;
    o.timeout_ms = timeout_ms;
    o.log = log.sink();
    return o;
}

std::uint64_t calls(const ExperimentRunner& runner, std::size_t experiment, StageId stage) {
    return runner.records().at(experiment).timings[static_cast<std::size_t>(stage)].calls;
}

// Runs a generation expected to fail strictly; returns the failure message.
std::string failing_run(ExperimentRunner& runner, const SyntheticModel& m, std::size_t prompt, std::size_t generated) {
    try {
        generate(runner, m, prompt, generated);
    } catch (const ExperimentFailure& e) {
        return e.what();
    }
    FAIL("the run did not fail");
    return {};
}

std::string failing_config(const std::string& stage, const std::string& extra = "") {
    return "{\"stage\": \"" + stage + "\"" + extra + "}";
}

}  // namespace

TEST_CASE("a run generating N tokens calls every stage the documented number of times") {
    LogLines log;
    const SyntheticModel m;  // 3 layers
    ExperimentRunner runner({spec(test_plugin("recorder"))}, test_run_info(5), options_with(log));
    generate(runner, m, 5, 4);  // one prefill + 3 decode evaluations
    CHECK(calls(runner, 0, StageId::Create) == 1);
    CHECK(calls(runner, 0, StageId::OnModelLoaded) == 1);
    CHECK(calls(runner, 0, StageId::BeforePrefill) == 1);
    for (auto stage : {StageId::BeforeLayer, StageId::AfterAttention, StageId::AfterMlp, StageId::AfterLayer})
        CHECK(calls(runner, 0, stage) == 4 * 3);
    CHECK(calls(runner, 0, StageId::BeforeLogits) == 4);
    CHECK(calls(runner, 0, StageId::AfterLogits) == 4);
    CHECK(calls(runner, 0, StageId::OnGenerationComplete) == 1);
    CHECK(calls(runner, 0, StageId::OnError) == 0);
    CHECK(runner.failures().empty());
    CHECK(runner.records()[0].outcome == Outcome::Ok);
}

// Rung: smoke (ABI contract). One stop-reason list (plugin.h's EMBER_STOP_REASON_LIST):
// a code outside it reaching a plugin fails on_generation_complete by name; the SDK never
// reads it as max_tokens.
TEST_CASE("an unknown stop reason reaching a plugin is refused by name, not read as max_tokens") {
    LogLines log;
    const SyntheticModel m;
    ExperimentRunner runner({spec(test_plugin("recorder"))}, test_run_info(2), options_with(log));
    runner.on_model_loaded(m.config());
    const auto prefill = prefill_eval(2);
    runner.before_prefill(prefill);
    forward(runner, m, prefill, 0);
    std::string message;
    try {
        runner.on_generation_complete(1, static_cast<experiments::StopReason>(99));
    } catch (const ExperimentFailure& e) {
        message = e.what();
    }
    CHECK(message.find("failed in on_generation_complete: the host passed stop reason code 99, which this plugin's "
                       "SDK does not know") != std::string::npos);
    CHECK(!log.contains("stop=0"));
    CHECK(runner.records()[0].outcome == Outcome::Failed);
}

TEST_CASE("stages fire in order, per layer in increasing order, with their contexts") {
    LogLines log;
    const SyntheticModel m;
    {
        ExperimentRunner runner({spec(test_plugin("recorder"), R"({"tag": "r"})", "/configs")}, test_run_info(2),
                                options_with(log));
        generate(runner, m, 2, 2);
    }
    std::vector<std::string> expected = {
        "r create run_id=test-run config_dir=/configs prompt_tokens=2 sha=" + std::string(64, 'a') +
            " route=reference output_dir= config_hash=" + std::string(64, 'c') + " model_path=/models/synthetic.gguf",
        "r on_model_loaded name=synthetic layers=3 embd=4 vocab=6 family=1",
        "r before_prefill phase=prefill start=0 count=2 seq=2 pos=- tracing=off",
    };
    for (const char* phase : {"prefill", "decode"}) {
        const std::string ctx = std::string(phase) == "prefill" ? "phase=prefill start=0 count=2 seq=2 pos=- tracing=off"
                                                                : "phase=decode start=2 count=1 seq=3 pos=2 tracing=off";
        const std::string rows = std::string(phase) == "prefill" ? "2" : "1";
        for (int l = 0; l < 3; ++l)
            for (const char* stage : {"before_layer", "after_attention", "after_mlp", "after_layer"})
                expected.push_back(std::string("r ") + stage + " " + ctx + " layer=" + std::to_string(l) +
                                   " rows=" + rows + " cols=4");
        expected.push_back("r before_logits " + ctx + " rows=1 cols=4");
        expected.push_back("r after_logits " + ctx + " rows=1 cols=6");
    }
    expected.push_back("r on_generation_complete generated=2 prompt=2 stop=0 run_id=test-run model=synthetic");
    expected.push_back("r destroy");

    REQUIRE(log.lines.size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
        // Tensor lines end in " first=VALUE"; compare what comes before.
        const std::string line = log.lines[i].substr(0, log.lines[i].find(" first="));
        CHECK(line == expected[i]);
    }
}

TEST_CASE("composed experiments run in order and each sees the previous one's writes") {
    LogLines log;
    const SyntheticModel m;
    ExperimentRunner runner({spec(test_plugin("recorder"), R"({"tag": "a", "add": 1})"),
                             spec(test_plugin("recorder"), R"({"tag": "b", "add": 10})")},
                            test_run_info(1), options_with(log));
    const auto traces = generate(runner, m, 1, 1);
    // The embedding at position 0, column 0 is 0: a sees 0 and writes 1; b sees 1.
    CHECK(log.starting_with("a before_layer")[0].ends_with("first=0"));
    CHECK(log.starting_with("b before_layer")[0].ends_with("first=1"));
    // Every line of a comes before the matching line of b.
    const auto a_line = std::find(log.lines.begin(), log.lines.end(), log.starting_with("a after_mlp")[0]);
    const auto b_line = std::find(log.lines.begin(), log.lines.end(), log.starting_with("b after_mlp")[0]);
    CHECK(a_line < b_line);
    // The engine's buffer holds both writes: the layer input was 0 + 1 + 10.
    CHECK(traces[0].before_layer[0][0] == 11.0f);
}

TEST_CASE("stages a plugin does not implement are never called") {
    LogLines log;
    const SyntheticModel m;
    ExperimentRunner runner({spec(test_plugin("no-stages"))}, test_run_info(3), options_with(log));
    const auto& lib = *runner.records()[0].library;
    CHECK(lib.implemented_stages().empty());
    CHECK((lib.descriptor().before_layer == nullptr));
    CHECK((lib.descriptor().on_error == nullptr));
    generate(runner, m, 3, 3);
    for (std::size_t s = 1; s < experiments::kStageCount; ++s) CHECK(runner.records()[0].timings[s].calls == 0);
}

TEST_CASE("strict: the run stops with the exact message, on_error is told once, completion is not reported") {
    LogLines log;
    const SyntheticModel m;
    ExperimentRunner runner({spec(test_plugin("failing"), failing_config("after_attention", R"(, "phase": "decode", "layer": 1)")),
                             spec(test_plugin("recorder"), R"({"tag": "r"})")},
                            test_run_info(3), options_with(log));
    const std::string message = failing_run(runner, m, 3, 5);
    CHECK(message == "experiment 'failing' failed in after_attention (phase=decode, layer=1): planned failure");
    CHECK(runner.halted());
    REQUIRE(runner.failures().size() == 1);
    CHECK(runner.failures()[0] == message);

    // generate() also called notify_error on its way out: still only one on_error each.
    CHECK(log.starting_with("failing on_error").size() == 1);
    REQUIRE(log.starting_with("r on_error").size() == 1);
    CHECK(log.starting_with("r on_error")[0].ends_with("message=" + message));
    CHECK(log.starting_with("r on_error")[0].find("generated=1 prompt=3 stop=3") != std::string::npos);
    CHECK(!log.contains("on_generation_complete"));

    // Nothing ran after the failing call: the recorder (after it in order) saw decode
    // layer 1's before_layer but not its after_attention, and no later stage.
    const auto after_attention = log.starting_with("r after_attention phase=decode");
    REQUIRE(after_attention.size() == 1);
    CHECK(after_attention[0].find("layer=0") != std::string::npos);
    CHECK(log.starting_with("r after_mlp phase=decode").size() == 1);
    CHECK(calls(runner, 1, StageId::BeforeLogits) == 1);  // the prefill's only

    // Later hook calls do nothing once the run has failed.
    std::vector<float> buffer(4, 0.0f);
    runner.after_layer(decode_eval(3, 2), 0, view(buffer, 1, 4));
    CHECK(calls(runner, 1, StageId::AfterLayer) == 3 + 1);  // prefill 3 layers + decode layer 0

    const auto records = runner.records();
    CHECK(records[0].outcome == Outcome::Failed);
    CHECK(records[0].failure == message);
    CHECK(records[1].outcome == Outcome::Ok);
}

TEST_CASE("failure messages name the stage, and the phase and layer where they apply") {
    const SyntheticModel m;
    struct Case {
        std::string stage, extra, message;
    };
    const Case cases[] = {
        {"constructor", "", "experiment 'failing' failed in create: planned failure"},
        {"on_model_loaded", "", "experiment 'failing' failed in on_model_loaded: planned failure"},
        {"before_prefill", "", "experiment 'failing' failed in before_prefill (phase=prefill): planned failure"},
        {"before_layer", R"(, "layer": 2)", "experiment 'failing' failed in before_layer (phase=prefill, layer=2): planned failure"},
        {"after_mlp", R"(, "phase": "decode", "layer": 0)", "experiment 'failing' failed in after_mlp (phase=decode, layer=0): planned failure"},
        {"after_layer", R"(, "layer": 1)", "experiment 'failing' failed in after_layer (phase=prefill, layer=1): planned failure"},
        {"before_logits", R"(, "phase": "decode")", "experiment 'failing' failed in before_logits (phase=decode): planned failure"},
        {"after_logits", "", "experiment 'failing' failed in after_logits (phase=prefill): planned failure"},
        {"on_generation_complete", "", "experiment 'failing' failed in on_generation_complete: planned failure"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.stage);
        LogLines log;
        std::string message;
        try {
            ExperimentRunner runner({spec(test_plugin("failing"), failing_config(c.stage, c.extra))}, test_run_info(2),
                                    options_with(log));
            message = failing_run(runner, m, 2, 3);
        } catch (const ExperimentFailure& e) {
            message = e.what();  // create fails inside the constructor
        }
        CHECK(message == c.message);
        // on_error reaches every instance that exists: none when create itself failed.
        CHECK(log.starting_with("failing on_error").size() == (c.stage == "constructor" ? 0u : 1u));
    }
}

TEST_CASE("exceptions escaping a stage or the constructor become failures with what()") {
    const SyntheticModel m;
    LogLines log;
    SUBCASE("std::exception in a stage") {
        ExperimentRunner runner({spec(test_plugin("failing"),
                                      R"({"stage": "after_layer", "how": "throw", "message": "bad shape"})")},
                                test_run_info(2), options_with(log));
        CHECK(failing_run(runner, m, 2, 2) == "experiment 'failing' failed in after_layer (phase=prefill, layer=0): bad shape");
    }
    SUBCASE("std::exception in the constructor") {
        CHECK_THROWS_WITH_AS(ExperimentRunner({spec(test_plugin("failing"),
                                                    R"({"stage": "constructor", "how": "throw", "message": "no such file"})")},
                                              test_run_info(2), options_with(log)),
                             "experiment 'failing' failed in create: no such file", ExperimentFailure);
    }
    SUBCASE("something not derived from std::exception") {
        ExperimentRunner runner({spec(test_plugin("failing"), R"({"stage": "before_logits", "how": "throw_other"})")},
                                test_run_info(2), options_with(log));
        CHECK(failing_run(runner, m, 2, 2) ==
              "experiment 'failing' failed in before_logits (phase=prefill): unknown exception (not derived from "
              "std::exception)");
    }
    SUBCASE("a bad config value for a typed getter") {
        CHECK_THROWS_WITH_AS(
            ExperimentRunner({spec(test_plugin("failing"), R"({"layer": "one"})")}, test_run_info(2), options_with(log)),
            "experiment 'failing' failed in create: config key 'layer' must be an integer", ExperimentFailure);
    }
    SUBCASE("configuration given to a plugin that takes none") {
        CHECK_THROWS_WITH_AS(
            ExperimentRunner({spec(test_plugin("no-stages"), R"({"x": 1})")}, test_run_info(2), options_with(log)),
            "experiment 'no-stages' failed in create: this experiment takes no configuration, but "
            "[experiment.config] has 'x'",
            ExperimentFailure);
    }
}

TEST_CASE("a message longer than the error buffer is cut at a character boundary and ends in ...") {
    const SyntheticModel m;
    LogLines log;
    ExperimentRunner runner({spec(test_plugin("failing"), R"({"stage": "after_mlp", "how": "long"})")},
                            test_run_info(2), options_with(log));
    const std::string message = failing_run(runner, m, 2, 2);
    const std::string prefix = "experiment 'failing' failed in after_mlp (phase=prefill, layer=0): ";
    REQUIRE(message.rfind(prefix, 0) == 0);
    const std::string detail = message.substr(prefix.size());
    CHECK(detail.size() <= EMBER_ERROR_CAPACITY - 1);
    CHECK(detail.size() >= EMBER_ERROR_CAPACITY - 5);
    CHECK(detail.ends_with("..."));
    const std::string body = detail.substr(0, detail.size() - 3);
    CHECK(body.size() % 2 == 0);  // whole two-byte characters only
    for (std::size_t i = 0; i < body.size(); i += 2) CHECK(body.substr(i, 2) == "\xC3\xA9");
}

TEST_CASE("fail_open: a failing experiment is logged, recorded, never called again, the run goes on") {
    const SyntheticModel m;
    LogLines log;
    ExperimentRunner runner({spec(test_plugin("failing"), failing_config("after_mlp", R"(, "layer": 1)")),
                             spec(test_plugin("failing"), failing_config("after_logits", R"(, "phase": "decode")")),
                             spec(test_plugin("recorder"), R"({"tag": "r"})")},
                            test_run_info(3), options_with(log, config::FailurePolicy::FailOpen));
    CHECK_NOTHROW(generate(runner, m, 3, 4));
    CHECK(!runner.halted());
    REQUIRE(runner.failures().size() == 2);
    CHECK(runner.failures()[0] == "experiment 'failing' failed in after_mlp (phase=prefill, layer=1): planned failure");
    CHECK(runner.failures()[1] == "experiment 'failing' failed in after_logits (phase=decode): planned failure");
    CHECK(log.contains(runner.failures()[0] + " (fail_open: not called again in this run)"));

    // The first failed in prefill layer 1 and was never called again.
    CHECK(calls(runner, 0, StageId::AfterMlp) == 2);
    CHECK(calls(runner, 0, StageId::AfterLayer) == 1);
    CHECK(calls(runner, 0, StageId::OnGenerationComplete) == 0);
    // The second went on until its first decode step's after_logits.
    CHECK(calls(runner, 1, StageId::AfterLogits) == 2);
    CHECK(calls(runner, 1, StageId::BeforeLayer) == 2 * 3);
    // The recorder saw the whole run, and completion.
    CHECK(calls(runner, 2, StageId::AfterLayer) == 4 * 3);
    CHECK(log.starting_with("r on_generation_complete").size() == 1);
    CHECK(log.starting_with("failing on_generation_complete").empty());

    const auto records = runner.records();
    CHECK(records[0].outcome == Outcome::Disabled);
    CHECK(records[1].outcome == Outcome::Disabled);
    CHECK(records[2].outcome == Outcome::Ok);
}

TEST_CASE("the first error is never replaced by a later one") {
    const SyntheticModel m;
    LogLines log;
    SUBCASE("strict: an on_error that fails is recorded after the original") {
        ExperimentRunner runner({spec(test_plugin("failing"), failing_config("after_layer", R"(, "layer": 0)")),
                                 spec(test_plugin("failing"), failing_config("on_error", R"(, "message": "later")"))},
                                test_run_info(2), options_with(log));
        const std::string message = failing_run(runner, m, 2, 2);
        CHECK(message == "experiment 'failing' failed in after_layer (phase=prefill, layer=0): planned failure");
        REQUIRE(runner.failures().size() == 2);
        CHECK(runner.failures()[0] == message);
        CHECK(runner.failures()[1] == "experiment 'failing' failed in on_error: later");
    }
    SUBCASE("fail_open: a later run error does not displace the experiment's failure") {
        ExperimentRunner runner({spec(test_plugin("failing"), failing_config("after_layer")),
                                 spec(test_plugin("recorder"), R"({"tag": "r"})")},
                                test_run_info(2), options_with(log, config::FailurePolicy::FailOpen));
        generate(runner, m, 2, 2);
        runner.notify_error("model exploded", 2);
        runner.notify_error("and again", 2);
        CHECK(runner.failures().size() == 1);
        REQUIRE(log.starting_with("r on_error").size() == 1);
        CHECK(log.starting_with("r on_error")[0].ends_with("message=model exploded"));
        CHECK(log.starting_with("failing on_error").empty());  // disabled: not called again
    }
}

TEST_CASE("timeout_ms: a call returning later than the timeout is a failure like any other") {
    const SyntheticModel m;
    LogLines log;
    SUBCASE("strict") {
        ExperimentRunner runner({spec(test_plugin("slow"), R"({"sleep_ms": 30})")}, test_run_info(2),
                                options_with(log, config::FailurePolicy::Strict, 5));
        const std::string message = failing_run(runner, m, 2, 2);
        CHECK(message.rfind("experiment 'slow' failed in after_mlp (phase=prefill, layer=0): returned after ", 0) == 0);
        CHECK(message.ends_with(" ms, over the 5 ms timeout (hooks.timeout_ms)"));
    }
    SUBCASE("fail_open: not called again") {
        ExperimentRunner runner({spec(test_plugin("slow"), R"({"sleep_ms": 30})")}, test_run_info(2),
                                options_with(log, config::FailurePolicy::FailOpen, 5));
        generate(runner, m, 2, 3);
        CHECK(calls(runner, 0, StageId::AfterMlp) == 1);
        CHECK(runner.records()[0].outcome == Outcome::Disabled);
    }
    SUBCASE("within the timeout") {
        ExperimentRunner runner({spec(test_plugin("slow"), R"({"sleep_ms": 1})")}, test_run_info(2),
                                options_with(log, config::FailurePolicy::Strict, 2000));
        CHECK_NOTHROW(generate(runner, m, 2, 2));
        CHECK(calls(runner, 0, StageId::AfterMlp) == 2 * 3);
    }
}

TEST_CASE("a strict create failure tells the instances already made, then destroys them") {
    LogLines log;
    CHECK_THROWS_AS(ExperimentRunner({spec(test_plugin("recorder"), R"({"tag": "a"})"),
                                      spec(test_plugin("failing"), failing_config("constructor")),
                                      spec(test_plugin("recorder"), R"({"tag": "c"})")},
                                     test_run_info(2), options_with(log)),
                    ExperimentFailure);
    REQUIRE(log.starting_with("a on_error").size() == 1);
    CHECK(log.starting_with("a on_error")[0].find("model=") != std::string::npos);
    CHECK(log.starting_with("a destroy").size() == 1);
    CHECK(log.starting_with("c create").empty());  // never reached
}

TEST_CASE("plugin load errors stop the run whatever the policy, before anything is created") {
    LogLines log;
    CHECK_THROWS_WITH_AS(ExperimentRunner({spec(test_plugin("recorder")), spec("/no/such/libplugin.so")},
                                          test_run_info(2), options_with(log, config::FailurePolicy::FailOpen)),
                         "plugin '/no/such/libplugin.so': no such file", Error);
    CHECK(log.lines.empty());
}

TEST_CASE("instances are destroyed once, in reverse creation order") {
    LogLines log;
    {
        ExperimentRunner runner({spec(test_plugin("recorder"), R"({"tag": "a"})"),
                                 spec(test_plugin("recorder"), R"({"tag": "b"})")},
                                test_run_info(2), options_with(log));
        runner.finish();
        runner.finish();
    }
    const auto destroys = std::count_if(log.lines.begin(), log.lines.end(),
                                        [](const std::string& l) { return l.ends_with(" destroy"); });
    CHECK(destroys == 2);
    CHECK(log.lines[log.lines.size() - 2] == "b destroy");
    CHECK(log.lines.back() == "a destroy");
}

TEST_CASE("the report for run.json lists experiments in order with descriptors, outcome, failures, timings") {
    const SyntheticModel m;
    LogLines log;
    ExperimentRunner runner({spec(test_plugin("recorder"), R"({"tag": "r"})"),
                             spec(test_plugin("failing"), failing_config("after_mlp"))},
                            test_run_info(2), options_with(log, config::FailurePolicy::FailOpen));
    generate(runner, m, 2, 2);
    const auto report = experiments::experiments_report(runner);
    CHECK(report.at("failure_policy").as_string() == "fail_open");
    const auto& list = report.at("experiments").as_array();
    REQUIRE(list.size() == 2);
    const auto& first = list[0].as_object();
    CHECK(first.at("name").as_string() == "recorder");
    CHECK(first.at("version").as_string() == "0.0.0");
    CHECK(first.at("abi").as_string() == "1.5");
    CHECK(first.at("origin").as_string() == "test");
    CHECK(first.at("config").as_object().at("tag").as_string() == "r");
    CHECK(first.at("outcome").as_string() == "ok");
    CHECK(first.at("failure").is_null());
    CHECK(first.at("stages").as_array().size() == 10);
    CHECK(first.at("timings").as_object().at("after_layer").as_object().at("calls").as_uint64() == 2 * 3);
    const auto& second = list[1].as_object();
    CHECK(second.at("outcome").as_string() == "disabled");
    CHECK(second.at("failure").as_string() == runner.failures()[0]);
    REQUIRE(report.at("failures").as_array().size() == 1);
}

TEST_CASE("the tensor-stage dispatch allocates nothing") {
    LogLines log;
    // The C plugin's after_layer adds 1 and allocates nothing itself.
    ExperimentRunner runner({spec(test_plugin("abi-older-minor")), spec(test_plugin("abi-older-minor"))},
                            test_run_info(2), options_with(log));
    const SyntheticModel m;
    runner.on_model_loaded(m.config());
    const auto prefill = prefill_eval(2);
    runner.before_prefill(prefill);
    std::vector<float> hidden(2 * 4, 0.0f);
    const hooks::TensorView v = view(hidden, 2, 4);
    allocations = 0;
    counting = true;
    for (int i = 0; i < 100; ++i) {
        runner.before_layer(prefill, 0, v);
        runner.after_layer(prefill, 0, v);
        runner.after_logits(prefill, v);
    }
    counting = false;
    CHECK(allocations == 0);
    CHECK(hidden[0] == 200.0f);  // both instances ran on every after_layer
}
