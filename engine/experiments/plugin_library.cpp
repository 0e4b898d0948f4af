#include "experiments/plugin_library.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <cstring>
#include <iterator>
#include <system_error>

#include "common/error.hpp"

namespace ember::experiments {
namespace {

// ABI 1.0 cannot work without these: the block, the three strings, create and destroy.
constexpr std::size_t kMinimumDescriptorSize =
    offsetof(ember_plugin_descriptor, destroy) + sizeof(ember_plugin_descriptor::destroy);

// Where each field of the descriptor ends, in order. A plugin's declared size keeps the
// fields that end within it and never part of one: a size ending inside a function
// pointer must not hand the host half a pointer to call.
constexpr std::size_t kFieldEnds[] = {
    offsetof(ember_plugin_descriptor, abi) + sizeof(ember_plugin_descriptor::abi),
    offsetof(ember_plugin_descriptor, name) + sizeof(ember_plugin_descriptor::name),
    offsetof(ember_plugin_descriptor, version) + sizeof(ember_plugin_descriptor::version),
    offsetof(ember_plugin_descriptor, description) + sizeof(ember_plugin_descriptor::description),
    offsetof(ember_plugin_descriptor, create) + sizeof(ember_plugin_descriptor::create),
    offsetof(ember_plugin_descriptor, destroy) + sizeof(ember_plugin_descriptor::destroy),
    offsetof(ember_plugin_descriptor, on_model_loaded) + sizeof(ember_plugin_descriptor::on_model_loaded),
    offsetof(ember_plugin_descriptor, before_prefill) + sizeof(ember_plugin_descriptor::before_prefill),
    offsetof(ember_plugin_descriptor, before_layer) + sizeof(ember_plugin_descriptor::before_layer),
    offsetof(ember_plugin_descriptor, after_attention) + sizeof(ember_plugin_descriptor::after_attention),
    offsetof(ember_plugin_descriptor, after_mlp) + sizeof(ember_plugin_descriptor::after_mlp),
    offsetof(ember_plugin_descriptor, after_layer) + sizeof(ember_plugin_descriptor::after_layer),
    offsetof(ember_plugin_descriptor, before_logits) + sizeof(ember_plugin_descriptor::before_logits),
    offsetof(ember_plugin_descriptor, after_logits) + sizeof(ember_plugin_descriptor::after_logits),
    offsetof(ember_plugin_descriptor, on_generation_complete) + sizeof(ember_plugin_descriptor::on_generation_complete),
    offsetof(ember_plugin_descriptor, on_error) + sizeof(ember_plugin_descriptor::on_error),
    offsetof(ember_plugin_descriptor, attention_pattern) + sizeof(ember_plugin_descriptor::attention_pattern),
    offsetof(ember_plugin_descriptor, head_outputs) + sizeof(ember_plugin_descriptor::head_outputs),
    offsetof(ember_plugin_descriptor, mlp_activation) + sizeof(ember_plugin_descriptor::mlp_activation),
    offsetof(ember_plugin_descriptor, flags) + sizeof(ember_plugin_descriptor::flags),
    offsetof(ember_plugin_descriptor, reserved1) + sizeof(ember_plugin_descriptor::reserved1),
    offsetof(ember_plugin_descriptor, subscribed_stages) + sizeof(ember_plugin_descriptor::subscribed_stages),
    offsetof(ember_plugin_descriptor, residual_mid) + sizeof(ember_plugin_descriptor::residual_mid),
    offsetof(ember_plugin_descriptor, sae_features) + sizeof(ember_plugin_descriptor::sae_features),
    offsetof(ember_plugin_descriptor, mlp_input) + sizeof(ember_plugin_descriptor::mlp_input),
};
static_assert(kFieldEnds[std::size(kFieldEnds) - 1] == sizeof(ember_plugin_descriptor),
              "kFieldEnds lists every field of ember_plugin_descriptor");

// The bytes of the whole fields within `declared`.
std::size_t whole_fields(std::size_t declared) {
    std::size_t kept = 0;
    for (std::size_t end : kFieldEnds)
        if (end <= declared) kept = end;
    return kept;
}

// A string from the descriptor, read with a bound so a missing terminator cannot run away.
std::string bounded_string(const char* text, std::size_t limit) {
    if (!text) return {};
    return std::string(text, ::strnlen(text, limit));
}

}  // namespace

std::string_view stage_id_name(StageId stage) { return hooks::stage_name(stage); }

bool is_valid_plugin_name(std::string_view name) {
    if (name.empty() || name.size() > 63) return false;
    for (char c : name) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
        if (!ok) return false;
    }
    return true;
}

