#include "python_hooks.hpp"

#include <fmt/format.h>
#include <pybind11/numpy.h>

#include <cstring>

namespace ember::python {
namespace {

namespace py = pybind11;

bool read_only(hooks::Stage stage) { return hooks::stage_info(stage).access == EMBER_ACCESS_READ_ONLY; }

// "(phase=prefill, layer=3)" / "(phase=decode)", as the experiment runner writes it.
std::string site_text(hooks::Stage stage, const hooks::EvalInfo& eval, std::optional<std::uint32_t> layer) {
    if (layer) return fmt::format("{} (phase={}, layer={})", hooks::stage_name(stage), hooks::phase_name(eval.phase), *layer);
    return fmt::format("{} (phase={})", hooks::stage_name(stage), hooks::phase_name(eval.phase));
}

// The prompt positions of the rows a stage holds (attention_pattern: n_head rows each).
py::list row_positions(hooks::Stage stage, const hooks::EvalInfo& eval) {
    py::list out;
    const bool logits_stage = !hooks::is_layer_stage(stage);
    const std::size_t first = logits_stage && !eval.all_logits ? eval.start_position + eval.n_tokens - 1 : eval.start_position;
    for (std::size_t p = first; p < eval.start_position + eval.n_tokens; ++p) out.append(p);
    return out;
}

}  // namespace

PythonHooks::PythonHooks(std::vector<HookSite> sites, const models::ModelConfig& config)
    : sites_(std::move(sites)), config_(config) {
    for (std::size_t i = 0; i < sites_.size(); ++i) {
        const HookSite& s = sites_[i];
        const std::string_view name = hooks::stage_name(s.stage);
        if (!hooks::is_tensor_stage(s.stage))
            throw UsageError(fmt::format("hook '{}': '{}' is not a tensor stage", s.name, name));
        std::size_t slot = 0;
        if (hooks::is_layer_stage(s.stage)) {
            if (!s.layer) throw UsageError(fmt::format("hook '{}': {} is a layer stage: give (\"{}\", LAYER)", s.name, name, name));
            if (*s.layer >= config.n_layers)
                throw UsageError(fmt::format("hook '{}': layer {} does not exist ({} has layers 0-{})", s.name, *s.layer, name,
                                             config.n_layers - 1));
            slot = *s.layer;
        } else if (s.layer) {
            throw UsageError(fmt::format("hook '{}': {} has no layers: give \"{}\" alone", s.name, name, name));
        }
        std::vector<int>& table = index_[hooks::index_of(s.stage)];
        if (table.size() <= slot) table.resize(slot + 1, -1);
        if (table[slot] >= 0)
            throw UsageError(fmt::format("hook '{}': {} already has hook '{}' there", s.name,
                                         s.layer ? fmt::format("({}, {})", name, *s.layer) : std::string(name),
                                         sites_[static_cast<std::size_t>(table[slot])].name));
        table[slot] = static_cast<int>(i);
        mask_ |= hooks::stage_bit(s.stage);
    }
}

PythonHooks::~PythonHooks() = default;

const HookSite* PythonHooks::find(hooks::Stage stage, std::uint32_t layer) const {
    if (!wants(stage)) return nullptr;
    const std::vector<int>& table = index_[hooks::index_of(stage)];
    const std::size_t slot = layer == hooks::kNoLayer ? 0 : layer;
    if (slot >= table.size() || table[slot] < 0) return nullptr;
    return &sites_[static_cast<std::size_t>(table[slot])];
}

void PythonHooks::stage(hooks::Stage stage, const hooks::EvalInfo& eval, std::uint32_t layer, hooks::TensorView tensor) {
    const HookSite* site = find(stage, layer);
    if (site == nullptr) return;  // no Python at a site without a callable
    py::gil_scoped_acquire gil;
    call(*site, eval, tensor);
}

void PythonHooks::call(const HookSite& site, const hooks::EvalInfo& eval, hooks::TensorView tensor) {
    const std::string where = site_text(site.stage, eval, site.layer);
    const auto fail = [&](const std::string& why) { return HookFailure(fmt::format("python hook '{}' failed in {}: {}", site.name, where, why)); };

    // The view shares the engine's buffer; the capsule keeps the buffer's owner alive for
    // as long as Python holds the array (its values after the hook returns are whatever
    // the engine writes there next).
    auto* owner = new std::shared_ptr<const void>(owner_);
    const py::capsule base(owner, [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); });
    const std::vector<py::ssize_t> shape = {static_cast<py::ssize_t>(tensor.rows), static_cast<py::ssize_t>(tensor.cols)};
    const std::vector<py::ssize_t> strides = {static_cast<py::ssize_t>(tensor.cols * sizeof(float)), sizeof(float)};
    py::array_t<float> view(shape, strides, tensor.data, base);
    if (read_only(site.stage)) view.attr("setflags")(py::arg("write") = false);

    const py::object context = py::module_::import("types").attr("SimpleNamespace")(
        py::arg("stage") = std::string(hooks::stage_name(site.stage)),
        py::arg("layer") = site.layer ? py::object(py::int_(*site.layer)) : py::object(py::none()),
        py::arg("phase") = std::string(hooks::phase_name(eval.phase)), py::arg("start_position") = eval.start_position,
        py::arg("n_tokens") = eval.n_tokens, py::arg("step") = eval.step,
        py::arg("positions") = row_positions(site.stage, eval),
        py::arg("rows_per_position") = site.stage == hooks::Stage::AttentionPattern && site.layer
                                           ? config_.layers[*site.layer].n_head
                                           : 1u,
        py::arg("read_only") = read_only(site.stage));

    py::object result;
    try {
        result = site.fn(view, context);
    } catch (py::error_already_set& e) {
        const std::string why = fmt::format("{}: {}", py::str(e.type().attr("__name__")).cast<std::string>(),
                                            py::str(e.value()).cast<std::string>());
        error_.emplace(std::move(e));
        throw fail(why);
    }
    if (result.is_none()) return;

    // A returned array replaces the activation.
    const auto replacement = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(result);
    if (!replacement)
        throw fail(fmt::format("it returned a {}, not None or an array of numbers",
                               py::str(result.get_type().attr("__name__")).cast<std::string>()));
    if (replacement.ndim() != 2 || static_cast<std::size_t>(replacement.shape(0)) != tensor.rows ||
        static_cast<std::size_t>(replacement.shape(1)) != tensor.cols) {
        std::string got;
        for (py::ssize_t d = 0; d < replacement.ndim(); ++d) got += fmt::format("{}{}", d ? ", " : "", replacement.shape(d));
        throw fail(fmt::format("it returned an array of shape ({}); the activation is ({}, {})", got, tensor.rows, tensor.cols));
    }
    if (replacement.data() == tensor.data) return;  // it returned the view it changed
    if (read_only(site.stage)) throw fail(fmt::format("{} is read-only (a copy): it cannot be replaced", hooks::stage_name(site.stage)));
    std::memcpy(tensor.data, replacement.data(), tensor.rows * tensor.cols * sizeof(float));
}

}  // namespace ember::python
