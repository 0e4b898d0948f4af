// ember._ember: the native half of the Python package (docs/python.md). It converts
// between Python and model_handle.hpp, which makes the CLI's engine calls; the Python
// half (python/ember/*.py) builds the user-facing API (Model, Cache, open_run) on it.
//
// Arrays: a run's captured activations are NumPy views of the engine's own vectors
// (read-only, no copy; each view keeps the run's result alive); token lists and strings
// are copied.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <boost/json/serialize.hpp>
#include <fmt/format.h>

#include <csignal>

#include <algorithm>
#include <filesystem>

#include "common/error.hpp"
#include "dataset_job.hpp"
#include "experiments/experiment_runner.hpp"
#include "extract/dataset_extraction.hpp"
#include "record/manifest.hpp"
#include "extract/resolved_selection.hpp"
#include "hooks/hook_names.hpp"
#include "model_handle.hpp"
#include "models/family.hpp"
#include "python_hooks.hpp"

namespace py = pybind11;
namespace fs = std::filesystem;

namespace ember::python {
namespace {

py::handle g_hook_error;  // ember.HookError, set at import

config::AddBos add_bos_from(const std::optional<bool>& add_bos) {
    if (!add_bos) return config::AddBos::Auto;
    return *add_bos ? config::AddBos::Yes : config::AddBos::No;
}

py::bytes as_bytes(const std::string& s) { return py::bytes(s.data(), s.size()); }

// A float32 C-order view of `values` (owned by `owner`) of `shape`, read-only.
py::array_t<float> owned_view(const std::vector<float>& values, const std::vector<std::size_t>& shape,
                              const std::shared_ptr<const void>& owner) {
    auto* keep = new std::shared_ptr<const void>(owner);
    const py::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); });
    std::vector<py::ssize_t> dims, strides(shape.size());
    for (std::size_t d : shape) dims.push_back(static_cast<py::ssize_t>(d));
    py::ssize_t stride = sizeof(float);
    for (std::size_t i = shape.size(); i-- > 0;) {
        strides[i] = stride;
        stride *= dims[i];
    }
    py::array_t<float> a(dims, strides, values.empty() ? nullptr : values.data(), base);
    a.attr("setflags")(py::arg("write") = false);
    return a;
}

py::dict capture_dict(const extract::Capture& c, const std::shared_ptr<const void>& owner) {
    py::dict d;
    d["stage"] = std::string(hooks::stage_name(c.stage));
    d["layer"] = c.layer ? py::object(py::int_(*c.layer)) : py::object(py::none());
    d["positions"] = c.positions;
    d["rows_per_position"] = c.rows_per_position;
    d["array"] = owned_view(c.values, c.shape(), owner);
    return d;
}

py::dict tokens_dict(const tokenizer::Tokenizer& tok, const std::vector<tokenizer::Token>& tokens) {
    std::vector<std::int32_t> ids;
    std::vector<std::size_t> starts, ends;
    py::list pieces;
    for (const tokenizer::Token& t : tokens) {
        ids.push_back(t.id);
        starts.push_back(t.start);
        ends.push_back(t.end);
        pieces.append(as_bytes(tok.piece(t.id, true)));
    }
    py::dict d;
    d["ids"] = ids;
    d["starts"] = starts;
    d["ends"] = ends;
    d["pieces"] = pieces;
    return d;
}

std::vector<HookSite> hook_sites(const py::list& hooks) {
    std::vector<HookSite> sites;
    for (const py::handle h : hooks) {
        const auto t = h.cast<py::tuple>();  // (stage name, layer or None, callable, name)
        const std::string stage = t[0].cast<std::string>();
        const std::string name = t[3].cast<std::string>();
        const auto* found = std::find_if(hooks::kTensorStages.begin(), hooks::kTensorStages.end(),
                                         [&](hooks::Stage s) { return hooks::stage_name(s) == stage; });
        if (found == hooks::kTensorStages.end()) {
            std::string list;
            for (hooks::Stage s : hooks::kTensorStages) list += fmt::format("{}{}", list.empty() ? "" : ", ", hooks::stage_name(s));
            throw UsageError(fmt::format("hook '{}': unknown stage '{}' (one of {})", name, stage, list));
        }
        HookSite site;
        site.stage = *found;
        if (!t[1].is_none()) site.layer = t[1].cast<std::uint32_t>();
        site.fn = py::reinterpret_borrow<py::object>(t[2]);
        site.name = name;
        sites.push_back(std::move(site));
    }
    return sites;
}

