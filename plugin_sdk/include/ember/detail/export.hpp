// How ember/experiment.hpp turns a class into the C descriptor of plugin.h. Included by
// experiment.hpp; not meant to be included on its own.
//
// - ExportNames: the descriptor's static name, version and description, checked at
//   compile time (a name is [a-z0-9._-], at most 63 bytes). Without an explicit name the
//   class name is used in kebab case: Counter -> "counter", FiniteCheck -> "finite-check".
// - Binding<T>: the C functions of the descriptor. Each sets the current host services,
//   converts the C context to its C++ form, calls the class, and turns a failed Status or
//   any exception into EMBER_FAILED with the message in the host's error buffer.
// - make_descriptor<T>: a constant descriptor whose stage pointers are null for every
//   stage T does not override (decided at compile time); EMBER_PLUGIN_FLAG_CONCURRENT set
//   when T declares `static constexpr bool concurrent = true;`.
#pragma once

#include <array>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace ember::detail {

// Called only from a failing constant evaluation, so its name is the compiler's message.
void plugin_name_must_be_1_to_63_characters_of_a_z_0_9_dot_underscore_dash();
void experiment_class_name_cannot_be_turned_into_a_plugin_name_pass_one_explicitly();

struct ExportNames {
    std::array<char, 64> name{};
    const char* version = "0.0.0";
    const char* description = "";

    // The name derived from the class name, e.g. "FiniteCheck" -> "finite-check".
    consteval explicit ExportNames(const char* class_name) {
        const char* start = class_name;
        for (const char* p = class_name; *p; ++p)
            if (*p == ':') start = p + 1;
        std::size_t n = 0;
        for (const char* p = start; *p; ++p) {
            const char c = *p;
            const bool upper = c >= 'A' && c <= 'Z';
            const bool lower_or_digit = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
            if (!upper && !lower_or_digit && c != '_' && c != '.' && c != '-')
                experiment_class_name_cannot_be_turned_into_a_plugin_name_pass_one_explicitly();
            if (upper && p != start) {
                const char prev = p[-1];
                const bool prev_lower = (prev >= 'a' && prev <= 'z') || (prev >= '0' && prev <= '9');
                const bool next_lower = p[1] >= 'a' && p[1] <= 'z';
                const bool prev_upper = prev >= 'A' && prev <= 'Z';
                if (prev_lower || (prev_upper && next_lower)) push(n, '-');
            }
            push(n, upper ? static_cast<char>(c - 'A' + 'a') : c);
        }
        if (n == 0) plugin_name_must_be_1_to_63_characters_of_a_z_0_9_dot_underscore_dash();
    }

    consteval ExportNames(const char* /*class_name*/, const char* explicit_name, const char* version_ = "0.0.0",
                          const char* description_ = "")
        : version(version_), description(description_) {
        std::size_t n = 0;
        for (const char* p = explicit_name; *p; ++p) {
            const char c = *p;
            const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
            if (!ok) plugin_name_must_be_1_to_63_characters_of_a_z_0_9_dot_underscore_dash();
            push(n, c);
        }
        if (n == 0) plugin_name_must_be_1_to_63_characters_of_a_z_0_9_dot_underscore_dash();
    }

private:
    consteval void push(std::size_t& n, char c) {
        if (n + 1 >= name.size()) plugin_name_must_be_1_to_63_characters_of_a_z_0_9_dot_underscore_dash();
        name[n++] = c;
    }
};

// Makes ember::host() answer for the instance being called, for the call's duration.
class ScopedServices {
public:
    explicit ScopedServices(const ember_host_services* services) : saved_(current_services) {
        current_services = services;
    }
    ~ScopedServices() { current_services = saved_; }
    ScopedServices(const ScopedServices&) = delete;
    ScopedServices& operator=(const ScopedServices&) = delete;

private:
    const ember_host_services* saved_;
};

template <class F>
ember_status guarded(const ember_host_services* services, ember_error_buffer* error, F&& body) noexcept {
    ScopedServices scope(services);
    try {
        const Status status = body();
        if (status.ok()) return EMBER_OK;
        ember_error_set(error, status.message().empty() ? "failed (no message given)" : status.message().c_str());
    } catch (const std::exception& e) {
        ember_error_set(error, e.what());
    } catch (...) {
        ember_error_set(error, "unknown exception (not derived from std::exception)");
    }
    return EMBER_FAILED;
}


