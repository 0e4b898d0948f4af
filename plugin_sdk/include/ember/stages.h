/* The stages of the Ember plugin ABI: one table, read by the host (hooks, runner, plugin
 * loading, extraction, run configs), the C++ helper and the built-in experiments.
 *
 * A stage is a call the host makes into an experiment. Its id is stable across ABI
 * minors (ids of later minors are appended), its descriptor field lives at
 * `descriptor_offset` of ember_plugin_descriptor, and a tensor stage hands the plugin
 * an ember_tensor whose [rows, cols] follow `shape`:
 *
 *   T      tokens in the evaluation (ember_execution_context.input_token_count)
 *   R      rows whose logits are computed (the last one, or all T on request)
 *   n_kv   cached positions visible to the evaluation (start_position + T)
 *   d_sae  the features of the SAE loaded at the site (docs/features.md)
 *   H, D   the layer's query heads and head dimension (Qwen3, Gemma 4: H * D may differ
 *          from n_embd; Gemma 4 layers differ from each other)
 *
 * The table is in firing order: within one evaluation the tensor stages fire in this
 * order, layer by layer, then the logits stages.
 */
#ifndef EMBER_STAGES_H
#define EMBER_STAGES_H

#include "ember/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Stage ids. 1.0: 0-10; 1.1: 11-13; 1.3: 14-15; 1.5: 16. */
enum {
    EMBER_STAGE_CREATE = 0,
    EMBER_STAGE_ON_MODEL_LOADED = 1,
    EMBER_STAGE_BEFORE_PREFILL = 2,
    EMBER_STAGE_BEFORE_LAYER = 3,
    EMBER_STAGE_AFTER_ATTENTION = 4,
    EMBER_STAGE_AFTER_MLP = 5,
    EMBER_STAGE_AFTER_LAYER = 6,
    EMBER_STAGE_BEFORE_LOGITS = 7,
    EMBER_STAGE_AFTER_LOGITS = 8,
    EMBER_STAGE_ON_GENERATION_COMPLETE = 9,
    EMBER_STAGE_ON_ERROR = 10,
    EMBER_STAGE_ATTENTION_PATTERN = 11, /* 1.1 */
    EMBER_STAGE_HEAD_OUTPUTS = 12,      /* 1.1 */
    EMBER_STAGE_MLP_ACTIVATION = 13,    /* 1.1 */
    EMBER_STAGE_RESIDUAL_MID = 14,      /* 1.3 */
    EMBER_STAGE_SAE_FEATURES = 15,      /* 1.3 */
    EMBER_STAGE_MLP_INPUT = 16,         /* 1.5 */
    EMBER_STAGE_COUNT = 17
};

/* What a stage is called with. */
enum {
    EMBER_STAGE_KIND_LIFECYCLE = 0, /* no tensor */
    EMBER_STAGE_KIND_LAYER = 1,     /* ember_layer_stage_fn: a layer context and a tensor */
    EMBER_STAGE_KIND_LOGITS = 2     /* ember_logits_stage_fn: an execution context and a tensor */
};

/* The [rows, cols] of a tensor stage's tensor (the symbols of the header comment). */
enum {
    EMBER_SHAPE_NONE = 0,
    EMBER_SHAPE_TOKENS_BY_EMBD = 1,        /* [T, n_embd] */
    EMBER_SHAPE_TOKENS_BY_HEADS = 2,       /* [T, H * D]: head h in columns [h * D, (h + 1) * D) */
    EMBER_SHAPE_HEAD_TOKENS_BY_KV = 3,     /* [H * T, n_kv]: row h * T + t, column = KV position */
    EMBER_SHAPE_TOKENS_BY_FF = 4,          /* [T, n_ff] */
    EMBER_SHAPE_LOGIT_ROWS_BY_EMBD = 5,    /* [R, n_embd] */
    EMBER_SHAPE_LOGIT_ROWS_BY_VOCAB = 6,   /* [R, n_vocab] */
    EMBER_SHAPE_TOKENS_BY_FEATURES = 7     /* 1.3: [T, d_sae] */
};

/* Whether writes through the tensor change the computation. */
enum {
    EMBER_ACCESS_NONE = 0,      /* lifecycle stages */
    EMBER_ACCESS_WRITABLE = 1,  /* the engine's own buffer: writes change what follows */
    EMBER_ACCESS_READ_ONLY = 2  /* a copy made for the stage: a plugin must not write to it */
};

typedef struct ember_stage_info {
    uint32_t id;              /* EMBER_STAGE_* */
    uint32_t kind;            /* EMBER_STAGE_KIND_* */
    uint32_t shape;           /* EMBER_SHAPE_* */
    uint32_t access;          /* EMBER_ACCESS_* */
    uint32_t since_minor;     /* the ABI 1.x minor that added it */
    uint32_t reserved0;
    const char* name;         /* as configs, run.json and failure messages spell it */
    const char* shape_text;   /* e.g. "[T, n_embd]"; "" for lifecycle stages */
    const char* meaning;      /* what the tensor's values are (what a column holds); "" for lifecycle stages */
    size_t descriptor_offset; /* of its function pointer in ember_plugin_descriptor */
} ember_stage_info;