std::vector<ExperimentArg> experiment_args(const py::list& experiments) {
    std::vector<ExperimentArg> out;
    for (const py::handle e : experiments) {
        const auto t = e.cast<py::tuple>();  // (plugin path, config as JSON text)
        out.push_back({t[0].cast<std::string>(), t[1].cast<std::string>()});
    }
    return out;
}

py::dict run(ModelHandle& handle, const std::string& prompt, const std::string& stages, const std::string& layers,
             const std::string& positions, const std::optional<std::string>& select, const std::string& logits,
             const std::optional<bool>& add_bos, const py::list& hook_list, const py::list& experiments,
             const std::string& failure) {
    const ModelHandle::Busy busy(handle);
    RunRequest request;
    request.prompt = prompt;
    request.add_bos = add_bos_from(add_bos);
    request.stages = stages;
    request.layers = layers;
    request.positions = positions;
    request.select = select;
    request.logits = logits;
    request.experiments = experiment_args(experiments);
    request.failure = failure;
    std::optional<PythonHooks> hooks;
    if (!hook_list.empty()) hooks.emplace(hook_sites(hook_list), handle.model().model->config());

    std::shared_ptr<RunResult> result;
    try {
        result = handle.run(request, hooks ? &*hooks : nullptr);
    } catch (const HookFailure& e) {
        if (hooks && hooks->python_error()) {
            py::raise_from(*hooks->python_error(), g_hook_error.ptr(), e.what());
            throw py::error_already_set();
        }
        PyErr_SetString(g_hook_error.ptr(), e.what());
        throw py::error_already_set();
    }
    const std::shared_ptr<const void> owner = result;
    py::list captures;
    for (const extract::Capture* c : result->extractor->captures()) captures.append(capture_dict(*c, owner));
    py::dict out;
    out["captures"] = captures;
    out["logits"] = result->extractor->logits() ? py::object(capture_dict(*result->extractor->logits(), owner)) : py::none();
    out["tokens"] = tokens_dict(handle.model().tokenizer, result->prompt.tokens);
    out["bos_added"] = result->prompt.bos_added;
    out["route"] = result->route;
    out["kernel"] = result->variant;
    out["threads"] = result->threads;
    out["partial"] = std::vector<bool>(result->extractor->selection().partial);
    out["select"] = result->extractor->selection().spec;
    return out;
}

py::dict generate(ModelHandle& handle, const std::string& prompt, std::size_t max_tokens, float temperature,
                  std::uint32_t top_k, float top_p, std::uint64_t seed, const std::optional<bool>& add_bos) {
    const ModelHandle::Busy busy(handle);
    GenerateRequest request;
    request.prompt = prompt;
    request.add_bos = add_bos_from(add_bos);
    request.max_tokens = max_tokens;
    request.sampling = {temperature, top_k, top_p, seed};
    const GenerateResult r = handle.generate(request);
    const tokenizer::Tokenizer& tok = handle.model().tokenizer;
    py::list steps;
    for (const runtime::GenerationStep& s : r.result.steps) {
        py::dict d;
        d["token"] = s.token;
        d["logit"] = s.logit;
        d["margin"] = s.margin;
        steps.append(d);
    }
    py::dict out;
    out["prompt_tokens"] = r.prompt_tokens;
    out["tokens"] = r.result.tokens;
    out["text"] = as_bytes(tok.decode(r.result.tokens));
    out["steps"] = steps;
    out["stop_reason"] = std::string(runtime::stop_reason_name(r.result.stop_reason));
    out["route"] = r.route;
    out["kernel"] = r.variant;
    return out;
}

// The interpreter's SIGINT and SIGTERM handlers, put back when a run that writes a
// directory returns: the engine's run directory installs its own (remove the temporaries,
// then die by the signal, right for the CLI), which would make a notebook's interrupt
// kill the kernel from then on.
class KeepSignalHandlers {
public:
    KeepSignalHandlers() {
        ::sigaction(SIGINT, nullptr, &int_);
        ::sigaction(SIGTERM, nullptr, &term_);
    }
    ~KeepSignalHandlers() {
        ::sigaction(SIGINT, &int_, nullptr);
        ::sigaction(SIGTERM, &term_, nullptr);
    }
    KeepSignalHandlers(const KeepSignalHandlers&) = delete;
    KeepSignalHandlers& operator=(const KeepSignalHandlers&) = delete;

private:
    struct sigaction int_ {};
    struct sigaction term_ {};
};

