#include "features/sae_loader.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "common/digest_cache.hpp"
#include "common/error.hpp"
#include "features/json_keys.hpp"
#include "features/npz.hpp"
#include "features/safetensors.hpp"

namespace ember::features {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

// cfg.json, read with errors naming the file and the key.
class Config {
public:
    Config(fs::path path, json::object root) : path_(std::move(path)), root_(std::move(root)) {}

    [[noreturn]] void fail(std::string_view key, const std::string& message) const {
        throw Error(fmt::format("{}: key '{}': {}", path_.string(), key, message));
    }
    const json::value* find(std::string_view key) const {
        const json::value* v = root_.if_contains(key);
        return v && !v->is_null() ? v : nullptr;
    }
    const json::object* object(std::string_view key) const {
        const json::value* v = find(key);
        if (!v) return nullptr;
        if (!v->is_object()) fail(key, "not an object");
        return &v->get_object();
    }
    std::optional<std::string> string(std::string_view key, const json::object* in = nullptr) const {
        const json::value* v = in ? in->if_contains(key) : find(key);
        if (!v || v->is_null()) return std::nullopt;
        if (!v->is_string()) fail(key, "not a string");
        return std::string(v->get_string());
    }
    std::size_t positive(std::string_view key, const json::object* in = nullptr) const {
        const json::value* v = in ? in->if_contains(key) : find(key);
        if (!v) fail(key, "missing");
        const bool ok = (v->is_int64() && v->get_int64() > 0) || (v->is_uint64() && v->get_uint64() > 0) ||
                        (v->is_double() && v->get_double() > 0 && std::floor(v->get_double()) == v->get_double());
        if (!ok) fail(key, "not a positive integer");
        const double value = v->is_double() ? v->get_double() : static_cast<double>(v->to_number<std::uint64_t>());
        if (value > (1u << 30)) fail(key, "unreasonably large");
        return static_cast<std::size_t>(value);
    }
    bool boolean(std::string_view key, bool fallback) const {
        const json::value* v = find(key);
        if (!v) return fallback;
        if (!v->is_bool()) fail(key, "not true or false");
        return v->get_bool();
    }
    const fs::path& path() const { return path_; }

private:
    fs::path path_;
    json::object root_;
};

Config read_config(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(fmt::format("{}: cannot open", path.string()));
    std::stringstream text;
    text << in.rdbuf();
    const std::string body = text.str();
    if (body.size() > (16u << 20)) throw Error(fmt::format("{}: larger than 16 MiB", path.string()));
    json::error_code ec;
    json::value v = json::parse(body, ec);
    if (ec) throw Error(fmt::format("{}: not JSON ({})", path.string(), ec.message()));
    if (!v.is_object()) throw Error(fmt::format("{}: not a JSON object", path.string()));
    if (const auto key = first_duplicate_key(body))
        throw Error(fmt::format("{}: key '{}' appears twice", path.string(), *key));
    return Config(path, std::move(v.get_object()));
}

std::string sae_name(const fs::path& path) {
    const fs::path p = path.has_filename() ? path : path.parent_path();
    return p.filename().string();
}

// The architecture and whether it is a transcoder, from the 6.x "architecture" or 5.x's
// "architecture" + "activation_fn_str".
std::pair<Architecture, bool> read_architecture(const Config& cfg, bool six) {
    const std::string arch = cfg.string("architecture").value_or(six ? "" : "standard");
    if (six && arch.empty()) cfg.fail("architecture", "missing (SAELens 6 writes it)");
    struct Known {
        std::string_view name;
        Architecture architecture;
        bool transcoder;
    };
    constexpr Known kKnown[] = {{"standard", Architecture::Standard, false},   {"jumprelu", Architecture::JumpRelu, false},
                                {"topk", Architecture::TopK, false},           {"gated", Architecture::Gated, false},
                                {"transcoder", Architecture::Standard, true}, {"jumprelu_transcoder", Architecture::JumpRelu, true}};
    const auto it = std::find_if(std::begin(kKnown), std::end(kKnown), [&](const Known& k) { return k.name == arch; });
    if (it == std::end(kKnown))
        cfg.fail("architecture", fmt::format("'{}' is not one Ember computes (standard, jumprelu, topk, gated, "
                                             "transcoder, jumprelu_transcoder)",
                                             arch));
    Architecture a = it->architecture;
    if (!six) {
        const std::string fn = cfg.string("activation_fn_str").value_or("relu");
        if (fn == "topk" && a == Architecture::Standard) a = Architecture::TopK;
        else if (fn != "relu")
            cfg.fail("activation_fn_str", fmt::format("'{}' is not one Ember computes (relu, topk)", fn));
    }
    return {a, it->transcoder};
}

// The options that change the computation; anything Ember does not implement is refused.
void read_options(const Config& cfg, bool six, Sae& sae) {
    sae.apply_b_dec_to_input = sae.is_transcoder() ? false : cfg.boolean("apply_b_dec_to_input", true);
    const std::string norm = cfg.string("normalize_activations").value_or("none");
    if (norm == "none") {
        sae.normalization = Normalization::None;
    } else if (norm == "expected_average_only_in") {
        const json::value* factor = cfg.find("norm_scaling_factor");
        if (!factor || !factor->is_number())
            cfg.fail("normalize_activations",
                     "expected_average_only_in needs its scaling factor, and cfg.json has no norm_scaling_factor (SAELens "
                     "folds it from its pretrained directory: add it, or fold it into the weights)");
        const double f = factor->to_number<double>();
        if (!(f > 0) || !std::isfinite(f)) cfg.fail("norm_scaling_factor", "not a positive finite number");
        sae.normalization = Normalization::ScalingFactor;
        sae.scaling_factor = static_cast<float>(f);
    } else if (norm == "constant_norm_rescale") {
        sae.normalization = Normalization::ConstantNormRescale;
    } else if (norm == "layer_norm") {
        sae.normalization = Normalization::LayerNorm;
    } else {
        cfg.fail("normalize_activations", fmt::format("'{}' is not one Ember computes (none, expected_average_only_in, "
                                                      "constant_norm_rescale, layer_norm)",
                                                      norm));
    }
    const std::string reshape = cfg.string("reshape_activations").value_or("none");
    if (reshape != "none" && reshape != "hook_z")
        cfg.fail("reshape_activations", fmt::format("'{}' is not one Ember knows (none, hook_z)", reshape));
    if (reshape == "hook_z" && sae.site.stage != hooks::Stage::HeadOutputs)
        cfg.fail("reshape_activations", "hook_z, but the SAE does not read head outputs (attn.hook_z)");
    if (cfg.boolean("finetuning_scaling_factor", false))
        cfg.fail("finetuning_scaling_factor", "true: Ember does not implement the finetuning scale");
    if (cfg.boolean("rescale_acts_by_decoder_norm", false))
        cfg.fail("rescale_acts_by_decoder_norm", "true: Ember does not implement it");
    if (sae.architecture == Architecture::TopK) {
        if (six || cfg.find("k")) {
            sae.k = cfg.positive("k");
        } else {
            const json::object* kwargs = cfg.object("activation_fn_kwargs");
            if (!kwargs) cfg.fail("activation_fn_kwargs", "missing: a 5.x topk SAE keeps its k there");
            sae.k = cfg.positive("k", kwargs);
        }
        if (sae.k > sae.d_sae) cfg.fail("k", fmt::format("{} is more than d_sae ({})", sae.k, sae.d_sae));
    }
}

// The weights of each architecture; any other tensor in the file is refused by name.
void read_weights(const SafetensorsFile& st, Sae& sae) {
    using Shape = std::vector<std::uint64_t>;
    const std::uint64_t in = sae.d_in, n = sae.d_sae, out = sae.d_out;
    std::vector<std::pair<std::string, Shape>> want = {{"W_enc", {in, n}}, {"W_dec", {n, out}}, {"b_dec", {out}}};
    if (sae.architecture != Architecture::Gated) want.push_back({"b_enc", {n}});
    if (sae.architecture == Architecture::JumpRelu) want.push_back({"threshold", {n}});
    if (sae.architecture == Architecture::Gated)
        for (const char* name : {"b_gate", "b_mag", "r_mag"}) want.push_back({name, {n}});
    for (const SafetensorsTensor& t : st.tensors()) {
        const bool known = std::any_of(want.begin(), want.end(), [&](const auto& w) { return w.first == t.name; });
        if (!known)
            throw Error(fmt::format("{}: tensor '{}': not a weight of a {} {} (Ember does not know what it does)",
                                    st.path().string(), t.name, architecture_name(sae.architecture),
                                    sae.is_transcoder() ? "transcoder" : "SAE"));
    }
    const auto load = [&](const std::string& name, const Shape& shape) { return st.floats(st.require(name, shape)); };
    sae.W_enc = load("W_enc", {in, n});
    sae.W_dec = load("W_dec", {n, out});
    sae.b_dec = load("b_dec", {out});
    if (sae.architecture != Architecture::Gated) sae.b_enc = load("b_enc", {n});
    if (sae.architecture == Architecture::JumpRelu) sae.threshold = load("threshold", {n});
    if (sae.architecture == Architecture::Gated) {
        sae.b_gate = load("b_gate", {n});
        sae.b_mag = load("b_mag", {n});
        sae.r_mag = load("r_mag", {n});
    }
}

hooks::HookSite resolve_site(const fs::path& file, const std::string& name) {
    try {
        return hooks::resolve_hook_name(name);
    } catch (const Error& e) {
        throw Error(fmt::format("{}: {}", file.string(), e.what()));
    }
}

Sae load_saelens(const fs::path& dir, const SaeLoadOptions& options) {
    const Config cfg = read_config(dir / "cfg.json");
    const json::object* metadata = cfg.object("metadata");
    const bool six = metadata != nullptr;
    Sae sae;
    sae.name = sae_name(dir);
    sae.path = dir;
    sae.format = six ? "saelens-6" : "saelens-5";
    auto [architecture, transcoder] = read_architecture(cfg, six);
    sae.architecture = architecture;
    sae.d_in = cfg.positive("d_in");
    sae.d_sae = cfg.positive("d_sae");
    sae.d_out = transcoder ? cfg.positive("d_out") : sae.d_in;

    const std::optional<std::string> file_hook = six ? cfg.string("hook_name", metadata) : cfg.string("hook_name");
    if (!file_hook && !options.site) cfg.fail(six ? "metadata.hook_name" : "hook_name", "missing, and no site was given");
    const json::value* head = six ? metadata->if_contains("hook_head_index") : cfg.find("hook_head_index");
    if (head && !head->is_null()) cfg.fail("hook_head_index", "set: Ember's SAEs read whole sites, not one head");
    sae.hook_name = options.site.value_or(*file_hook);
    sae.site = resolve_site(cfg.path(), sae.hook_name);
    if (transcoder) {
        const auto out = cfg.string("hook_name_out");
        if (!out) cfg.fail("hook_name_out", "missing: a transcoder names the site it writes");
        sae.output_hook_name = *out;
        sae.output_site = resolve_site(cfg.path(), *out);
    }
    read_options(cfg, six, sae);

    const fs::path weights = dir / "sae_weights.safetensors";
    const SafetensorsFile st = SafetensorsFile::open(weights);
    read_weights(st, sae);
    sae.inputs.push_back({dir / "cfg.json", cached_sha256_file_hex(dir / "cfg.json")});
    sae.inputs.push_back({weights, cached_sha256_file_hex(weights)});
    return sae;
}

Sae load_gemma_scope(const fs::path& file, const fs::path& dir, const SaeLoadOptions& options) {
    if (!options.site)
        throw Error(fmt::format("{}: Gemma Scope's params.npz names no site; give one (--sae-site, [[sae]] site = "
                                "\"after_layer:12\")",
                                file.string()));
    const NpzFile npz = NpzFile::open(file);
    const NpzArray* enc = npz.find("W_enc");
    if (!enc || enc->shape.size() != 2) throw Error(fmt::format("{}: member 'W_enc.npy': missing or not 2-D", file.string()));
    Sae sae;
    sae.name = sae_name(dir);
    sae.path = dir;
    sae.format = "gemma-scope";
    sae.architecture = Architecture::JumpRelu;
    sae.d_in = sae.d_out = enc->shape[0];
    sae.d_sae = enc->shape[1];
    sae.apply_b_dec_to_input = false;  // Gemma Scope's encoder reads x itself
    sae.hook_name = *options.site;
    sae.site = resolve_site(file, sae.hook_name);
    const std::set<std::string> known = {"W_enc", "W_dec", "b_enc", "b_dec", "threshold"};
    for (const NpzArray& a : npz.arrays())
        if (!known.contains(a.name))
            throw Error(fmt::format("{}: member '{}': not a Gemma Scope weight (W_enc, W_dec, b_enc, b_dec, threshold)",
                                    file.string(), a.name));
    sae.W_enc = npz.floats("W_enc", {sae.d_in, sae.d_sae});
    sae.W_dec = npz.floats("W_dec", {sae.d_sae, sae.d_in});
    sae.b_enc = npz.floats("b_enc", {sae.d_sae});
    sae.b_dec = npz.floats("b_dec", {sae.d_in});
    sae.threshold = npz.floats("threshold", {sae.d_sae});
    sae.inputs.push_back({file, cached_sha256_file_hex(file)});
    return sae;
}

// Gemma Scope 2 (as SAELens's gemma_3 loader reads it): DIR/config.json names the sites as
// Hugging Face module names (hf_hook_point_in, and for a transcoder hf_hook_point_out),
// DIR/params.safetensors holds w_enc [d_in, d_sae], w_dec [d_sae, d_out], b_enc, b_dec
// and threshold: JumpReLU, no b_dec on the input, no normalization.
Sae load_gemma_scope_2(const fs::path& dir, const SaeLoadOptions& options) {
    const Config cfg = read_config(dir / "config.json");
    const std::string arch = cfg.string("architecture").value_or("jump_relu");
    if (arch != "jump_relu" && arch != "jumprelu")
        cfg.fail("architecture", fmt::format("'{}' is not one Ember computes for Gemma Scope 2 (jump_relu)", arch));
    if (cfg.boolean("affine_connection", false))
        cfg.fail("affine_connection", "true: the transcoder's affine skip connection is not implemented in Ember");
    const std::optional<std::string> in = cfg.string("hf_hook_point_in");
    if (!in && !options.site) cfg.fail("hf_hook_point_in", "missing, and no site was given");
    const std::optional<std::string> out = cfg.string("hf_hook_point_out");
    const bool transcoder = out && *out != in.value_or("");

    const fs::path weights = dir / "params.safetensors";
    const SafetensorsFile st = SafetensorsFile::open(weights);
    const SafetensorsTensor* enc = st.find("w_enc");
    const SafetensorsTensor* dec = st.find("w_dec");
    if (!enc || enc->shape.size() != 2)
        throw Error(fmt::format("{}: tensor 'w_enc': missing or not 2-D", weights.string()));
    if (!dec || dec->shape.size() != 2)
        throw Error(fmt::format("{}: tensor 'w_dec': missing or not 2-D", weights.string()));
    Sae sae;
    sae.name = sae_name(dir);
    sae.path = dir;
    sae.format = "gemma-scope-2";
    sae.architecture = Architecture::JumpRelu;
    sae.d_in = enc->shape[0];
    sae.d_sae = enc->shape[1];
    sae.d_out = dec->shape[1];
    if (!transcoder && sae.d_out != sae.d_in)
        throw Error(fmt::format("{}: tensor 'w_dec': {} wide, but an SAE decodes into its d_in ({})", weights.string(),
                                sae.d_out, sae.d_in));
    if (cfg.find("width") && cfg.positive("width") != sae.d_sae)
        cfg.fail("width", fmt::format("{}, but w_enc has {} features", cfg.positive("width"), sae.d_sae));
    sae.apply_b_dec_to_input = false;
    sae.hook_name = options.site.value_or(in.value_or(""));
    sae.site = resolve_site(cfg.path(), sae.hook_name);
    if (transcoder) {
        sae.output_hook_name = *out;
        sae.output_site = resolve_site(cfg.path(), *out);
    }
    const std::set<std::string> known = {"w_enc", "w_dec", "b_enc", "b_dec", "threshold"};
    for (const SafetensorsTensor& t : st.tensors())
        if (!known.contains(t.name))
            throw Error(fmt::format("{}: tensor '{}': not a Gemma Scope 2 weight (w_enc, w_dec, b_enc, b_dec, threshold)",
                                    weights.string(), t.name));
    const std::uint64_t n = sae.d_sae;
    sae.W_enc = st.floats(st.require("w_enc", {sae.d_in, n}));
    sae.W_dec = st.floats(st.require("w_dec", {n, sae.d_out}));
    sae.b_enc = st.floats(st.require("b_enc", {n}));
    sae.b_dec = st.floats(st.require("b_dec", {sae.d_out}));
    sae.threshold = st.floats(st.require("threshold", {n}));
    sae.inputs.push_back({dir / "config.json", cached_sha256_file_hex(dir / "config.json")});
    sae.inputs.push_back({weights, cached_sha256_file_hex(weights)});
    return sae;
}

}  // namespace

