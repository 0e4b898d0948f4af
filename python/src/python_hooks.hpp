// Python callables at hook sites, as a hooks::ActiveHooks (docs/python.md, "Hooks").
//
// Each site is (stage, layer) and one callable: fn(activation, context). `activation` is
// a NumPy float32 [rows, cols] view of the engine's own buffer (no copy): reading it
// observes, writing it intervenes, as a plugin's TensorAccess does. Returning an array
// instead replaces the activation with it (same shape, or the run fails). The read-only
// stage (attention_pattern, a copy) gets a read-only view.
//
// The engine runs with the GIL released; a site acquires it only when a callable is
// registered there, so stages without one cost what any ActiveHooks costs and no Python
// runs. A callable that raises stops the run: the exception is kept (python_error()) and
// a HookFailure names it like a plugin's failure,
//   python hook 'NAME' failed in after_mlp (phase=prefill, layer=3): ValueError: boom
#pragma once

#include <pybind11/pybind11.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "hooks/hooks.hpp"
#include "models/model_config.hpp"

namespace ember::python {

struct HookSite {
    hooks::Stage stage = hooks::Stage::AfterLayer;
    std::optional<std::uint32_t> layer;  // none for the logits stages
    pybind11::object fn;
    std::string name;  // for messages: the callable's name
};

// A hook's failure (its exception, or a result of the wrong shape): the run's failure.
class HookFailure : public Error {
public:
    using Error::Error;
};

class PythonHooks final : public hooks::ActiveHooks {
public:
    // ember::UsageError naming the site for a stage that is not a tensor stage, a layer
    // stage without a layer or with one the model does not have, a logits stage with one.
    PythonHooks(std::vector<HookSite> sites, const models::ModelConfig& config);
    ~PythonHooks() override;  // the GIL must be held (it releases Python objects)
    PythonHooks(const PythonHooks&) = delete;
    PythonHooks& operator=(const PythonHooks&) = delete;

    bool empty() const { return sites_.empty(); }
    // What the views handed to Python point into (the session): kept alive by every view.
    void keep_alive(std::shared_ptr<const void> owner) { owner_ = std::move(owner); }

    void stage(hooks::Stage stage, const hooks::EvalInfo& eval, std::uint32_t layer, hooks::TensorView tensor) override;
    bool wants(hooks::Stage stage) const override { return (mask_ & hooks::stage_bit(stage)) != 0; }

    // The exception the failing callable raised (none when no hook failed, or the failure
    // was a wrong result).
    std::optional<pybind11::error_already_set>& python_error() { return error_; }

private:
    const HookSite* find(hooks::Stage stage, std::uint32_t layer) const;
    void call(const HookSite& site, const hooks::EvalInfo& eval, hooks::TensorView tensor);

    std::vector<HookSite> sites_;
    // [stage id][layer] -> index into sites_, or -1; the logits stages use slot 0.
    std::array<std::vector<int>, hooks::kStageCount> index_;
    hooks::StageMask mask_ = 0;
    std::shared_ptr<const void> owner_;
    std::optional<pybind11::error_already_set> error_;
    const models::ModelConfig& config_;
};

}  // namespace ember::python
