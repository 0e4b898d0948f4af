/* Shared parts of the C test plugins, which write their descriptors by hand the way a
 * plugin built against another version of plugin.h would. */
#ifndef EMBER_TEST_C_PLUGIN_PARTS_H
#define EMBER_TEST_C_PLUGIN_PARTS_H

#include <ember/plugin.h>
#include <stdlib.h>

typedef struct c_instance {
    float added;
} c_instance;

static inline ember_status c_create(const char* config_json, const ember_host_services* host, void** instance,
                             ember_error_buffer* error) {
    c_instance* made = (c_instance*)malloc(sizeof(c_instance));
    (void)config_json;
    (void)host;
    if (made == NULL) {
        ember_error_set(error, "out of memory");
        return EMBER_FAILED;
    }
    made->added = 1.0f;
    *instance = made;
    return EMBER_OK;
}

static inline void c_destroy(void* instance) { free(instance); }

/* Adds 1 to every value: proof that the stage ran. */
static inline ember_status c_after_layer(void* instance, const ember_layer_context* context, ember_tensor* tensor,
                                  ember_error_buffer* error) {
    uint64_t i;
    const c_instance* self = (const c_instance*)instance;
    (void)context;
    (void)error;
    for (i = 0; i < tensor->rows * tensor->cols; ++i) tensor->data[i] += self->added;
    return EMBER_OK;
}

/* Stands in a field the host must never read: calling it ends the test process. */
static inline ember_status c_poison_generation(void* instance, const ember_generation_context* context,
                                        ember_error_buffer* error) {
    (void)instance;
    (void)context;
    (void)error;
    abort();
}

static inline ember_status c_poison_error(void* instance, const ember_generation_context* context, const char* message,
                                   ember_error_buffer* error) {
    (void)instance;
    (void)context;
    (void)message;
    (void)error;
    abort();
}

#endif