// ember extract --dataset FILE --out DIR ...: the run config config_from_options builds
// (app/cmd_extract.cpp), run by the CLI's own dataset run in this process (app/dataset_job's run_dataset_in_this_process).
py::dict extract_dataset(ModelHandle& handle, const std::string& dataset, const std::string& out, const std::string& stages,
                         const std::string& layers, const std::optional<std::string>& select, const std::string& logits,
                         std::uint32_t logit_lens, std::uint32_t batch_tokens, const std::string& on_empty,
                         const std::string& evaluate, const std::vector<std::string>& experiments, bool overwrite) {
    const ModelHandle::Busy busy(handle);
    config::RunConfig c = handle.dataset_config();
    c.dataset.path = fs::absolute(dataset).lexically_normal();
    c.output.dir = fs::absolute(out).lexically_normal();
    c.output.extract = true;
    extract::parse_stages(stages, c.output);
    extract::parse_layers(layers, c.output);
    if (select) c.dataset.select = extract::parse_spec(*select, "select").to_string();
    c.dataset.batch_tokens = batch_tokens;
    if (on_empty != "error" && on_empty != "skip") throw UsageError("on_empty must be error or skip");
    c.dataset.skip_empty = on_empty == "skip";
    if (evaluate != "needed" && evaluate != "whole") throw UsageError("evaluate must be needed or whole");
    c.dataset.evaluate_whole = evaluate == "whole";
    std::size_t n = 0;
    for (const std::string& plugin : experiments) {
        config::ExperimentEntry e;
        e.plugin = fs::absolute(plugin).lexically_normal();
        e.base_dir = fs::current_path();
        e.origin = fmt::format("--experiment {}", ++n);
        c.experiments.push_back(std::move(e));
    }
    extract::parse_logits(logits, c.output);
    c.output.logit_lens = logit_lens;
    c.tracing.path = c.output.dir / "trace.jsonl";

    extract::DatasetRunOptions options;
    options.overwrite = overwrite;
    extract::DatasetResult r;
    {
        const KeepSignalHandlers keep;
        py::gil_scoped_release released;
        r = app::run_dataset_in_this_process(handle.model(), c, options);  // experiments in process, as hooks are
    }
    py::dict d;
    d["dir"] = r.dir;
    d["samples"] = r.samples;
    d["skipped"] = r.skipped;
    d["rows"] = r.rows;
    d["tokens"] = r.tokens;
    d["evaluated_tokens"] = r.evaluated;
    d["arrays"] = r.arrays;
    d["seconds"] = r.seconds;
    d["config_hash"] = config::config_hash(c);
    return d;
}

std::string info_json(const ModelHandle& handle) {
    const runtime::LoadedModel& m = handle.model();
    const auto& t = m.tokenizer.info();
    boost::json::object o = record::model_record(m.path, m.file, m.model->config(), m.sha256);
    const auto id = [](const std::optional<std::uint32_t>& v) { return v ? boost::json::value(*v) : boost::json::value(nullptr); };
    o["tokenizer"] = {{"model", t.model},       {"pre", t.pre},           {"vocab_size", m.tokenizer.vocab_size()},
                      {"bos_id", id(t.bos_id)}, {"eos_id", id(t.eos_id)}, {"add_bos", t.add_bos}};
    o["route"] = handle.options().route;
    o["threads"] = handle.threads();
    return boost::json::serialize(o);
}

// A hook name of another tool (blocks.5.hook_resid_post, model.layers.5.mlp) as
// (stage, layer or None), from the engine's one table (hooks/hook_names.hpp), checked
// against a model's layer count and block post-norms.
py::tuple resolve_hook_name(const std::string& name, std::uint32_t n_layers, bool block_post_norms) {
    const hooks::HookSite site = hooks::fit_hook_site(name, hooks::resolve_hook_name(name), n_layers, block_post_norms);
    return py::make_tuple(std::string(hooks::stage_name(site.stage)),
                          site.layer ? py::object(py::int_(*site.layer)) : py::object(py::none()));
}

py::list tensor_stages() {
    py::list out;
    for (hooks::Stage s : hooks::kTensorStages) {
        const ember_stage_info& info = hooks::stage_info(s);
        py::dict d;
        d["name"] = std::string(info.name);
        d["layer_stage"] = hooks::is_layer_stage(s);
        d["read_only"] = info.access == EMBER_ACCESS_READ_ONLY;
        d["extractable"] = std::find(extract::kStages.begin(), extract::kStages.end(), s) != extract::kStages.end();
        d["shape"] = std::string(info.shape_text);
        d["meaning"] = std::string(info.meaning);
        out.append(d);
    }
    return out;
}

}  // namespace
}  // namespace ember::python