#ifdef __cplusplus
}
#define EMBER_STAGE_TABLE_STORAGE inline constexpr
#elif defined(__GNUC__) || defined(__clang__)
#define EMBER_STAGE_TABLE_STORAGE static const __attribute__((unused))
#else
#define EMBER_STAGE_TABLE_STORAGE static const
#endif

#define EMBER_DESCRIPTOR_FIELD(field) offsetof(ember_plugin_descriptor, field)

/* Every stage, in firing order. */
EMBER_STAGE_TABLE_STORAGE ember_stage_info ember_stage_table[EMBER_STAGE_COUNT] = {
    {EMBER_STAGE_CREATE, EMBER_STAGE_KIND_LIFECYCLE, EMBER_SHAPE_NONE, EMBER_ACCESS_NONE, 0, 0,
     "create", "",
     "", EMBER_DESCRIPTOR_FIELD(create)},
    {EMBER_STAGE_ON_MODEL_LOADED, EMBER_STAGE_KIND_LIFECYCLE, EMBER_SHAPE_NONE, EMBER_ACCESS_NONE, 0, 0,
     "on_model_loaded", "",
     "", EMBER_DESCRIPTOR_FIELD(on_model_loaded)},
    {EMBER_STAGE_BEFORE_PREFILL, EMBER_STAGE_KIND_LIFECYCLE, EMBER_SHAPE_NONE, EMBER_ACCESS_NONE, 0, 0,
     "before_prefill", "",
     "", EMBER_DESCRIPTOR_FIELD(before_prefill)},
    {EMBER_STAGE_BEFORE_LAYER, EMBER_STAGE_KIND_LAYER, EMBER_SHAPE_TOKENS_BY_EMBD, EMBER_ACCESS_WRITABLE, 0, 0,
     "before_layer", "[T, n_embd]",
     "residual stream entering the layer (n_embd features)", EMBER_DESCRIPTOR_FIELD(before_layer)},
    {EMBER_STAGE_ATTENTION_PATTERN, EMBER_STAGE_KIND_LAYER, EMBER_SHAPE_HEAD_TOKENS_BY_KV, EMBER_ACCESS_READ_ONLY, 1, 0,
     "attention_pattern", "[n_head * T, n_kv]",
     "post-softmax attention probabilities; row h * T + t is head h of token t, column j the weight of KV position j (0 where masked)", EMBER_DESCRIPTOR_FIELD(attention_pattern)},
    {EMBER_STAGE_HEAD_OUTPUTS, EMBER_STAGE_KIND_LAYER, EMBER_SHAPE_TOKENS_BY_HEADS, EMBER_ACCESS_WRITABLE, 1, 0,
     "head_outputs", "[T, n_head * head_dim]",
     "attention output of each head before the output projection; head h in columns [h * head_dim, (h + 1) * head_dim)", EMBER_DESCRIPTOR_FIELD(head_outputs)},
    {EMBER_STAGE_AFTER_ATTENTION, EMBER_STAGE_KIND_LAYER, EMBER_SHAPE_TOKENS_BY_EMBD, EMBER_ACCESS_WRITABLE, 0, 0,
     "after_attention", "[T, n_embd]",
     "attention block output before the residual add (n_embd features)", EMBER_DESCRIPTOR_FIELD(after_attention)},
    {EMBER_STAGE_RESIDUAL_MID, EMBER_STAGE_KIND_LAYER, EMBER_SHAPE_TOKENS_BY_EMBD, EMBER_ACCESS_WRITABLE, 3, 0,
     "residual_mid", "[T, n_embd]",
     "residual stream between the blocks, before_layer + after_attention: what the MLP block reads (TransformerLens hook_resid_mid; n_embd features)", EMBER_DESCRIPTOR_FIELD(residual_mid)},
    {EMBER_STAGE_MLP_INPUT, EMBER_STAGE_KIND_LAYER, EMBER_SHAPE_TOKENS_BY_EMBD, EMBER_ACCESS_WRITABLE, 5, 0,
     "mlp_input", "[T, n_embd]",
     "the MLP block's input after its norm (residual_mid RMS-normed, times the norm's weight): what the gate and up projections read (Hugging Face pre_feedforward_layernorm / Llama's post_attention_layernorm output; n_embd features)", EMBER_DESCRIPTOR_FIELD(mlp_input)},
    {EMBER_STAGE_MLP_ACTIVATION, EMBER_STAGE_KIND_LAYER, EMBER_SHAPE_TOKENS_BY_FF, EMBER_ACCESS_WRITABLE, 1, 0,
     "mlp_activation", "[T, n_ff]",
     "gated activation entering the down projection, one column per MLP neuron (n_ff)", EMBER_DESCRIPTOR_FIELD(mlp_activation)},
    {EMBER_STAGE_AFTER_MLP, EMBER_STAGE_KIND_LAYER, EMBER_SHAPE_TOKENS_BY_EMBD, EMBER_ACCESS_WRITABLE, 0, 0,
     "after_mlp", "[T, n_embd]",
     "MLP block output before the residual add (n_embd features)", EMBER_DESCRIPTOR_FIELD(after_mlp)},
    {EMBER_STAGE_AFTER_LAYER, EMBER_STAGE_KIND_LAYER, EMBER_SHAPE_TOKENS_BY_EMBD, EMBER_ACCESS_WRITABLE, 0, 0,
     "after_layer", "[T, n_embd]",
     "residual stream leaving the layer, llama.cpp's l_out-N (n_embd features)", EMBER_DESCRIPTOR_FIELD(after_layer)},
    {EMBER_STAGE_SAE_FEATURES, EMBER_STAGE_KIND_LAYER, EMBER_SHAPE_TOKENS_BY_FEATURES, EMBER_ACCESS_WRITABLE, 3, 0,
     "sae_features", "[T, d_sae]",
     "the features of an SAE loaded at a site of the layer, right after its encoder; with a splice, edits change the site by decode(edited) - decode(original) (d_sae features)", EMBER_DESCRIPTOR_FIELD(sae_features)},
    {EMBER_STAGE_BEFORE_LOGITS, EMBER_STAGE_KIND_LOGITS, EMBER_SHAPE_LOGIT_ROWS_BY_EMBD, EMBER_ACCESS_WRITABLE, 0, 0,
     "before_logits", "[R, n_embd]",
     "hidden state after the final norm, llama.cpp's result_norm (n_embd features)", EMBER_DESCRIPTOR_FIELD(before_logits)},
    {EMBER_STAGE_AFTER_LOGITS, EMBER_STAGE_KIND_LOGITS, EMBER_SHAPE_LOGIT_ROWS_BY_VOCAB, EMBER_ACCESS_WRITABLE, 0, 0,
     "after_logits", "[R, n_vocab]",
     "final logits after any soft-capping, one column per token id (n_vocab)", EMBER_DESCRIPTOR_FIELD(after_logits)},
    {EMBER_STAGE_ON_GENERATION_COMPLETE, EMBER_STAGE_KIND_LIFECYCLE, EMBER_SHAPE_NONE, EMBER_ACCESS_NONE, 0, 0,
     "on_generation_complete", "",
     "", EMBER_DESCRIPTOR_FIELD(on_generation_complete)},
    {EMBER_STAGE_ON_ERROR, EMBER_STAGE_KIND_LIFECYCLE, EMBER_SHAPE_NONE, EMBER_ACCESS_NONE, 0, 0,
     "on_error", "",
     "", EMBER_DESCRIPTOR_FIELD(on_error)},
};

