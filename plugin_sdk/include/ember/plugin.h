/* The Ember plugin ABI, version 1.5 (1.0 plus the fields marked 1.1 to 1.5).
 *
 * An experiment is a shared object that exports exactly one C function,
 *
 *     const ember_plugin_descriptor* ember_plugin_entry(void);
 *
 * returning a pointer to a static descriptor. Everything else is reached through it.
 * C++ authors do not write this by hand: ember/experiment.hpp builds the descriptor
 * from a class (EMBER_EXPORT_EXPERIMENT). This header is the contract itself, usable
 * from C11 or C++.
 *
 * Rules (docs/plugin-guide.md explains them at length):
 * - Every public struct starts with its size (or, for the descriptor, an ABI block
 *   holding it) and only grows at the end. A reader uses a field only when it lies
 *   within the size the writer declared (EMBER_HAS_FIELD) and, for pointers, is non-null.
 * - A minor version adds fields at the end; a major version breaks layouts. The host
 *   refuses a plugin of another major and loads any minor of its own major.
 * - Stages are nullable function pointers: a null stage is never called and costs nothing.
 * - A call returns EMBER_OK or EMBER_FAILED. On failure the plugin writes a UTF-8,
 *   NUL-terminated message into the host-owned error buffer (ember_error_set cuts a long
 *   one and ends it in "..."). Nothing is allocated on one side and freed on the other;
 *   no exception crosses the boundary.
 * - Strings are UTF-8 and NUL-terminated. Those in the descriptor are static; those the
 *   host passes are valid for the stated lifetime, and a plugin copies what it keeps.
 * - Calls for one instance come from one thread, in order, never concurrently.
 * - ember/stages.h lists the stages (names, tensor shapes, writability) in one table.
 */
#ifndef EMBER_PLUGIN_H
#define EMBER_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "EMBR" as it reads in memory on a little-endian machine. */
#define EMBER_PLUGIN_MAGIC 0x52424D45u
#define EMBER_PLUGIN_ABI_MAJOR 1u
#define EMBER_PLUGIN_ABI_MINOR 5u
#define EMBER_PLUGIN_ENTRY_SYMBOL "ember_plugin_entry"
/* The host's error buffer holds this many bytes, the terminating NUL included. */
#define EMBER_ERROR_CAPACITY 1024u

#if defined(__GNUC__) || defined(__clang__)
#define EMBER_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define EMBER_PLUGIN_EXPORT
#endif

/* True when the struct behind `ptr` (whose first member is its size) was declared by
 * its writer large enough to hold `field`. */
#ifdef __cplusplus
#define EMBER_HAS_FIELD(ptr, type, field) ((ptr)->struct_size >= offsetof(type, field) + sizeof(type::field))
#else
#define EMBER_HAS_FIELD(ptr, type, field) \
    ((ptr)->struct_size >= offsetof(type, field) + sizeof(((const type*)0)->field))
#endif

typedef int32_t ember_status;
enum { EMBER_OK = 0, EMBER_FAILED = 1 };

/* The one list of the model families: X(C name, C++ name, code, name). The C codes
 * below, the C++ helper's ember::ModelFamily and its names (ember/experiment.hpp) and the
 * host's checks against its family registry are all expanded from it. A code is stable;
 * new families are appended. */
#define EMBER_FAMILY_LIST(X)          \
    X(LLAMA, Llama, 0, "llama")       \
    X(QWEN3, Qwen3, 1, "qwen3")       \
    X(GEMMA4, Gemma4, 2, "gemma4")