std::shared_ptr<const PluginLibrary> PluginLibrary::load(const std::filesystem::path& path) {
    std::shared_ptr<PluginLibrary> plugin(new PluginLibrary());
    std::error_code ec;
    plugin->path_ = std::filesystem::absolute(path, ec).lexically_normal();
    if (ec) plugin->path_ = path;
    const std::string where = fmt::format("plugin '{}'", plugin->path_.string());

    if (!std::filesystem::exists(plugin->path_, ec)) throw Error(fmt::format("{}: no such file", where));
    if (!std::filesystem::is_regular_file(plugin->path_, ec)) throw Error(fmt::format("{}: not a regular file", where));

    try {
        plugin->library_.load(plugin->path_, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
    } catch (const std::exception& e) {
        throw Error(fmt::format("{} cannot be loaded: {}", where, e.what()));
    }
    if (!plugin->library_.has(EMBER_PLUGIN_ENTRY_SYMBOL)) {
        throw Error(fmt::format(
            "{} does not export {} (not an Ember plugin? C++ plugins export it with EMBER_EXPORT_EXPERIMENT)", where,
            EMBER_PLUGIN_ENTRY_SYMBOL));
    }
    auto& entry = plugin->library_.get<const ember_plugin_descriptor*()>(EMBER_PLUGIN_ENTRY_SYMBOL);
    const ember_plugin_descriptor* theirs = entry();
    if (!theirs) throw Error(fmt::format("{}: {} returned no descriptor", where, EMBER_PLUGIN_ENTRY_SYMBOL));

    // The ABI block never changes shape, so it is safe to read whatever the version.
    const ember_abi_header abi = theirs->abi;
    if (abi.magic != EMBER_PLUGIN_MAGIC) {
        throw Error(fmt::format("{}: descriptor magic {:#010x} is not Ember's {:#010x} (not an Ember plugin)", where,
                                abi.magic, EMBER_PLUGIN_MAGIC));
    }
    if (abi.abi_major != EMBER_PLUGIN_ABI_MAJOR) {
        throw Error(fmt::format("{} was built for plugin ABI {}.{}, but this ember implements ABI {}.{}; rebuild it "
                                "against this ember's plugin SDK",
                                where, abi.abi_major, abi.abi_minor, EMBER_PLUGIN_ABI_MAJOR, EMBER_PLUGIN_ABI_MINOR));
    }
    if (abi.struct_size < kMinimumDescriptorSize) {
        throw Error(fmt::format("{}: descriptor declares {} bytes, fewer than ABI {}'s required {}", where,
                                abi.struct_size, EMBER_PLUGIN_ABI_MAJOR, kMinimumDescriptorSize));
    }

    // Only the whole fields within the plugin's declared size; the rest of ours stays null.
    std::memcpy(&plugin->descriptor_, theirs, whole_fields(abi.struct_size));
    plugin->abi_major_ = abi.abi_major;
    plugin->abi_minor_ = abi.abi_minor;
    plugin->declared_size_ = abi.struct_size;

    const ember_plugin_descriptor& d = plugin->descriptor_;
    plugin->name_ = bounded_string(d.name, 64);
    if (!is_valid_plugin_name(plugin->name_)) {
        throw Error(fmt::format("{}: descriptor name '{}' is not 1-63 characters of [a-z0-9._-]", where,
                                plugin->name_));
    }
    plugin->version_ = bounded_string(d.version, 256);
    plugin->description_ = bounded_string(d.description, 4096);
    if (!d.create || !d.destroy) {
        throw Error(fmt::format("{} ('{}'): descriptor has no {} function", where, plugin->name_,
                                d.create ? "destroy" : "create"));
    }
    return plugin;
}

bool PluginLibrary::implements(StageId stage) const {
    // Every descriptor field is a function pointer of the same size; which type does not
    // matter for whether it is set.
    return function<void (*)()>(stage) != nullptr;
}

std::vector<StageId> PluginLibrary::implemented_stages() const {
    std::vector<StageId> out;
    for (StageId stage : hooks::kAllStages)
        if (stage != StageId::Create && implements(stage)) out.push_back(stage);
    return out;
}

}  // namespace ember::experiments