// Throws (the stage then fails with the message) for a family code this SDK does not know:
// a plugin never mistakes a newer host's family for another.
inline ModelContext to_model_context(const ember_model_context* m) {
    ModelContext out;
    if (!m) return out;
    const FamilyCode* known = nullptr;
    for (const FamilyCode& f : kFamilyCodes)
        if (f.code == m->family) known = &f;
    if (!known)
        throw std::runtime_error("the host passed model family code " + std::to_string(m->family) +
                                 ", which this plugin's SDK does not know (rebuild the plugin against the host's SDK)");
    out.family = known->family;
    out.model_name = m->model_name ? std::string_view(m->model_name) : std::string_view();
    out.n_layers = m->n_layers;
    out.n_embd = m->n_embd;
    out.n_vocab = m->n_vocab;
    return out;
}

// Throws (on_generation_complete then fails with the message) for a stop code this SDK
// does not know: a newer host's reason is never mistaken for max_tokens.
inline StopReason to_stop_reason(std::uint32_t reason) {
    for (const StopCode& s : kStopCodes)
        if (s.code == reason) return s.reason;
    throw std::runtime_error("the host passed stop reason code " + std::to_string(reason) +
                             ", which this plugin's SDK does not know (rebuild the plugin against the host's SDK)");
}

using LayerStage = Status (Experiment::*)(const LayerContext&, TensorAccess&);
using LogitsStage = Status (Experiment::*)(const ExecutionContext&, TensorAccess&);

template <class T>
struct Binding {
    static_assert(std::is_base_of_v<Experiment, T>, "an exported experiment must derive from ember::Experiment");
    static_assert(std::is_constructible_v<T, const ExperimentConfig&> || std::is_default_constructible_v<T>,
                  "an experiment needs a default constructor or one taking const ember::ExperimentConfig&");

    struct Instance {
        const ember_host_services* services = nullptr;
        std::unique_ptr<Experiment> experiment;
        const ember_model_context* model_source = nullptr;
        ModelContext model;

        const ModelContext& model_context(const ember_model_context* m) {
            if (m != model_source) {
                model_source = m;
                model = to_model_context(m);
            }
            return model;
        }
        ExecutionContext execution_context(const ember_execution_context& c) {
            return ExecutionContext{c.phase == EMBER_PHASE_DECODE ? ExecutionPhase::Decode : ExecutionPhase::Prefill,
                                    static_cast<std::size_t>(c.start_position),
                                    static_cast<std::size_t>(c.input_token_count),
                                    c.tracing == EMBER_TRACING_ENABLED ? TracingState::Enabled : TracingState::Disabled,
                                    model_context(c.model),
                                    EMBER_HAS_FIELD(&c, ember_execution_context, decode_step)
                                        ? static_cast<std::size_t>(c.decode_step)
                                        : 0};
        }
        GenerationContext generation_context(const ember_generation_context& c) {
            return GenerationContext{static_cast<std::size_t>(c.generated_tokens),
                                     static_cast<std::size_t>(c.prompt_tokens),
                                     to_stop_reason(c.stop_reason),
                                     c.run_id ? std::string_view(c.run_id) : std::string_view(),
                                     c.elapsed_ms,
                                     model_context(c.model)};
        }
    };

    static LayerContext layer_context(Instance& in, const ember_layer_context& c) {
        LayerContext layer{in.execution_context(*c.execution), c.layer_index};
        if (EMBER_HAS_FIELD(&c, ember_layer_context, n_ff)) {
            layer.n_head = c.n_head;
            layer.head_dim = c.head_dim;
            layer.n_head_kv = c.n_head_kv;
            layer.n_ff = c.n_ff;
        }
        return layer;
    }

    static ember_status create(const char* config_json, const ember_host_services* host, void** out,
                               ember_error_buffer* error) noexcept {
        if (!out) return EMBER_FAILED;
        *out = nullptr;
        return guarded(host, error, [&]() -> Status {
            auto instance = std::make_unique<Instance>();
            instance->services = host;
            const ExperimentConfig config(config_json ? config_json : "{}");
            if constexpr (std::is_constructible_v<T, const ExperimentConfig&>) {
                instance->experiment = std::make_unique<T>(config);
            } else {
                if (!config.empty())
                    return Status::error("this experiment takes no configuration, but [experiment.config] has '" +
                                         config.keys().front() + "'");
                instance->experiment = std::make_unique<T>();
            }
            const char* exported = ember_plugin_entry()->name;
            const char* named = instance->experiment->name();
            if (!named || std::string_view(named) != exported)
                return Status::error(std::string("name() returns '") + (named ? named : "(null)") +
                                     "' but the plugin is exported as '" + exported +
                                     "'; pass the name to EMBER_EXPORT_EXPERIMENT(Class, \"name\", \"version\", "
                                     "\"description\")");
            *out = instance.release();
            return {};
        });
    }