#define EMBER_FAMILY_ENUMERATOR_(c_name, cxx_name, code, name) EMBER_FAMILY_##c_name = code,
enum { EMBER_FAMILY_LIST(EMBER_FAMILY_ENUMERATOR_) };
#undef EMBER_FAMILY_ENUMERATOR_
enum { EMBER_PHASE_PREFILL = 0, EMBER_PHASE_DECODE = 1 };
enum { EMBER_TRACING_DISABLED = 0, EMBER_TRACING_ENABLED = 1 };
enum { EMBER_DTYPE_F32 = 0 };
/* The one list of the stop reasons (why a generation ended): X(C name, C++ name, code,
 * name). The EMBER_STOP_* codes, the C++ helper's ember::StopReason and the host's are
 * expanded from it; a code not in it is refused by the helper, never read as another.
 *   MAX_TOKENS         generated max_tokens tokens
 *   END_OF_GENERATION  the model produced an end-of-generation token
 *   CONTEXT_FULL       the context window is full
 *   ERROR              the run failed (on_error)
 *   SKIPPED            1.1: nothing was evaluated; an experiment supplied the generated
 *                      ids (skip_inference) */
#define EMBER_STOP_REASON_LIST(X)                                  \
    X(MAX_TOKENS, MaxTokens, 0, "max_tokens")                      \
    X(END_OF_GENERATION, EndOfGeneration, 1, "end_of_generation")  \
    X(CONTEXT_FULL, ContextFull, 2, "context_full")                \
    X(ERROR, Error, 3, "error")                                    \
    X(SKIPPED, Skipped, 4, "skipped")
#define EMBER_STOP_ENUMERATOR_(c_name, cxx_name, code, name) EMBER_STOP_##c_name = code,
enum { EMBER_STOP_REASON_LIST(EMBER_STOP_ENUMERATOR_) };
#undef EMBER_STOP_ENUMERATOR_
/* 1.1: what the lifecycle services (skip_inference, rewrite_prompt) return besides
 * EMBER_OK. Each refusal leaves the run as it was; the plugin decides whether to fail. */
enum {
    EMBER_REFUSED_STAGE = 2,      /* called outside this instance's before_prefill */
    EMBER_REFUSED_TAKEN = 3,      /* an earlier experiment (composition order) already made that request */
    EMBER_REFUSED_INVALID = 4,    /* the ids or the text are not acceptable (the reason says why) */
    EMBER_REFUSED_UNSUPPORTED = 5 /* this kind of run cannot honour it (an extraction) */
};
/* 1.1 descriptor flags. */
enum {
    EMBER_PLUGIN_FLAG_CONCURRENT = 1u /* instances may run at the same time in one process (sweep --jobs) */
};
enum { EMBER_LOG_DEBUG = 0, EMBER_LOG_INFO = 1, EMBER_LOG_WARNING = 2, EMBER_LOG_ERROR = 3 };

/* Where a failing call writes its message. Owned by the host, cleared before each call. */
typedef struct ember_error_buffer {
    char* message;   /* `capacity` bytes */
    size_t capacity; /* EMBER_ERROR_CAPACITY */
} ember_error_buffer;

/* A contiguous F32 [rows, cols] activation owned by the engine. Valid only during the
 * call. Rows are always contiguous: the row stride is `cols` for every stage, and this
 * layout is fixed for ABI major 1 (a strided view would need a new struct, not a field).
 * Writes through `data` change the computation, except for the stages ember/stages.h
 * marks EMBER_ACCESS_READ_ONLY (attention_pattern), which must not be written. For the
 * stages shaped [T, ...] and [R, ...], row r holds the token at position
 * (start_position + input_token_count - rows + r): the evaluation's positions for layer
 * stages, the last `rows` positions for before_logits / after_logits. attention_pattern
 * is [n_head * T, n_kv]: row h * T + t is head h of token t, column j is KV position j. */
typedef struct ember_tensor {
    float* data;
    uint64_t rows;
    uint64_t cols;
    uint32_t dtype; /* EMBER_DTYPE_F32 */
    uint32_t reserved0;
} ember_tensor;

/* The model, valid from on_model_loaded until destroy. */
typedef struct ember_model_context {
    uint32_t struct_size;
    uint32_t family;        /* EMBER_FAMILY_* */
    const char* model_name; /* general.name, else the file name without .gguf */
    uint32_t n_layers;
    uint32_t n_embd;
    uint32_t n_vocab;
    uint32_t reserved0;
} ember_model_context;

