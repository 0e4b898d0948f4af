// A session runs one sequence through a model: the prompt as one prefill evaluation,
// then one decode evaluation per generated token, each appending to the KV cache (F32,
// or F16 with kv_type).
// It owns what a sequence needs: the route's backend, the KV cache (sized by the context
// length), the preallocated workspace and a oneTBB arena with exactly `threads` threads.
//
// Hooks: pass an ActiveHooks to an evaluation to see and change the tensors at every
// stage site; pass none and the forward pass is the DisabledHooks instantiation.
// Tracing: a kernels::OpObserver in the options sees every operation (null = off).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "hooks/hooks.hpp"
#include "kernels/ops.hpp"
#include "models/model.hpp"

namespace ember::runtime {

enum class Route { Reference, Fast };
std::string_view route_name(Route route);
std::optional<Route> route_from_name(std::string_view name);

// Whether this build has the route: a -DEMBER_FAST=OFF build (the default off x86-64)
// has the reference route only.
bool has_route(Route route);
// The fast route where it is built, else the reference route.
Route default_route();
// Throws ember::Error naming the route and the build option when has_route() is false.
void require_route(Route route);

// The backend of a route. Throws ember::Error for a route this build does not have.
std::unique_ptr<kernels::Backend> make_backend(Route route);

// min(4096, the model's training context).
std::size_t default_context_length(const models::ModelConfig& config);

struct SessionOptions {
    Route route = default_route();
    kernels::KvType kv_type = kernels::KvType::f32;  // the KV cache's element type
    std::size_t context_length = 0;  // 0: default_context_length()
    std::size_t threads = 1;
    // The largest evaluation to preallocate for (usually the prompt length), and whether
    // it asks for the logits of every row. Larger evaluations grow the workspace.
    std::size_t max_batch = 1;
    bool all_logits = false;
    kernels::OpObserver* observer = nullptr;
};

class Session {
public:
    Session(const models::Model& model, const SessionOptions& options);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Evaluates `tokens` at positions position() .. position() + n - 1 in one prefill
    // evaluation. Returns the logits [1, n_vocab] of the last token, or [n, n_vocab] of
    // every token with all_logits; valid until the next evaluation.
    kernels::ConstRows prefill(std::span<const std::int32_t> tokens, bool all_logits = false,
                               hooks::ActiveHooks* hooks = nullptr);
    // Evaluates several independent sequences in one prefill evaluation: `tokens` holds
    // them one after another, `lengths` their token counts. Each sequence starts at
    // position 0 and attends only to its own tokens (its K/V in its own cache slots), so
    // every row is computed exactly as in a prefill of its sequence alone. Needs an empty
    // session (after reset()); the next evaluation must follow a reset(). Returns the
    // logits of the last row, or with all_logits the rows of every sequence that
    // `sequence_all_logits` (one flag per sequence) names: all its rows, or (false) its
    // last one, as a prefill of it alone with that flag computes them; the other rows'
    // logits are not written.
    kernels::ConstRows prefill_packed(std::span<const std::int32_t> tokens, std::span<const std::size_t> lengths,
                                      bool all_logits, std::span<const bool> sequence_all_logits,
                                      hooks::ActiveHooks* hooks = nullptr);
    // Evaluates one token at position(); returns its logits [1, n_vocab].
    kernels::ConstRows decode(std::int32_t token, hooks::ActiveHooks* hooks = nullptr);

    // Forgets the sequence: position 0, step 0 (the cache is overwritten as it refills).
    void reset();

    std::size_t position() const { return position_; }     // tokens in the cache
    std::size_t context_length() const { return context_length_; }
    std::size_t step() const { return step_; }             // 0 after prefill, +1 per decode
    std::size_t threads() const { return threads_; }
    const models::Model& model() const { return model_; }
    const kernels::Backend& backend() const { return *backend_; }
    kernels::OpObserver* observer() const { return ops_.observer(); }
    // Attaches or (null) detaches the observer: evaluations a run makes besides its own
    // (a target's score, an effect's unedited prompt) stay out of its trace.
    void set_observer(kernels::OpObserver* observer) { ops_.set_observer(observer); }
    const models::KvCache& kv_cache() const { return state_.kv_cache; }

private:
    kernels::ConstRows evaluate(std::span<const std::int32_t> tokens, hooks::Phase phase, bool all_logits,
                                hooks::ActiveHooks* hooks, std::span<const models::Segment> segments = {});

    struct Arena;  // the oneTBB task_arena evaluations run in

    const models::Model& model_;
    std::unique_ptr<kernels::Backend> backend_;
    kernels::Ops ops_;
    std::unique_ptr<Arena> arena_;
    std::size_t context_length_ = 0;
    std::size_t threads_ = 1;
    models::ForwardState state_;
    std::size_t position_ = 0;
    std::size_t step_ = 0;
    bool started_ = false;
    bool packed_ = false;  // the cache holds a packed evaluation's sequences: only reset() may follow
};

}  // namespace ember::runtime