Sae load_sae(const fs::path& path, const SaeLoadOptions& options) {
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) {
        if (path.filename() == "params.npz" || path.extension() == ".npz")
            return load_gemma_scope(path, path.parent_path(), options);
        throw Error(fmt::format("{}: not an SAE Ember reads: give the SAE's directory (SAELens: cfg.json + "
                                "sae_weights.safetensors; Gemma Scope: params.npz)",
                                path.string()));
    }
    if (!fs::is_directory(path, ec)) throw Error(fmt::format("{}: no such SAE directory", path.string()));
    if (fs::exists(path / "cfg.json")) return load_saelens(path, options);
    if (fs::exists(path / "params.npz")) return load_gemma_scope(path / "params.npz", path, options);
    if (fs::exists(path / "params.safetensors")) {
        if (!fs::exists(path / "config.json"))
            throw Error(fmt::format("{}: params.safetensors without config.json (Gemma Scope 2 keeps its sites there)",
                                    path.string()));
        return load_gemma_scope_2(path, options);
    }
    throw Error(fmt::format("{}: holds no SAE Ember reads (SAELens: cfg.json + sae_weights.safetensors; Gemma Scope: "
                            "params.npz; Gemma Scope 2: config.json + params.safetensors)",
                            path.string()));
}

namespace {

// Width of the tensor at `site`, or 0 for a stage an SAE cannot read.
std::size_t site_width(const hooks::HookSite& site, const SiteWidths& w) {
    switch (site.stage) {
        case hooks::Stage::HeadOutputs: return w.head_width.at(*site.layer);
        case hooks::Stage::MlpActivation: return w.ff_width.at(*site.layer);
        case hooks::Stage::AttentionPattern:
        case hooks::Stage::AfterLogits: return 0;
        default: return w.n_embd;
    }
}

void fit_site(const Sae& sae, const std::string& name, hooks::HookSite& site, std::size_t width, const SiteWidths& w,
              std::string_view what) {
    try {
        site = hooks::fit_hook_site(name, site, w.n_layers, w.block_post_norms);
    } catch (const Error& e) {
        throw Error(fmt::format("{}: {}", sae.path.string(), e.what()));
    }
    const std::size_t have = site_width(site, w);
    if (have == 0)
        throw Error(fmt::format("{}: hook name '{}': an SAE cannot {} {}", sae.path.string(), name, what,
                                hooks::stage_name(site.stage)));
    if (have != width)
        throw Error(fmt::format("{}: {} {}, but {} ('{}') is {} wide in this model", sae.path.string(),
                                what == "read" ? "d_in" : "d_out", width, hooks::site_text(site), name, have));
}

}  // namespace

