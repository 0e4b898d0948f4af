// Rung: smoke. The family registry (models/family.hpp) is the one table of families:
// its entries are in Family order with distinct names, and every other place that names
// a family agrees with it: general.architecture, a run config's model.arch, the plugin
// ABI's EMBER_FAMILY_* codes and the SDK's names (capture writes them). A family code the
// SDK does not know is a named error in the plugin, never another family. Each family
// refuses the weights it does not compute with (biases) by name.
#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "config/run_config.hpp"
#include "ember/experiment.hpp"
#include "gguf/gguf_file.hpp"
#include "models/family.hpp"
#include "models/model.hpp"
#include "support/temp_dir.hpp"
#include "support/tiny_gguf.hpp"

namespace ember::test {
namespace {

std::string error_of(auto&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "(no error)";
}

config::RunConfig config_with_arch(const TempDir& dir, const std::string& arch) {
    const auto path = dir.path() / "run.toml";
    std::ofstream(path) << "[model]\npath = \"m.gguf\"\narch = \"" << arch << "\"\n[prompt]\ntext = \"x\"\n";
    return config::load_run_config(path);
}

}  // namespace

TEST_CASE("the registry lists every family once, in Family order, by its architecture name") {
    const auto entries = models::families();
    REQUIRE(entries.size() == models::kFamilyCount);
    std::set<std::string_view> names;
    for (std::size_t i = 0; i < entries.size(); ++i) {
        CAPTURE(entries[i]->name);
        CHECK(static_cast<std::size_t>(entries[i]->family) == i);
        CHECK(&models::family_info(entries[i]->family) == entries[i]);
        CHECK(models::family_from_name(entries[i]->name) == entries[i]->family);
        CHECK(models::family_name(entries[i]->family) == entries[i]->name);
        names.insert(entries[i]->name);
    }
    CHECK(names.size() == entries.size());
    CHECK(models::family_names(", ") == "llama, qwen3, gemma4");
    CHECK_FALSE(models::family_from_name("auto").has_value());
}

TEST_CASE("a file of an architecture outside the registry is refused, naming the registry's families") {
    TinySpec spec;
    spec.arch = "mamba";
    const gguf::File file = gguf::File::from_bytes(tiny_model_bytes(spec), "tiny.gguf");
    CHECK(error_of([&] { models::load_model_config(file); }) ==
          "tiny.gguf: unsupported architecture 'mamba' (supported: " + models::family_names(", ") + ")");
}

TEST_CASE("a run config's model.arch accepts exactly auto and the registry's names") {
    TempDir dir;
    CHECK(config_with_arch(dir, "auto").model.arch == "auto");
    for (const models::FamilyInfo* family : models::families()) {
        CHECK(config_with_arch(dir, std::string(family->name)).model.arch == family->name);
    }
    std::string expected = "is not one of \"auto\"";
    for (const models::FamilyInfo* family : models::families()) expected += ", \"" + std::string(family->name) + "\"";
    CHECK(error_of([&] { config_with_arch(dir, "mamba"); }).find(expected) != std::string::npos);
}

TEST_CASE("the plugin ABI's family codes and the SDK's names are the registry's") {
    const std::uint32_t codes[] = {EMBER_FAMILY_LLAMA, EMBER_FAMILY_QWEN3, EMBER_FAMILY_GEMMA4};
    REQUIRE(std::size(codes) == models::kFamilyCount);
    for (const models::FamilyInfo* family : models::families()) {
        const auto code = static_cast<std::uint32_t>(family->family);
        CHECK(codes[code] == code);
        CHECK(ember::family_name(static_cast<ember::ModelFamily>(code)) == family->name);
    }
}

TEST_CASE("a family code the plugin's SDK does not know is a named error, never another family") {
    ember_model_context context{};
    context.struct_size = sizeof context;
    context.family = EMBER_FAMILY_QWEN3;
    CHECK(ember::detail::to_model_context(&context).family == ember::ModelFamily::Qwen3);
    context.family = 7;
    CHECK(error_of([&] { ember::detail::to_model_context(&context); }) ==
          "the host passed model family code 7, which this plugin's SDK does not know (rebuild the plugin against the "
          "host's SDK)");
}

TEST_CASE("llama and qwen3 refuse feed-forward biases by name") {
    for (const char* arch : {"llama", "qwen3"}) {
        CAPTURE(arch);
        TinySpec spec;
        spec.arch = arch;
        gguf::Writer w = tiny_model_writer(spec);
        const std::uint64_t ne[1] = {spec.n_ff};
        w.add_tensor("blk.1.ffn_up.bias", gguf::GgmlType::F32, ne, std::vector<std::byte>(spec.n_ff * sizeof(float)));
        const gguf::File file = gguf::File::from_bytes(w.to_bytes(), "tiny.gguf");
        CHECK(error_of([&] { models::load_model(file); }) ==
              "tiny.gguf: tensor 'blk.1.ffn_up.bias' (biases, fused QKV and experts) is not supported by Ember");
    }
}

}  // namespace ember::test
