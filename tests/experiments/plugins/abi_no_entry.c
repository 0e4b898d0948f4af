/* A shared object that is not an Ember plugin: no ember_plugin_entry. */
__attribute__((visibility("default"))) int not_an_ember_plugin(void) { return 42; }