/* One evaluation: the prompt (prefill) or one generated token (decode). Valid during the call. */
typedef struct ember_execution_context {
    uint32_t struct_size;
    uint32_t phase; /* EMBER_PHASE_* */
    uint64_t start_position;    /* position of the evaluation's first token */
    uint64_t input_token_count; /* tokens in this evaluation (rows of the layer tensors) */
    uint32_t tracing;           /* EMBER_TRACING_* */
    uint32_t reserved0;
    const ember_model_context* model;
    /* 1.1 */
    uint64_t decode_step; /* 0 for the prefill, then 1, 2, ... for each decode evaluation */
} ember_execution_context;

/* A layer stage's context: the evaluation plus the zero-based layer index. */
typedef struct ember_layer_context {
    uint32_t struct_size;
    uint32_t layer_index;
    const ember_execution_context* execution;
    /* 1.1: the layer's geometry (Gemma 4's layers differ from each other). */
    uint32_t n_head;    /* query heads */
    uint32_t head_dim;  /* D: head h of head_outputs is columns [h * D, (h + 1) * D) */
    uint32_t n_head_kv; /* KV heads (query head h reads KV head h / (n_head / n_head_kv)) */
    uint32_t n_ff;      /* columns of mlp_activation */
} ember_layer_context;

/* The end of a generation (on_generation_complete) or of a failed run (on_error). */
typedef struct ember_generation_context {
    uint32_t struct_size;
    uint32_t stop_reason; /* EMBER_STOP_* */
    uint64_t generated_tokens;
    uint64_t prompt_tokens;
    const char* run_id;
    double elapsed_ms; /* since before_prefill */
    const ember_model_context* model; /* null when the run failed before on_model_loaded */
} ember_generation_context;

/* What the host tells an instance about the run. Valid from create until destroy. */
typedef struct ember_run_info {
    uint32_t struct_size;
    uint32_t reserved0;
    const char* run_id;
    const char* output_dir;   /* absolute; every file the run writes goes here */
    const char* model_path;   /* absolute */
    const char* model_sha256; /* 64 lowercase hex digits */
    const char* route;        /* "reference" or "fast" */
    const char* config_hash;  /* SHA-256 of the canonical run config, hex */
    const char* config_dir;   /* relative paths in this experiment's config are relative to it */
    const uint32_t* prompt_token_ids;
    uint64_t prompt_token_count;
} ember_run_info;

/* 1.2: one prompt token's bytes [start, end) in the prompt's UTF-8 text (start == end for
 * a token that covers no byte, such as BOS). */
typedef struct ember_token_span {
    uint64_t start;
    uint64_t end;
} ember_token_span;

