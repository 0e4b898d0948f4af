// Rung: smoke (execution structure). The trace journal of every fixture model on every
// built route, against a structure derived independently from the hyperparameters
// (expected_ops.cpp): every operation of every layer once per evaluation, in order, with
// the derived shapes; phase and step per evaluation; every field present and typed (the
// journal reader checks each line); FLOPs = 2 x rows x in x out for every projection;
// the journal's fingerprint equals the derived structure's. Tracing changes no value
// (bitwise) and an untraced session has no observer at all.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "common/error.hpp"
#include "expected_ops.hpp"
#include "gguf/gguf_file.hpp"
#include "models/model.hpp"
#include "runtime/generate.hpp"
#include "runtime/session.hpp"
#include "support/fixtures.hpp"
#include "support/golden.hpp"
#include "support/temp_dir.hpp"
#include "tokenizer/tokenizer.hpp"
#include "trace/journal.hpp"
#include "trace/journal_reader.hpp"

namespace ember::test {
namespace {

constexpr runtime::Route kRoutes[] = {runtime::Route::Reference, runtime::Route::Fast};

bool route_built(runtime::Route route) {
    try {
        runtime::make_backend(route);
        return true;
    } catch (const Error&) {
        return false;
    }
}

struct TracedRun {
    runtime::GenerationResult result;
    trace::JournalSummary summary;
    std::vector<trace::TraceEvent> events;
};

// Greedy generation of three tokens from golden prompt 0, traced.
TracedRun traced_generation(const models::Model& model, const tokenizer::Tokenizer& tok,
                            const std::vector<std::int32_t>& prompt, runtime::Route route, const TempDir& dir,
                            std::size_t threads = 2) {
    TracedRun run;
    trace::Journal journal(dir.path() / "trace.jsonl");
    runtime::Session session(model, {.route = route, .threads = threads, .max_batch = prompt.size(), .observer = &journal});
    run.result = runtime::generate(session, prompt, {.max_tokens = 3, .sampling = {}},
                                   [&](std::int32_t t) { return tok.is_end_of_generation(t); });
    run.summary = journal.finish();
    trace::for_each_event(run.summary.path, [&](const trace::TraceEvent& e) { run.events.push_back(e); });
    return run;
}

// The expected operations of that run, each with its phase and step.
struct Expected {
    std::vector<ExpectedOp> ops;
    std::vector<std::size_t> steps;
};
Expected expected_run(const gguf::File& file, const models::ModelConfig& c, std::size_t T,
                      const runtime::GenerationResult& result) {
    Expected e;
    auto add = [&](const std::vector<ExpectedOp>& ops, std::size_t step) {
        for (const auto& op : ops) {
            e.ops.push_back(op);
            e.steps.push_back(step);
        }
    };
    add(expected_evaluation(file, c, T, false), 0);
    add({expected_sampling(c)}, 0);
    for (std::size_t step = 1; step <= result.timings.decode_evaluations; ++step) {
        add(expected_evaluation(file, c, 1, false), step);
        add({expected_sampling(c)}, step);
    }
    return e;
}

bool is_weighted(kernels::OpKind kind) {
    return kind == kernels::OpKind::Projection || kind == kernels::OpKind::LmHead || kind == kernels::OpKind::Embedding;
}

}  // namespace

TEST_CASE("trace journal: the derived structure, every field, FLOPs, phase and step, on every fixture and route") {
    for (const char* name : kFixtureModels) {
        const gguf::File file = gguf::File::open(fixture_path(fmt::format("models/{}.gguf", name)));
        const auto model = models::load_model(file);
        const auto tok = tokenizer::Tokenizer::from_gguf(file);
        const models::ModelConfig& c = model->config();
        const std::vector<std::int32_t> prompt = load_golden(f32_golden_path(name)).prompts.at(0).tokens;
        for (runtime::Route route : kRoutes) {
            if (!route_built(route)) {
                MESSAGE(fmt::format("{}: the {} route is not built here; its structure is not checked", name,
                                    runtime::route_name(route)));
                continue;
            }
            CAPTURE(name);
            CAPTURE(runtime::route_name(route));
            TempDir dir;
            const TracedRun run = traced_generation(*model, tok, prompt, route, dir);
            const Expected expected = expected_run(file, c, prompt.size(), run.result);
            REQUIRE(run.events.size() == expected.ops.size());
            CHECK(run.summary.operations == run.events.size());
            CHECK(run.summary.evaluations == 1 + run.result.timings.decode_evaluations);

            std::uint64_t previous_start = 0;
            for (std::size_t i = 0; i < run.events.size(); ++i) {
                const trace::TraceEvent& e = run.events[i];
                const ExpectedOp& x = expected.ops[i];
                CAPTURE(i);
                CAPTURE(e.name);
                REQUIRE(e.name == x.name);
                CHECK(e.op_kind == kernels::op_kind_name(x.kind));
                CHECK(e.layer == x.layer);
                CHECK(e.input_shape == x.input);
                CHECK(e.output_shape == x.output);
                CHECK(e.seq == i);
                CHECK(e.step == expected.steps[i]);
                CHECK(e.phase == (expected.steps[i] == 0 ? "prefill" : "decode"));
                CHECK(e.route == runtime::route_name(route));
                CHECK(!e.kernel.empty());
                CHECK(e.start_ns >= previous_start);
                previous_start = e.start_ns;
                CHECK(e.input_bytes > 0);
                if (x.kind == kernels::OpKind::Sampling) {
                    CHECK(e.output_bytes == 4);
                    CHECK(!e.variant.has_value());
                    continue;
                }
                CHECK(e.output_bytes == 4 * x.output[0] * x.output[1]);
                CHECK(e.variant.has_value());
                CHECK(e.weight_type.has_value() == is_weighted(x.kind));
                if (x.kind == kernels::OpKind::Projection || x.kind == kernels::OpKind::LmHead) {
                    CHECK(e.estimated_flops == 2ull * x.input[0] * x.input[1] * x.output[1]);
                    CHECK(e.kernel.find(fmt::format("matmul")) != std::string::npos);
                }
            }
            const std::string derived = fingerprint_of(expected.ops);
            CHECK(run.summary.fingerprint == derived);
            CHECK(trace::fingerprint_of_journal(run.summary.path) == derived);
        }
    }
}

// One pinned literal per family, beside the structural checks above (which pin every
// route to the derived structure). A change here means the execution structure changed.
// To regenerate deliberately, after checking the new structure is intended:
//   ember generate --model ../shared/fixtures/models/MODEL.gguf --route ROUTE
//     --prompt "Once upon a time, there was a little girl" --max-tokens 3 --trace /tmp/t.jsonl
//   ember trace fingerprint /tmp/t.jsonl
TEST_CASE("trace fingerprints: one pinned value per family, for every built route") {
    // Both routes run the same operations today (the fast route fuses nothing), so one
    // value per family serves both; a route that fuses operations gets its own pin here.
    const std::pair<const char*, const char*> pinned[] = {
        {"stories260K", "ec4e07296d38e1fdfed87291c16ecb8cd5ccd522b88d1245cfa7888257d49824"},
        {"synth-qwen3-q8_0", "76b0b6b1bd18638ab60f485cfd459d66e71a61beafc777111d58e05d1e709c71"},
        {"synth-gemma4-e-q8_0", "20b0da5ff0f7ef5716ea053e6131ac97c671187dff25de89761e9fc36e0184e8"},
    };
    for (const auto& [name, fingerprint] : pinned) {
        const gguf::File file = gguf::File::open(fixture_path(fmt::format("models/{}.gguf", name)));
        const auto model = models::load_model(file);
        const auto tok = tokenizer::Tokenizer::from_gguf(file);
        const auto golden = load_golden(f32_golden_path(name));
        REQUIRE(golden.prompts.at(0).text == "Once upon a time, there was a little girl");
        for (runtime::Route route : kRoutes) {
            if (!route_built(route)) continue;
            CAPTURE(name);
            CAPTURE(runtime::route_name(route));
            TempDir dir;
            const TracedRun run = traced_generation(*model, tok, golden.prompts[0].tokens, route, dir);
            CHECK(run.summary.fingerprint == fingerprint);
            CHECK(fingerprint_of(expected_run(file, model->config(), golden.prompts[0].tokens.size(), run.result).ops) ==
                  fingerprint);
            // Timings and thread counts are not part of it.
            TempDir other;
            CHECK(traced_generation(*model, tok, golden.prompts[0].tokens, route, other, 1).summary.fingerprint ==
                  run.summary.fingerprint);
        }
    }
}

TEST_CASE("tracing changes no value: traced and untraced runs agree bitwise on every route, off means no observer") {
    for (const auto& [name, route] : {std::pair{"stories260K", runtime::Route::Reference},
                                      std::pair{"synth-qwen3-q8_0", runtime::Route::Reference},
                                      std::pair{"synth-gemma4-e-q8_0", runtime::Route::Reference},
                                      std::pair{"synth-llama3-q8_0", runtime::Route::Fast},
                                      std::pair{"synth-gemma4-e-q8_0", runtime::Route::Fast}}) {
        if (!route_built(route)) continue;
        CAPTURE(name);
        CAPTURE(runtime::route_name(route));
        const gguf::File file = gguf::File::open(fixture_path(fmt::format("models/{}.gguf", name)));
        const auto model = models::load_model(file);
        const auto tok = tokenizer::Tokenizer::from_gguf(file);
        const std::vector<std::int32_t> prompt = load_golden(f32_golden_path(name)).prompts.at(2).tokens;
        const std::size_t T = prompt.size();
        const std::size_t V = model->config().n_vocab;

        runtime::Session plain(*model, {.route = route, .threads = 2, .max_batch = T, .all_logits = true});
        CHECK(plain.observer() == nullptr);
        const kernels::ConstRows plain_logits = plain.prefill(prompt, true);
        const std::vector<float> expected(plain_logits.data, plain_logits.data + T * V);

        TempDir dir;
        trace::Journal journal(dir.path() / "t.jsonl");
        runtime::Session traced(*model, {.route = route, .threads = 2, .max_batch = T, .all_logits = true, .observer = &journal});
        const kernels::ConstRows logits = traced.prefill(prompt, true);
        CHECK(std::memcmp(logits.data, expected.data(), expected.size() * sizeof(float)) == 0);

        const auto is_end = [&](std::int32_t t) { return tok.is_end_of_generation(t); };
        const auto a = runtime::generate(plain, prompt, {.max_tokens = 6, .sampling = {}}, is_end);
        const auto b = runtime::generate(traced, prompt, {.max_tokens = 6, .sampling = {}}, is_end);
        CHECK(a.tokens == b.tokens);
        REQUIRE(a.steps.size() == b.steps.size());
        for (std::size_t i = 0; i < a.steps.size(); ++i) {
            CHECK(std::memcmp(&a.steps[i].logit, &b.steps[i].logit, sizeof(float)) == 0);
            CHECK(std::memcmp(&a.steps[i].margin, &b.steps[i].margin, sizeof(float)) == 0);
        }
        journal.finish();
    }
}

TEST_CASE("an unfinished journal leaves no file behind") {
    TempDir dir;
    {
        trace::Journal journal(dir.path() / "sub" / "t.jsonl");
        kernels::OpRecord r;
        r.site = {"x", -1, kernels::OpKind::Scale};
        journal.on_op(r);
    }
    CHECK(std::filesystem::is_empty(dir.path() / "sub"));
}

}  // namespace ember::test