SiteWidths site_widths(const models::ModelConfig& c) {
    SiteWidths w;
    w.n_embd = c.n_embd;
    w.n_layers = c.n_layers;
    w.block_post_norms = c.family == models::Family::Gemma4;  // its blocks are post-normed (model-math)
    for (const models::LayerConfig& L : c.layers) {
        w.head_width.push_back(std::size_t{L.n_head} * L.head_dim);
        w.ff_width.push_back(L.n_ff);
    }
    return w;
}

void fit_sae_to_model(Sae& sae, const SiteWidths& widths) {
    fit_site(sae, sae.hook_name, sae.site, sae.d_in, widths, "read");
    if (!sae.output_site) return;
    fit_site(sae, *sae.output_hook_name, *sae.output_site, sae.d_out, widths, "write");
    // The output site must fire after the input one (the stage table is in firing order).
    const auto order = [&](const hooks::HookSite& s) {
        const std::size_t layer = s.layer ? *s.layer : widths.n_layers;
        const auto at = std::find(hooks::kTensorStages.begin(), hooks::kTensorStages.end(), s.stage);
        return std::pair(layer, static_cast<std::size_t>(at - hooks::kTensorStages.begin()));
    };
    if (order(*sae.output_site) <= order(sae.site))
        throw Error(fmt::format("{}: a transcoder writes {} before (or where) it reads {}", sae.path.string(),
                                hooks::site_text(*sae.output_site), hooks::site_text(sae.site)));
}

}  // namespace ember::features