PYBIND11_MODULE(_ember, m) {
    using namespace ember::python;
    m.doc() = "Ember's engine, in process (docs/python.md). Use the `ember` package, not this module.";

    static py::exception<ember::Error> ember_error(m, "EmberError", PyExc_RuntimeError);
    static py::exception<ember::UsageError> usage_error(m, "UsageError", ember_error.ptr());
    static py::exception<ember::experiments::ExperimentFailure> experiment_error(m, "ExperimentError", ember_error.ptr());
    static py::exception<HookFailure> hook_error(m, "HookError", ember_error.ptr());
    g_hook_error = hook_error;
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const HookFailure& e) {
            PyErr_SetString(hook_error.ptr(), e.what());
        } catch (const ember::experiments::ExperimentFailure& e) {
            PyErr_SetString(experiment_error.ptr(), e.what());
        } catch (const ember::UsageError& e) {
            PyErr_SetString(usage_error.ptr(), e.what());
        } catch (const ember::Error& e) {
            PyErr_SetString(ember_error.ptr(), e.what());
        }
    });

    m.def("resolve_hook_name", &resolve_hook_name, py::arg("name"), py::arg("n_layers"), py::arg("block_post_norms"));
    m.def("tensor_stages", &tensor_stages, "every tensor stage: name, layer_stage, read_only, shape, meaning");
    m.def("has_route", [](const std::string& name) {
        const auto route = ember::runtime::route_from_name(name);
        return route && ember::runtime::has_route(*route);
    });

    py::class_<ModelHandle>(m, "ModelHandle")
        .def(py::init([](const std::string& path, const std::string& route, std::uint32_t threads, std::uint32_t ctx,
                         const std::string& kv_type, const std::string& arch) {
                 py::gil_scoped_release released;
                 return new ModelHandle(ModelOptions{path, route, threads, ctx, kv_type, arch});
             }),
             py::arg("path"), py::arg("route"), py::arg("threads"), py::arg("ctx"), py::arg("kv_type"), py::arg("arch"))
        .def("close", &ModelHandle::close)
        .def_property_readonly("closed", &ModelHandle::closed)
        .def_property_readonly("path", [](const ModelHandle& h) { return h.options().path.string(); })
        .def_property_readonly("sha256", [](const ModelHandle& h) { return h.model().sha256; })
        .def_property_readonly("n_layers", [](const ModelHandle& h) { return h.model().model->config().n_layers; })
        .def_property_readonly("n_vocab", [](const ModelHandle& h) { return h.model().model->config().n_vocab; })
        .def("info_json", &info_json)
        // Gemma 4 is the family whose attention and MLP outputs are post-normed before the
        // residual add (docs/extraction.md's stage table), which some hook names depend on.
        .def_property_readonly("block_post_norms",
                               [](const ModelHandle& h) { return h.model().model->config().family == ember::models::Family::Gemma4; })
        .def(
            "tokenize",
            [](const ModelHandle& h, const std::string& text, bool special, const std::optional<bool>& add_bos) {
                ember::tokenizer::EncodeOptions o;
                o.add_bos = add_bos;
                o.parse_special = special;
                const auto& tok = h.model().tokenizer;
                return tokens_dict(tok, tok.encode(text, o));
            },
            py::arg("text"), py::arg("special"), py::arg("add_bos"))
        .def("piece", [](const ModelHandle& h, std::int32_t id, bool special) { return as_bytes(h.model().tokenizer.piece(id, special)); })
        .def("decode", [](const ModelHandle& h, const std::vector<std::int32_t>& ids) { return as_bytes(h.model().tokenizer.decode(ids)); })
        .def("run", &run, py::arg("prompt"), py::arg("stages"), py::arg("layers"), py::arg("positions"), py::arg("select"),
             py::arg("logits"), py::arg("add_bos"), py::arg("hooks"), py::arg("experiments"), py::arg("failure"))
        .def("generate", &generate, py::arg("prompt"), py::arg("max_tokens"), py::arg("temperature"), py::arg("top_k"),
             py::arg("top_p"), py::arg("seed"), py::arg("add_bos"))
        .def("extract_dataset", &extract_dataset, py::arg("dataset"), py::arg("out"), py::arg("stages"), py::arg("layers"),
             py::arg("select"), py::arg("logits"), py::arg("logit_lens"), py::arg("batch_tokens"), py::arg("on_empty"),
             py::arg("evaluate"), py::arg("experiments"), py::arg("overwrite"));
}