#undef EMBER_DESCRIPTOR_FIELD
#undef EMBER_STAGE_TABLE_STORAGE

#ifdef __cplusplus
/* The table's row for stage `id`; null for an id the table does not have. */
constexpr const ember_stage_info* ember_find_stage(uint32_t id) {
    for (const ember_stage_info& s : ember_stage_table)
        if (s.id == id) return &s;
    return nullptr;
}

/* Every id from 0 to EMBER_STAGE_COUNT - 1 has exactly one row, each stage of a minor
 * lies beyond the descriptor of the minors before it, and a tensor stage has a shape. */
constexpr bool ember_stage_table_is_consistent() {
    for (uint32_t id = 0; id < EMBER_STAGE_COUNT; ++id) {
        int rows = 0;
        for (const ember_stage_info& s : ember_stage_table) rows += s.id == id ? 1 : 0;
        if (rows != 1) return false;
    }
    for (const ember_stage_info& s : ember_stage_table) {
        if (s.since_minor > 0 && s.descriptor_offset < offsetof(ember_plugin_descriptor, attention_pattern)) return false;
        if ((s.kind == EMBER_STAGE_KIND_LIFECYCLE) != (s.shape == EMBER_SHAPE_NONE)) return false;
        if ((s.kind == EMBER_STAGE_KIND_LIFECYCLE) != (s.access == EMBER_ACCESS_NONE)) return false;
    }
    return true;
}
static_assert(ember_stage_table_is_consistent(), "ember_stage_table: one row per id, shapes on tensor stages only");

/* The ids of the tensor stages (those with a tensor), in firing order. */
inline constexpr size_t ember_tensor_stage_count = [] {
    size_t n = 0;
    for (const ember_stage_info& s : ember_stage_table) n += s.kind != EMBER_STAGE_KIND_LIFECYCLE ? 1 : 0;
    return n;
}();
struct ember_tensor_stage_list {
    uint32_t ids[ember_tensor_stage_count];
    constexpr const uint32_t* begin() const { return ids; }
    constexpr const uint32_t* end() const { return ids + ember_tensor_stage_count; }
};
inline constexpr ember_tensor_stage_list ember_tensor_stages = [] {
    ember_tensor_stage_list out{};
    size_t n = 0;
    for (const ember_stage_info& s : ember_stage_table)
        if (s.kind != EMBER_STAGE_KIND_LIFECYCLE) out.ids[n++] = s.id;
    return out;
}();
#endif

#endif /* EMBER_STAGES_H */
