#include "model_handle.hpp"

#include <fmt/format.h>
#include <pybind11/pybind11.h>

#include "common/error.hpp"
#include "experiments/experiment_runner.hpp"
#include "extract/extraction.hpp"
#include "extract/resolved_selection.hpp"
#include "hooks/hook_chain.hpp"
#include "kernels/kv_rows.hpp"
#include "models/family.hpp"
#include "python_hooks.hpp"
#include "runtime/prompt.hpp"
#include "runtime/threads.hpp"

namespace ember::python {
namespace {

namespace fs = std::filesystem;
namespace py = pybind11;

runtime::Route checked_route(const std::string& name) {
    const auto route = runtime::route_from_name(name);
    if (!route) throw UsageError(fmt::format("route '{}' is not one of reference, fast", name));
    runtime::require_route(*route);
    return *route;
}

std::optional<models::Family> checked_arch(const std::string& arch) {
    if (arch.empty() || arch == "auto") return std::nullopt;
    if (auto family = models::family_from_name(arch)) return family;
    throw UsageError(fmt::format("arch '{}' is not one of auto, {}", arch, models::family_names(", ")));
}

config::FailurePolicy checked_failure(const std::string& name) {
    if (name == "strict") return config::FailurePolicy::Strict;
    if (name == "fail_open") return config::FailurePolicy::FailOpen;
    throw UsageError(fmt::format("failure '{}' is not one of strict, fail_open", name));
}

}  // namespace

ModelHandle::ModelHandle(const ModelOptions& options) : options_(options), route_(checked_route(options.route)) {
    if (!kernels::kv_type_from_name(options.kv_type))
        throw UsageError(fmt::format("kv_type '{}' is not one of f32, f16", options.kv_type));
    options_.path = fs::absolute(options.path).lexically_normal();
    model_ = std::make_shared<const runtime::LoadedModel>(options_.path, checked_arch(options.arch));
}

std::shared_ptr<const runtime::LoadedModel> ModelHandle::shared_model() const {
    if (!model_) throw Error(fmt::format("ember.Model('{}') is closed: open the model again", options_.path.string()));
    return model_;
}

std::size_t ModelHandle::threads() const { return runtime::effective_threads(options_.threads); }

void ModelHandle::close() {
    session_.reset();
    model_.reset();
}

ModelHandle::Busy::Busy(ModelHandle& handle) : handle_(handle) {
    handle.shared_model();  // closed: the error names the model
    if (handle.busy_.exchange(true))
        throw Error(fmt::format("ember.Model('{}') is running already (a hook cannot run its own model)",
                                handle.options_.path.string()));
}

ModelHandle::Busy::~Busy() { handle_.busy_ = false; }

// A session and the model it refers to: a view that keeps the session alive keeps the
// weights alive too.
struct OwnedSession {
    OwnedSession(std::shared_ptr<const runtime::LoadedModel> m, const runtime::SessionOptions& o)
        : model(std::move(m)), session(*model->model, o) {}
    std::shared_ptr<const runtime::LoadedModel> model;
    runtime::Session session;
};

std::shared_ptr<runtime::Session> ModelHandle::new_session(std::size_t rows, bool all_logits) const {
    runtime::SessionOptions o;
    o.route = route_;
    o.kv_type = *kernels::kv_type_from_name(options_.kv_type);
    o.context_length = options_.ctx;
    o.threads = threads();
    o.max_batch = rows;
    o.all_logits = all_logits;
    auto owned = std::make_shared<OwnedSession>(shared_model(), o);
    return {owned, &owned->session};
}

runtime::Session& ModelHandle::shared_session(std::size_t rows, bool all_logits) {
    if (!session_ || rows > session_rows_ || (all_logits && !session_all_logits_)) {
        session_.reset();
        session_rows_ = std::max(rows, std::max<std::size_t>(session_rows_, 64));
        session_all_logits_ = all_logits || session_all_logits_;
        session_ = new_session(session_rows_, session_all_logits_);
    }
    session_->reset();
    return *session_;
}

config::OutputSection ModelHandle::output_section(const RunRequest& request) const {
    config::OutputSection output;
    output.extract = true;
    extract::parse_stages(request.stages, output);
    extract::parse_layers(request.layers, output);
    if (request.select) extract::parse_select(*request.select, output);
    else extract::parse_positions(request.positions, output);
    extract::parse_logits(request.logits, output);
    return output;
}

std::shared_ptr<RunResult> ModelHandle::run(const RunRequest& request, PythonHooks* hooks) {
    const auto model = shared_model();
    auto result = std::make_shared<RunResult>();
    // As ember extract: the prompt encoded, the request resolved against model and prompt
    // (every bad stage, layer or position is an error here, before anything runs).
    result->prompt = runtime::encode_prompt(model->tokenizer, request.prompt, request.add_bos);
    const extract::Selection selection =
        extract::resolve(output_section(request), model->model->config(), result->prompt.text, result->prompt.tokens);
    result->extractor = std::make_unique<extract::Extractor>(selection);
    result->threads = threads();

    // Experiments as `ember run` makes them (in this process: no supervising worker).
    std::unique_ptr<experiments::ExperimentRunner> runner;
    if (!request.experiments.empty()) {
        std::vector<experiments::ExperimentSpec> specs;
        std::size_t n = 0;
        for (const ExperimentArg& e : request.experiments)
            specs.push_back({fs::absolute(e.plugin).lexically_normal(), e.config_json, fs::current_path(),
                             fmt::format("experiments[{}]", n++)});
        experiments::RunInfo info{"", "", model->path.string(), model->sha256, options_.route, "", {}, result->prompt.text, {}};
        for (std::int32_t id : result->prompt.ids) info.prompt_token_ids.push_back(static_cast<std::uint32_t>(id));
        for (const tokenizer::Token& t : result->prompt.tokens) info.prompt_token_spans.push_back({t.start, t.end});
        experiments::RunnerOptions options;
        options.failure = checked_failure(request.failure);
        runner = std::make_unique<experiments::ExperimentRunner>(specs, std::move(info), std::move(options));
    }

    const bool all_logits = selection.needs_all_logits();
    const std::size_t rows = result->prompt.ids.size();
    if (rows == 0) throw Error("the prompt has no tokens");
    std::shared_ptr<runtime::Session> own_session;
    if (hooks != nullptr) {
        own_session = new_session(rows, all_logits);
        hooks->keep_alive(own_session);
    }
    hooks::HookChain chain{runner.get(), hooks, result->extractor.get()};
    {
        py::gil_scoped_release released;  // Python hooks take it back at their own sites
        runtime::Session& session = own_session ? *own_session : shared_session(rows, all_logits);
        result->route = std::string(session.backend().route());
        result->variant = std::string(session.backend().variant());
        try {
            if (runner) {
                runner->on_model_loaded(model->model->config());
                hooks::EvalInfo info;
                info.phase = hooks::Phase::Prefill;
                info.n_tokens = rows;
                info.all_logits = all_logits;
                runner->before_prefill(info);
            }
            session.prefill(result->prompt.ids, all_logits, chain.simplest());
            if (runner) runner->on_generation_complete(0, experiments::StopReason::MaxTokens);
        } catch (const experiments::ExperimentFailure&) {
            if (runner) runner->finish();
            throw;
        } catch (const std::exception& e) {
            if (runner) {
                runner->notify_error(e.what(), 0);
                runner->finish();
            }
            throw;
        }
        if (runner) runner->finish();
    }
    result->extractor->check_complete();
    return result;
}

GenerateResult ModelHandle::generate(const GenerateRequest& request) {
    const auto model = shared_model();
    runtime::validate(request.sampling);
    const runtime::EncodedPrompt prompt = runtime::encode_prompt(model->tokenizer, request.prompt, request.add_bos);
    GenerateResult out;
    out.prompt_tokens = prompt.ids;
    // As ember generate (app/run_job): a session sized for the prompt, the same options.
    runtime::GenerationOptions generation;
    generation.max_tokens = request.max_tokens;
    generation.sampling = request.sampling;
    const auto is_end = [&](std::int32_t token) { return model->tokenizer.is_end_of_generation(token); };
    py::gil_scoped_release released;
    runtime::Session& session = shared_session(prompt.ids.size(), false);  // generate() resets it
    out.route = std::string(session.backend().route());
    out.variant = std::string(session.backend().variant());
    out.result = runtime::generate(session, prompt.ids, generation, is_end);
    return out;
}

config::RunConfig ModelHandle::dataset_config() const {
    config::RunConfig c;
    c.model.path = options_.path;
    c.model.route = options_.route;
    c.model.threads = options_.threads;
    c.model.ctx = options_.ctx;
    c.model.kv_type = options_.kv_type;
    if (!options_.arch.empty()) c.model.arch = options_.arch;
    return c;
}

}  // namespace ember::python