    static void destroy(void* p) noexcept {
        auto* instance = static_cast<Instance*>(p);
        if (!instance) return;
        ScopedServices scope(instance->services);
        delete instance;
    }

    static ember_status on_model_loaded(void* p, const ember_model_context* model, ember_error_buffer* error) noexcept {
        auto& in = *static_cast<Instance*>(p);
        return guarded(in.services, error, [&] { return in.experiment->on_model_loaded(in.model_context(model)); });
    }

    static ember_status before_prefill(void* p, const ember_execution_context* ctx, ember_error_buffer* error) noexcept {
        auto& in = *static_cast<Instance*>(p);
        return guarded(in.services, error, [&] { return in.experiment->before_prefill(in.execution_context(*ctx)); });
    }

    template <LayerStage Stage>
    static ember_status layer_stage(void* p, const ember_layer_context* ctx, ember_tensor* tensor,
                                    ember_error_buffer* error) noexcept {
        auto& in = *static_cast<Instance*>(p);
        return guarded(in.services, error, [&]() -> Status {
            if (tensor->dtype != EMBER_DTYPE_F32) return Status::error("unsupported tensor dtype");
            const LayerContext layer = layer_context(in, *ctx);
            TensorAccess access(tensor->data, static_cast<std::size_t>(tensor->rows),
                                static_cast<std::size_t>(tensor->cols));
            return ((*in.experiment).*Stage)(layer, access);
        });
    }

    // attention_pattern: the same call, with a read-only view.
    static ember_status pattern_stage(void* p, const ember_layer_context* ctx, ember_tensor* tensor,
                                      ember_error_buffer* error) noexcept {
        auto& in = *static_cast<Instance*>(p);
        return guarded(in.services, error, [&]() -> Status {
            if (tensor->dtype != EMBER_DTYPE_F32) return Status::error("unsupported tensor dtype");
            const LayerContext layer = layer_context(in, *ctx);
            const TensorView view(tensor->data, static_cast<std::size_t>(tensor->rows),
                                  static_cast<std::size_t>(tensor->cols));
            return in.experiment->attention_pattern(layer, view);
        });
    }

    static std::uint64_t subscribed_stages(void* p) noexcept {
        auto& in = *static_cast<Instance*>(p);
        try {
            return in.experiment->subscribed_stages();
        } catch (...) {
            return ~std::uint64_t{0};  // when in doubt, every stage it implements
        }
    }

    template <LogitsStage Stage>
    static ember_status logits_stage(void* p, const ember_execution_context* ctx, ember_tensor* tensor,
                                     ember_error_buffer* error) noexcept {
        auto& in = *static_cast<Instance*>(p);
        return guarded(in.services, error, [&]() -> Status {
            if (tensor->dtype != EMBER_DTYPE_F32) return Status::error("unsupported tensor dtype");
            TensorAccess access(tensor->data, static_cast<std::size_t>(tensor->rows),
                                static_cast<std::size_t>(tensor->cols));
            return ((*in.experiment).*Stage)(in.execution_context(*ctx), access);
        });
    }

    static ember_status on_generation_complete(void* p, const ember_generation_context* ctx,
                                               ember_error_buffer* error) noexcept {
        auto& in = *static_cast<Instance*>(p);
        return guarded(in.services, error,
                       [&] { return in.experiment->on_generation_complete(in.generation_context(*ctx)); });
    }

    static ember_status on_error(void* p, const ember_generation_context* ctx, const char* message,
                                 ember_error_buffer* error) noexcept {
        auto& in = *static_cast<Instance*>(p);
        return guarded(in.services, error, [&] {
            return in.experiment->on_error(in.generation_context(*ctx),
                                           message ? std::string_view(message) : std::string_view());
        });
    }
};

// A stage counts as implemented when T (or a base between it and Experiment) declares
// it: then &T::stage names a member of that class instead of Experiment's.
#define EMBER_DETAIL_OVERRIDES(T, stage) (!std::is_same_v<decltype(&T::stage), decltype(&Experiment::stage)>)