/* The host services table handed to create. Valid from create until destroy. */
typedef struct ember_host_services {
    uint32_t struct_size;
    uint32_t abi_major; /* the host's ABI version */
    uint32_t abi_minor;
    uint32_t reserved0;
    void* host_data; /* pass back to the functions below */
    void (*log)(void* host_data, uint32_t level, const char* message);
    const ember_run_info* run_info;
    /* 1.1. Each may be null (an older host): check EMBER_HAS_FIELD and the pointer. */
    /* The ids generated so far (the prompt excluded): stores a pointer valid until the
     * call returns and returns their count. */
    uint64_t (*generated_token_ids)(void* host_data, const uint32_t** ids);
    /* 1.1 lifecycle services (docs/plugin-guide.md, "Skipping and rewriting"). Accepted
     * only during this instance's before_prefill, at most once per run each (the first
     * request in composition order wins). Each returns EMBER_OK or an EMBER_REFUSED_* code
     * and, when `reason` is non-null, writes why into it (pass before_prefill's own error
     * buffer and return EMBER_FAILED to fail with the host's message). */
    /* Skip the inference: nothing is evaluated and no tensor stage fires for any
     * experiment; `ids` (count of them, each below n_vocab, at most max_tokens; copied
     * during the call) become the generated tokens and on_generation_complete is told
     * EMBER_STOP_SKIPPED. */
    ember_status (*skip_inference)(void* host_data, const uint32_t* ids, uint64_t count, ember_error_buffer* reason);
    /* Replace the prompt text (`length` bytes of UTF-8, copied during the call) before the
     * run's tokens are made from it: every call after the before_prefill round (the
     * contexts, run_info's prompt_token_ids) sees the new text's tokens. */
    ember_status (*rewrite_prompt)(void* host_data, const char* text, uint64_t length, ember_error_buffer* reason);
    /* End of the 1.1 lifecycle services. */
    /* 1.2, the prompt as text (selection specs). Each may be null (an older host): check
     * EMBER_HAS_FIELD and the pointer. They describe the current prompt: the run's, or in a
     * dataset run the current sample's (its own text and tokens, a target's excluded, from
     * its before_prefill to its on_generation_complete; before the first sample, none).
     * Each stores a pointer valid until the call returns and returns the count. */
    /* The prompt's UTF-8 bytes (NUL-terminated after `count` bytes). */
    uint64_t (*prompt_text)(void* host_data, const char** text);
    /* The prompt's token ids, BOS included when it was added. */
    uint64_t (*prompt_token_ids)(void* host_data, const uint32_t** ids);
    /* One span per prompt token, in order: the spans tile prompt_text. */
    uint64_t (*prompt_token_spans)(void* host_data, const ember_token_span** spans);
    /* 1.4. May be null (an older host): check EMBER_HAS_FIELD and the pointer. Reads the
     * regular file at `path` (UTF-8; a relative path is taken from run_info's base_dir)
     * for the experiment and makes it an input of the run: run.json's and the manifest's
     * "inputs" list it (role "experiment_read", key "experiments[I]") with the SHA-256 of
     * exactly the bytes returned, so a result names every file it was made from, also one
     * no config key names. Stores a pointer to the bytes (valid until destroy, followed by
     * a NUL) and their count. Returns EMBER_OK, or EMBER_FAILED with why in `reason` (no
     * such file, not a regular file, larger than the input limit, unreadable). */
    ember_status (*read_input)(void* host_data, const char* path, const uint8_t** bytes, uint64_t* size,
                               ember_error_buffer* reason);
} ember_host_services;

/* The first member of the descriptor. Never changes, whatever the major version. */
typedef struct ember_abi_header {
    uint32_t magic;     /* EMBER_PLUGIN_MAGIC */
    uint32_t abi_major; /* EMBER_PLUGIN_ABI_MAJOR the plugin was built with */
    uint32_t abi_minor; /* EMBER_PLUGIN_ABI_MINOR the plugin was built with */
    uint32_t struct_size; /* sizeof(ember_plugin_descriptor) as the plugin was built */
} ember_abi_header;

typedef ember_status (*ember_layer_stage_fn)(void* instance, const ember_layer_context* context,
                                             ember_tensor* tensor, ember_error_buffer* error);
typedef ember_status (*ember_logits_stage_fn)(void* instance, const ember_execution_context* context,
                                              ember_tensor* tensor, ember_error_buffer* error);

