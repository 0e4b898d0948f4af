// ember inspect MODEL [--json] [--tensors] [--sha256] [--arch A]
// Describes a GGUF file: family, hyperparameters (per layer where they vary), tokenizer,
// weight types, and optionally the tensor table. The JSON schema is in docs/formats.md.
#include <fmt/format.h>

#include <iostream>

#include "cli.hpp"
#include "commands.hpp"
#include "common/error.hpp"
#include "common/sha256_file.hpp"
#include "record/manifest.hpp"
#include "gguf/gguf_file.hpp"
#include "gguf/layout.hpp"
#include "models/model_config.hpp"
#include "tokenizer/tokenizer_info.hpp"

namespace ember::app {
namespace {

namespace json = boost::json;

json::value optional_id(const std::optional<std::uint32_t>& id) {
    return id ? json::value(*id) : json::value(nullptr);
}

json::object model_description(const gguf::File& file, const models::ModelConfig& c, const tokenizer::TokenizerInfo& tok,
                      bool with_tensors, const std::string& sha256) {
    json::object o;
    o["schema_version"] = 1;
    o["path"] = file.source();
    o["file_size"] = file.file_size();
    if (!sha256.empty()) o["sha256"] = sha256;
    o["gguf_version"] = file.version();
    o["alignment"] = file.alignment();
    o["data_offset"] = file.data_offset();
    o["metadata_count"] = file.metadata().size();
    o["tensor_count"] = file.tensors().size();
    o["architecture"] = c.architecture;
    o["family"] = models::family_name(c.family);
    o["name"] = c.name;
    o["n_layers"] = c.n_layers;
    o["n_embd"] = c.n_embd;
    o["n_vocab"] = c.n_vocab;
    o["n_ctx_train"] = c.n_ctx_train;
    o["rms_eps"] = c.rms_eps;
    o["rope"] = {{"mode", c.rope_mode == models::RopeMode::Norm ? "norm" : "neox"},
                 {"scaling_type", c.rope_scaling_type},
                 {"attn_factor", c.rope_attn_factor},
                 {"n_ctx_orig", c.n_ctx_orig},
                 {"has_rope_freqs", file.find_tensor("rope_freqs.weight") != nullptr}};
    o["embedding_scale"] = c.embedding_scale;
    o["final_logit_softcap"] = c.final_logit_softcap;
    o["sliding_window"] = c.n_swa;
    o["n_embd_per_layer"] = c.n_embd_per_layer;
    o["n_shared_kv_layers"] = c.n_shared_kv_layers;
    o["tied_output"] = file.find_tensor("output.weight") == nullptr;
    o["lm_head"] = file.find_tensor("output.weight") ? "output.weight" : "token_embd.weight";

    o["layers"] = record::layer_records(c);

    o["tokenizer"] = {{"model", tok.model},
                      {"pre", tok.pre},
                      {"vocab_size", tok.vocab_size},
                      {"bos_id", optional_id(tok.bos_id)},
                      {"eos_id", optional_id(tok.eos_id)},
                      {"add_bos", tok.add_bos},
                      {"add_eos", tok.add_eos}};

    o["weight_types"] = record::weight_type_record(file);

    if (with_tensors) {
        json::array tensors;
        for (const auto& t : file.tensors()) {
            json::array shape;
            for (std::uint32_t d = 0; d < t.n_dims; ++d) shape.push_back(t.ne[d]);
            tensors.push_back({{"name", t.name},
                               {"type", gguf::type_name(t.type)},
                               {"shape", std::move(shape)},
                               {"bytes", t.nbytes},
                               {"offset", t.file_offset},
                               {"layout", gguf::describe_layout(t)}});
        }
        o["tensors"] = std::move(tensors);
    }
    return o;
}

void print_model_text(const gguf::File& file, const models::ModelConfig& c, const tokenizer::TokenizerInfo& tok,
                bool with_tensors, const std::string& sha256) {
    fmt::print("file        {} ({} bytes, GGUF v{}, alignment {})\n", file.source(), file.file_size(), file.version(),
               file.alignment());
    if (!sha256.empty()) fmt::print("sha256      {}\n", sha256);
    fmt::print("model       {} (family {}, architecture '{}')\n", c.name, models::family_name(c.family), c.architecture);
    fmt::print("dims        n_layers {}, n_embd {}, n_vocab {}, n_ctx_train {}, rms_eps {}\n", c.n_layers, c.n_embd,
               c.n_vocab, c.n_ctx_train, c.rms_eps);
    fmt::print("rope        {} pairs, scaling {}, rope_freqs {}\n", c.rope_mode == models::RopeMode::Norm ? "norm" : "neox",
               c.rope_scaling_type, file.find_tensor("rope_freqs.weight") ? "yes" : "no");
    if (c.family == models::Family::Gemma4) {
        fmt::print("gemma4      embedding scale {}, logit softcap {}, sliding window {}, per-layer embd {}, shared kv layers {}\n",
                   c.embedding_scale, c.final_logit_softcap, c.n_swa, c.n_embd_per_layer, c.n_shared_kv_layers);
    }
    fmt::print("output      {}\n", file.find_tensor("output.weight") ? "output.weight" : "tied to token_embd.weight");
    fmt::print("layers      {:>5} {:>6} {:>6} {:>6} {:>6} {:>7} {:>10} {:>6}\n", "layer", "attn", "heads", "kv", "dim", "ff",
               "rope_base", "kv_src");
    for (std::uint32_t l = 0; l < c.n_layers; ++l) {
        const auto& L = c.layers[l];
        fmt::print("            {:>5} {:>6} {:>6} {:>6} {:>6} {:>7} {:>10} {:>6}\n", l, L.sliding_window ? "swa" : "full",
                   L.n_head, L.n_head_kv, L.head_dim, L.n_ff, L.rope_base, L.kv_source);
    }
    fmt::print("tokenizer   model {}, pre '{}', {} tokens, bos {}, eos {}, add_bos {}\n", tok.model, tok.pre, tok.vocab_size,
               tok.bos_id ? std::to_string(*tok.bos_id) : "none", tok.eos_id ? std::to_string(*tok.eos_id) : "none",
               tok.add_bos);
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> histogram;
    for (const auto& t : file.tensors()) {
        auto& h = histogram[std::string(gguf::type_name(t.type))];
        h.first += 1;
        h.second += t.nbytes;
    }
    fmt::print("tensors     {}\n", file.tensors().size());
    for (const auto& [name, h] : histogram) fmt::print("            {:<6} {:>5} tensors {:>14} bytes\n", name, h.first, h.second);
    if (with_tensors) {
        fmt::print("\n{:<40} {:<6} {:<28} {:>12} {:>12}\n", "name", "type", "shape (ne, fastest first)", "bytes", "offset");
        for (const auto& t : file.tensors()) {
            std::string shape;
            for (std::uint32_t d = 0; d < t.n_dims; ++d) shape += fmt::format("{}{}", d ? " x " : "", t.ne[d]);
            fmt::print("{:<40} {:<6} {:<28} {:>12} {:>12}\n", t.name, gguf::type_name(t.type), shape, t.nbytes, t.file_offset);
        }
    }
}

}  // namespace

int run_inspect(const std::vector<std::string>& args) {
    po::options_description options("inspect options");
    options.add_options()
        ("model", po::value<std::string>(), "GGUF file to describe (also the one positional argument)")
        ("arch", po::value<std::string>()->default_value("auto"), arch_help().c_str())
        ("json", po::bool_switch(), "machine-readable output (schema in docs/formats.md)")
        ("tensors", po::bool_switch(), "include the tensor table")
        ("sha256", po::bool_switch(), "hash the file");
    po::positional_options_description positional;
    positional.add("model", 1);
    po::variables_map vm;
    if (!parse_options("inspect", args, options, positional, vm)) return kExitOk;
    if (!vm.count("model")) throw UsageError("ember inspect: give a model (ember inspect MODEL.gguf)");

    const auto expected = parse_arch(vm["arch"].as<std::string>());
    const auto file = gguf::File::open(vm["model"].as<std::string>());
    const auto config = models::load_model_config(file, expected);
    const auto tok = tokenizer::read_tokenizer_info(file);
    const std::string sha = vm["sha256"].as<bool>() ? sha256_file_hex(file.source()) : std::string();
    if (vm["json"].as<bool>()) {
        print_json(model_description(file, config, tok, vm["tensors"].as<bool>(), sha));
    } else {
        print_model_text(file, config, tok, vm["tensors"].as<bool>(), sha);
    }
    return kExitOk;
}

}  // namespace ember::app