template <class T>
constexpr ember_plugin_descriptor make_descriptor(const ExportNames& names) {
    using B = Binding<T>;
    ember_plugin_descriptor d{};
    d.abi = ember_abi_header{EMBER_PLUGIN_MAGIC, EMBER_PLUGIN_ABI_MAJOR, EMBER_PLUGIN_ABI_MINOR,
                             static_cast<std::uint32_t>(sizeof(ember_plugin_descriptor))};
    d.name = names.name.data();
    d.version = names.version;
    d.description = names.description;
    d.create = &B::create;
    d.destroy = &B::destroy;
    if constexpr (EMBER_DETAIL_OVERRIDES(T, on_model_loaded)) d.on_model_loaded = &B::on_model_loaded;
    if constexpr (EMBER_DETAIL_OVERRIDES(T, before_prefill)) d.before_prefill = &B::before_prefill;
    if constexpr (EMBER_DETAIL_OVERRIDES(T, before_layer))
        d.before_layer = &B::template layer_stage<&Experiment::before_layer>;
    if constexpr (EMBER_DETAIL_OVERRIDES(T, after_attention))
        d.after_attention = &B::template layer_stage<&Experiment::after_attention>;
    if constexpr (EMBER_DETAIL_OVERRIDES(T, after_mlp)) d.after_mlp = &B::template layer_stage<&Experiment::after_mlp>;
    if constexpr (EMBER_DETAIL_OVERRIDES(T, after_layer))
        d.after_layer = &B::template layer_stage<&Experiment::after_layer>;
    if constexpr (EMBER_DETAIL_OVERRIDES(T, before_logits))
        d.before_logits = &B::template logits_stage<&Experiment::before_logits>;
    if constexpr (EMBER_DETAIL_OVERRIDES(T, after_logits))
        d.after_logits = &B::template logits_stage<&Experiment::after_logits>;
    if constexpr (EMBER_DETAIL_OVERRIDES(T, on_generation_complete))
        d.on_generation_complete = &B::on_generation_complete;
    if constexpr (EMBER_DETAIL_OVERRIDES(T, on_error)) d.on_error = &B::on_error;
    // 1.1
    if constexpr (EMBER_DETAIL_OVERRIDES(T, attention_pattern)) d.attention_pattern = &B::pattern_stage;
    if constexpr (EMBER_DETAIL_OVERRIDES(T, head_outputs))
        d.head_outputs = &B::template layer_stage<&Experiment::head_outputs>;
    if constexpr (EMBER_DETAIL_OVERRIDES(T, mlp_activation))
        d.mlp_activation = &B::template layer_stage<&Experiment::mlp_activation>;
    if constexpr (EMBER_DETAIL_OVERRIDES(T, subscribed_stages)) d.subscribed_stages = &B::subscribed_stages;
    // 1.3
    if constexpr (EMBER_DETAIL_OVERRIDES(T, residual_mid))
        d.residual_mid = &B::template layer_stage<&Experiment::residual_mid>;
    if constexpr (EMBER_DETAIL_OVERRIDES(T, sae_features))
        d.sae_features = &B::template layer_stage<&Experiment::sae_features>;
    // 1.5
    if constexpr (EMBER_DETAIL_OVERRIDES(T, mlp_input)) d.mlp_input = &B::template layer_stage<&Experiment::mlp_input>;
    if constexpr (requires { T::concurrent; }) d.flags |= T::concurrent ? EMBER_PLUGIN_FLAG_CONCURRENT : 0u;
    return d;
}

#undef EMBER_DETAIL_OVERRIDES

}  // namespace ember::detail

// Exports `Class` as this shared object's experiment: defines ember_plugin_entry.
// EMBER_EXPORT_EXPERIMENT(Class) or EMBER_EXPORT_EXPERIMENT(Class, "name", "version", "description").
#define EMBER_EXPORT_EXPERIMENT(Class, ...)                                                              \
    extern "C" EMBER_PLUGIN_EXPORT const ember_plugin_descriptor* ember_plugin_entry(void) {              \
        static constexpr ::ember::detail::ExportNames ember_export_names{#Class __VA_OPT__(, ) __VA_ARGS__}; \
        static constexpr ember_plugin_descriptor ember_export_descriptor =                               \
            ::ember::detail::make_descriptor<Class>(ember_export_names);                                  \
        return &ember_export_descriptor;                                                                  \
    }