typedef struct ember_plugin_descriptor {
    ember_abi_header abi;
    const char* name;        /* [a-z0-9._-]+, what error messages print */
    const char* version;     /* free-form, e.g. "1.2.0" */
    const char* description; /* one line */

    /* Creates one instance from its configuration (the [experiment.config] table as
     * JSON text, "{}" when there is none; valid during the call). On success stores the
     * instance in *instance. Required. */
    ember_status (*create)(const char* config_json, const ember_host_services* host, void** instance,
                           ember_error_buffer* error);
    /* Destroys an instance create made, at the end of the run, failed or not. Required. */
    void (*destroy)(void* instance);

    /* The stages, in the order they fire. Each may be null. */
    ember_status (*on_model_loaded)(void* instance, const ember_model_context* model, ember_error_buffer* error);
    ember_status (*before_prefill)(void* instance, const ember_execution_context* context,
                                   ember_error_buffer* error);
    ember_layer_stage_fn before_layer;    /* the residual stream entering the layer */
    ember_layer_stage_fn after_attention; /* the attention block output, before the residual add */
    ember_layer_stage_fn after_mlp;       /* the MLP block output, before the residual add */
    ember_layer_stage_fn after_layer;     /* the residual stream leaving the layer */
    ember_logits_stage_fn before_logits;  /* the final-normed hidden state of the logits rows */
    ember_logits_stage_fn after_logits;   /* the final logits; writes feed sampling */
    ember_status (*on_generation_complete)(void* instance, const ember_generation_context* context,
                                           ember_error_buffer* error);
    /* Told once when the run fails, before anything else ends. `message` is the run's error. */
    ember_status (*on_error)(void* instance, const ember_generation_context* context, const char* message,
                             ember_error_buffer* error);

    /* 1.1: the stages inside the blocks (ember/stages.h), each null when not implemented. */
    ember_layer_stage_fn attention_pattern; /* post-softmax probabilities, [n_head * T, n_kv]; READ-ONLY */
    ember_layer_stage_fn head_outputs;      /* per-head attention output before the output projection,
                                               [T, n_head * head_dim]; writable */
    ember_layer_stage_fn mlp_activation;    /* the gated activation entering the down projection,
                                               [T, n_ff]; writable */
    uint32_t flags;                         /* EMBER_PLUGIN_FLAG_* */
    uint32_t reserved1;
    /* Which stages this instance wants, as bits (1 << EMBER_STAGE_*), asked once after
     * on_model_loaded. Null: every stage it implements. A stage no instance wants costs
     * nothing (no attention pattern is materialised). */
    uint64_t (*subscribed_stages)(void* instance);
    /* 1.3 */
    ember_layer_stage_fn residual_mid; /* the residual stream between the blocks (before_layer +
                                          after_attention, what the MLP block reads), [T, n_embd]; writable */
    ember_layer_stage_fn sae_features; /* an SAE's features at its site, [T, d_sae]; writable (docs/features.md) */
    /* 1.5 */
    ember_layer_stage_fn mlp_input; /* the MLP block's normed input (residual_mid after the MLP's norm, what the
                                       gate and up projections read), [T, n_embd]; writable */
} ember_plugin_descriptor;

typedef const ember_plugin_descriptor* (*ember_plugin_entry_fn)(void);

/* The one symbol a plugin exports. */
EMBER_PLUGIN_EXPORT const ember_plugin_descriptor* ember_plugin_entry(void);

/* Whether `c` is a UTF-8 continuation byte (10xxxxxx), whether char is signed or not; no
 * cast, so that C++ plugins built with -Wold-style-cast -Wsign-conversion get no warning. */
static inline int ember_utf8_continuation(char c) {
    int byte = c;
    if (byte < 0) byte += 256;
    return (byte & 0xC0) == 0x80;
}

/* Writes `message` into the error buffer. A message that does not fit is cut at a UTF-8
 * character boundary and ends in "...". */
static inline void ember_error_set(ember_error_buffer* error, const char* message) {
    size_t length = 0;
    size_t capacity;
    if (error == NULL || error->message == NULL || error->capacity == 0) return;
    capacity = error->capacity;
    if (message == NULL) message = "";
    while (message[length] != '\0' && length < capacity) ++length;
    if (length < capacity) {
        size_t i;
        for (i = 0; i <= length; ++i) error->message[i] = message[i];
        return;
    }
    if (capacity < 4) {
        error->message[0] = '\0';
        return;
    }
    /* Keep as much as fits before "...\0", never splitting a multi-byte character. */
    length = capacity - 4;
    while (length > 0 && ember_utf8_continuation(message[length])) --length;
    {
        size_t i;
        for (i = 0; i < length; ++i) error->message[i] = message[i];
        error->message[length] = '.';
        error->message[length + 1] = '.';
        error->message[length + 2] = '.';
        error->message[length + 3] = '\0';
    }
}

