// Rung: activation-reference (Ember's encoder and decoder against a NumPy reference).
//
// A fixture model's prefill is captured at layer 1 (after_layer, residual_mid, mlp_input). A seeded
// Python script (sae_fixtures.py) writes fixture SAEs into a temp dir — SAELens 5.x and
// 6.x layouts, every architecture (standard, jumprelu, topk, gated), every option
// (apply_b_dec_to_input, the four normalize_activations), F32/F16/BF16 weights, a
// transcoder, Gemma Scope's params.npz and Gemma Scope 2 (an SAE and an MLP transcoder) — and
// computes, in float64 from the files alone,
// the features and reconstruction of the captured activations with SAELens's formulas.
// Ember loads each SAE, checks it against the model and encodes/decodes the same rows:
// - the active sets are equal except where the reference pre-activation is within 1e-6 of
//   the boundary that decides it (threshold, 0, topk's k-th value);
// - active features within 1e-5 relative of the reference (1e-7 absolute floor);
// - reconstructions likewise, on every row whose active set agrees;
// - the same for the fast encoder (features/fast_encoder.hpp: the fast route's F32 product),
//   all rows in one product and each row alone.
#include <doctest/doctest.h>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include <ember/npy.hpp>

#include "features/sae.hpp"
#include "features/fast_encoder.hpp"
#include "features/sae_loader.hpp"
#include "kernels/fast/thread_pool.hpp"
#include "gguf/gguf_file.hpp"
#include "hooks/hooks.hpp"
#include "models/model.hpp"
#include "runtime/session.hpp"
#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;
using hooks::Stage;

constexpr std::size_t kTokens = 9;
constexpr std::uint32_t kLayer = 1;

const fs::path kScript = fs::path(EMBER_SOURCE_DIR) / "tests/features/sae_fixtures.py";

// Copies the prefill's tensors at the sites the fixtures read.
class SiteCapture final : public hooks::ActiveHooks {
public:
    std::map<Stage, std::vector<float>> rows;
    std::size_t cols = 0;
    void stage(Stage stage, const hooks::EvalInfo& eval, std::uint32_t layer, hooks::TensorView t) override {
        if (eval.phase != hooks::Phase::Prefill || layer != kLayer) return;
        if (!wants(stage)) return;
        rows[stage].assign(t.data, t.data + t.rows * t.cols);
        cols = t.cols;
    }
    bool wants(Stage stage) const override {
        return stage == Stage::AfterLayer || stage == Stage::ResidualMid || stage == Stage::MlpInput;
    }
};

features::SiteWidths widths_of(const models::ModelConfig& c) {
    features::SiteWidths w;
    w.n_embd = c.n_embd;
    w.n_layers = c.n_layers;
    w.block_post_norms = c.family == models::Family::Gemma4;
    for (const models::LayerConfig& L : c.layers) {
        w.head_width.push_back(std::size_t{L.n_head} * L.head_dim);
        w.ff_width.push_back(L.n_ff);
    }
    return w;
}

// A python3 that has NumPy: the Debian one (python3-numpy) when the first on PATH lacks it.
std::string numpy_python() {
    for (const char* candidate : {"python3", "/usr/bin/python3"})
        if (run_command(std::string(candidate) + " -c 'import numpy' 2>/dev/null").exit_code == 0) return candidate;
    FAIL("no python3 with NumPy found; install python3-numpy (scripts/setup.sh does)");
    return {};
}

void run_python(const std::string& arguments) {
    static const std::string python = numpy_python();
    const CommandResult r = run_command(python + " " + shell_quote(kScript.string()) + " " + arguments, true);
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
}

boost::json::array fixture_list(const fs::path& dir) {
    std::ifstream in(dir / "fixtures.json");
    std::stringstream text;
    text << in.rdbuf();
    return boost::json::parse(text.str()).as_array();
}

struct Comparison {
    std::size_t active = 0, total = 0, set_mismatches = 0, value_failures = 0, recon_failures = 0;
    double worst_value = 0.0, worst_recon = 0.0;
};

// Features within 1e-5 relative (1e-7 absolute floor), the same active set except within
// 1e-6 of a boundary, reconstructions within 1e-5 relative (1e-6 floor): for both encoders.
Comparison compare(const features::Sae& sae, const std::vector<float>& features, const std::vector<float>& recon,
                   const fs::path& prefix) {
    const npy::Array want = npy::read(prefix.string() + ".features.npy");
    const npy::Array want_recon = npy::read(prefix.string() + ".recon.npy");
    const npy::Array margin = npy::read(prefix.string() + ".margin.npy");
    REQUIRE(want.values.size() == features.size());
    REQUIRE(want_recon.values.size() == recon.size());
    Comparison c;
    const std::size_t n = sae.d_sae, T = features.size() / n;
    for (std::size_t t = 0; t < T; ++t) {
        bool row_agrees = true;
        for (std::size_t j = 0; j < n; ++j) {
            const std::size_t i = t * n + j;
            const bool fires = features[i] != 0.0f, should = want.values[i] != 0.0f;
            c.total += 1;
            c.active += should;
            if (fires != should) {
                row_agrees = false;
                if (margin.values[i] >= 1e-6) c.set_mismatches += 1;
                continue;
            }
            const double error = std::abs(static_cast<double>(features[i]) - want.values[i]);
            c.worst_value = std::max(c.worst_value, error / std::max(std::abs(static_cast<double>(want.values[i])), 1e-30));
            if (error > 1e-5 * std::abs(want.values[i]) + 1e-7) c.value_failures += 1;
        }
        if (!row_agrees) continue;
        for (std::size_t k = 0; k < sae.d_out; ++k) {
            const std::size_t i = t * sae.d_out + k;
            const double error = std::abs(static_cast<double>(recon[i]) - want_recon.values[i]);
            c.worst_recon = std::max(c.worst_recon, error);
            if (error > 1e-5 * std::abs(want_recon.values[i]) + 1e-6) c.recon_failures += 1;
        }
    }
    return c;
}

}  // namespace

