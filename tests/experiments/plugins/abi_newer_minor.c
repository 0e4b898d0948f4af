/* A plugin built against a newer minor of ABI 1: its descriptor has fields this host does
 * not know at the end, and declares the larger size. The host ignores them and loads it. */
#include "c_plugin_parts.h"

typedef struct future_descriptor {
    ember_plugin_descriptor known;
    ember_layer_stage_fn after_some_future_stage;
    uint64_t future_flags;
} future_descriptor;

static ember_status c_poison_layer(void* instance, const ember_layer_context* context, ember_tensor* tensor,
                                   ember_error_buffer* error) {
    (void)instance;
    (void)context;
    (void)tensor;
    (void)error;
    abort();
}

static const future_descriptor descriptor = {
    {
        {EMBER_PLUGIN_MAGIC, 1, EMBER_PLUGIN_ABI_MINOR + 1, (uint32_t)sizeof(future_descriptor)},
        "newer-minor",
        "9.0.0",
        "a descriptor longer than this host's",
        c_create,
        c_destroy,
        NULL,
        NULL,
        NULL,
        NULL,
        NULL,
        c_after_layer,
        NULL,
        NULL,
        NULL,
        NULL,
    },
    c_poison_layer,
    7,
};

EMBER_PLUGIN_EXPORT const ember_plugin_descriptor* ember_plugin_entry(void) { return &descriptor.known; }