/* The layout on the LP64 platforms Ember supports. A change here is an ABI break. */
#if defined(__LP64__) || defined(_LP64)
#ifdef __cplusplus
#define EMBER_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define EMBER_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif
EMBER_STATIC_ASSERT(sizeof(ember_abi_header) == 16, "ember_abi_header layout");
EMBER_STATIC_ASSERT(sizeof(ember_error_buffer) == 16, "ember_error_buffer layout");
EMBER_STATIC_ASSERT(sizeof(ember_tensor) == 32, "ember_tensor layout");
EMBER_STATIC_ASSERT(offsetof(ember_tensor, dtype) == 24, "ember_tensor layout");
EMBER_STATIC_ASSERT(sizeof(ember_model_context) == 32, "ember_model_context layout");
EMBER_STATIC_ASSERT(offsetof(ember_model_context, n_vocab) == 24, "ember_model_context layout");
EMBER_STATIC_ASSERT(sizeof(ember_execution_context) == 48, "ember_execution_context layout");
EMBER_STATIC_ASSERT(offsetof(ember_execution_context, decode_step) == 40, "ember_execution_context layout");
EMBER_STATIC_ASSERT(offsetof(ember_execution_context, model) == 32, "ember_execution_context layout");
EMBER_STATIC_ASSERT(sizeof(ember_layer_context) == 32, "ember_layer_context layout");
EMBER_STATIC_ASSERT(offsetof(ember_layer_context, n_head) == 16, "ember_layer_context layout");
EMBER_STATIC_ASSERT(sizeof(ember_generation_context) == 48, "ember_generation_context layout");
EMBER_STATIC_ASSERT(offsetof(ember_generation_context, model) == 40, "ember_generation_context layout");
EMBER_STATIC_ASSERT(sizeof(ember_run_info) == 80, "ember_run_info layout");
EMBER_STATIC_ASSERT(offsetof(ember_run_info, prompt_token_count) == 72, "ember_run_info layout");
EMBER_STATIC_ASSERT(sizeof(ember_token_span) == 16, "ember_token_span layout");
EMBER_STATIC_ASSERT(sizeof(ember_host_services) == 96, "ember_host_services layout");
EMBER_STATIC_ASSERT(offsetof(ember_host_services, generated_token_ids) == 40, "ember_host_services layout");
EMBER_STATIC_ASSERT(offsetof(ember_host_services, skip_inference) == 48, "ember_host_services layout");
EMBER_STATIC_ASSERT(offsetof(ember_host_services, rewrite_prompt) == 56, "ember_host_services layout");
EMBER_STATIC_ASSERT(offsetof(ember_host_services, prompt_text) == 64, "ember_host_services layout");
EMBER_STATIC_ASSERT(offsetof(ember_host_services, prompt_token_spans) == 80, "ember_host_services layout");
EMBER_STATIC_ASSERT(offsetof(ember_host_services, read_input) == 88, "ember_host_services layout");
EMBER_STATIC_ASSERT(offsetof(ember_host_services, run_info) == 32, "ember_host_services layout");
EMBER_STATIC_ASSERT(offsetof(ember_plugin_descriptor, name) == 16, "ember_plugin_descriptor layout");
EMBER_STATIC_ASSERT(offsetof(ember_plugin_descriptor, create) == 40, "ember_plugin_descriptor layout");
EMBER_STATIC_ASSERT(offsetof(ember_plugin_descriptor, before_layer) == 72, "ember_plugin_descriptor layout");
EMBER_STATIC_ASSERT(offsetof(ember_plugin_descriptor, on_error) == 128, "ember_plugin_descriptor layout");
EMBER_STATIC_ASSERT(offsetof(ember_plugin_descriptor, attention_pattern) == 136, "ember_plugin_descriptor layout");
EMBER_STATIC_ASSERT(offsetof(ember_plugin_descriptor, flags) == 160, "ember_plugin_descriptor layout");
EMBER_STATIC_ASSERT(offsetof(ember_plugin_descriptor, residual_mid) == 176, "ember_plugin_descriptor layout");
EMBER_STATIC_ASSERT(offsetof(ember_plugin_descriptor, sae_features) == 184, "ember_plugin_descriptor layout");
EMBER_STATIC_ASSERT(offsetof(ember_plugin_descriptor, mlp_input) == 192, "ember_plugin_descriptor layout");
EMBER_STATIC_ASSERT(sizeof(ember_plugin_descriptor) == 200, "ember_plugin_descriptor layout");
#undef EMBER_STATIC_ASSERT
#endif

#ifdef __cplusplus
}
#endif

#endif /* EMBER_PLUGIN_H */