TEST_CASE("fixture SAEs of every layout, architecture and option match the NumPy reference") {
    TempDir dir;
    const gguf::File file = gguf::File::open(fixture_path("models/synth-llama3-q8_0.gguf"));
    const std::unique_ptr<models::Model> model = models::load_model(file);
    const models::ModelConfig& c = model->config();
    runtime::Session session(*model, {.route = runtime::Route::Reference, .context_length = 32, .threads = 2,
                                      .max_batch = kTokens});
    std::vector<std::int32_t> ids;
    for (std::size_t t = 0; t < kTokens; ++t) ids.push_back(static_cast<std::int32_t>((53 * t + 7) % c.n_vocab));
    SiteCapture capture;
    session.prefill(ids, false, &capture);
    REQUIRE(capture.rows.size() == 3);
    const std::map<Stage, fs::path> acts = {{Stage::AfterLayer, dir.path() / "after_layer.npy"},
                                            {Stage::ResidualMid, dir.path() / "residual_mid.npy"},
                                            {Stage::MlpInput, dir.path() / "mlp_input.npy"}};
    for (const auto& [stage, path] : acts) npy::write_f32(path, capture.rows[stage].data(), {kTokens, capture.cols});

    const fs::path saes = dir.path() / "saes";
    fs::create_directory(saes);
    run_python("write " + shell_quote(saes.string()) + " " + shell_quote(acts.at(Stage::AfterLayer).string()) + " " +
               std::to_string(kLayer) + " 20261201");

    const boost::json::array listed = fixture_list(saes);
    CHECK(listed.size() >= 18);
    for (const boost::json::value& entry : listed) {
        const boost::json::object& o = entry.as_object();
        const std::string name(o.at("name").as_string());
        CAPTURE(name);
        features::SaeLoadOptions options;
        if (o.contains("site_given")) options.site = std::string(o.at("site").as_string());
        features::Sae sae = features::load_sae(saes / name, options);
        CHECK(sae.format == std::string(o.at("format").as_string()));
        CHECK(hooks::site_text(sae.site) == std::string(o.at("site").as_string()));
        if (o.contains("output_site")) {
            REQUIRE(sae.output_site);
            CHECK(hooks::site_text(*sae.output_site) == std::string(o.at("output_site").as_string()));
        }
        CHECK(!sae.inputs.empty());
        features::fit_sae_to_model(sae, widths_of(c));

        const std::vector<float>& x = capture.rows.at(sae.site.stage);
        std::vector<float> f(kTokens * sae.d_sae), recon(kTokens * sae.d_out);
        features::RowNorm norm;
        features::encode(sae, x.data(), kTokens, f.data(), norm);
        features::decode(sae, f.data(), kTokens, norm, recon.data());
        const fs::path prefix = dir.path() / name;
        run_python("reference " + shell_quote((saes / name).string()) + " " + shell_quote(acts.at(sae.site.stage).string()) +
                   " " + shell_quote(prefix.string()));
        const Comparison cmp = compare(sae, f, recon, prefix);
        MESSAGE(name << ": " << cmp.active << " of " << cmp.total << " active; worst feature error " << cmp.worst_value
                     << " relative, worst reconstruction error " << cmp.worst_recon);
        // The comparison can fail: some features fire and some do not.
        CHECK(cmp.active > 0);
        CHECK(cmp.active < cmp.total);
        CHECK(cmp.set_mismatches == 0);
        CHECK(cmp.value_failures == 0);
        CHECK(cmp.recon_failures == 0);
#ifndef EMBER_NO_FAST_ROUTE
        // The fast encoder (double sums in one fixed order) against the same reference and
        // bounds: all rows in one product, and each row alone (the same bits, checked).
        const features::FastEncoder fast(sae);
        kernels::fast::ThreadPool pool(2);
        std::vector<float> fast_all;
        for (const bool alone : {false, true}) {
            CAPTURE(alone);
            std::vector<float> ff(kTokens * sae.d_sae), frecon(kTokens * sae.d_out);
            features::RowNorm fnorm;
            if (!alone) {
                fast.encode(x.data(), kTokens, ff.data(), fnorm, pool);
            } else {
                for (std::size_t t = 0; t < kTokens; ++t) {
                    features::RowNorm one;
                    fast.encode(x.data() + t * sae.d_in, 1, ff.data() + t * sae.d_sae, one, pool);
                    fnorm.in_scale.push_back(one.in_scale[0]);
                    fnorm.in_shift.push_back(one.in_shift[0]);
                    fnorm.out_scale.push_back(one.out_scale[0]);
                    fnorm.out_shift.push_back(one.out_shift[0]);
                }
            }
            features::decode(sae, ff.data(), kTokens, fnorm, frecon.data());
            const Comparison fcmp = compare(sae, ff, frecon, prefix);
            MESSAGE(name << std::string(alone ? " (fast, row by row)" : " (fast)") << ": worst feature error "
                         << fcmp.worst_value << " relative");
            CHECK(fcmp.set_mismatches == 0);
            CHECK(fcmp.value_failures == 0);
            CHECK(fcmp.recon_failures == 0);
            if (!alone) fast_all = ff;
            else CHECK(ff == fast_all);
        }
#endif
    }
}

}  // namespace ember::test
