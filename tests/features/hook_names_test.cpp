// Rung: smoke (the hook-name table: names other tools write onto Ember's stages).
//
// Each convention's names resolve to the stage and layer docs/features.md lists; names the
// table refuses say why; unknown names, bad layer numbers and names that mean another
// tensor in a family (a raw block output where the family post-norms it) are errors that
// name the name.
#include <doctest/doctest.h>

#include <string>

#include "common/error.hpp"
#include "hooks/hook_names.hpp"

namespace ember::test {
namespace {

using hooks::HookSite;
using hooks::PostNormUse;
using hooks::Stage;

void check_resolves(const std::string& name, Stage stage, std::optional<std::uint32_t> layer) {
    CAPTURE(name);
    const HookSite site = hooks::resolve_hook_name(name);
    CHECK(hooks::stage_name(site.stage) == hooks::stage_name(stage));
    CHECK(site.layer == layer);
}

std::string error_of(const std::string& name) {
    try {
        hooks::resolve_hook_name(name);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("TransformerLens names map onto the stages") {
    check_resolves("blocks.0.hook_resid_pre", Stage::BeforeLayer, 0);
    check_resolves("blocks.12.hook_resid_mid", Stage::ResidualMid, 12);
    check_resolves("blocks.12.hook_mlp_in", Stage::ResidualMid, 12);
    check_resolves("blocks.7.hook_resid_post", Stage::AfterLayer, 7);
    check_resolves("blocks.3.hook_attn_out", Stage::AfterAttention, 3);
    check_resolves("blocks.3.hook_mlp_out", Stage::AfterMlp, 3);
    check_resolves("blocks.25.attn.hook_z", Stage::HeadOutputs, 25);
    check_resolves("blocks.1.attn.hook_pattern", Stage::AttentionPattern, 1);
    check_resolves("blocks.1.mlp.hook_post", Stage::MlpActivation, 1);
}

TEST_CASE("Hugging Face module names map onto the stages") {
    check_resolves("model.layers.5", Stage::AfterLayer, 5);
    check_resolves("model.layers.5.output", Stage::AfterLayer, 5);
    check_resolves("model.layers.5.input", Stage::BeforeLayer, 5);
    check_resolves("model.layers.5.self_attn", Stage::AfterAttention, 5);
    check_resolves("model.layers.5.mlp", Stage::AfterMlp, 5);
    check_resolves("model.layers.5.mlp.down_proj.input", Stage::MlpActivation, 5);
    check_resolves("model.layers.5.self_attn.o_proj.input", Stage::HeadOutputs, 5);
    check_resolves("model.layers.5.post_feedforward_layernorm", Stage::AfterMlp, 5);
    check_resolves("model.layers.5.pre_feedforward_layernorm", Stage::MlpInput, 5);
    check_resolves("model.layers.5.pre_feedforward_layernorm.output", Stage::MlpInput, 5);
    check_resolves("model.layers.5.mlp.input", Stage::MlpInput, 5);
    check_resolves("model.norm", Stage::BeforeLogits, std::nullopt);
    // Gemma 3/4 checkpoints nest the text model.
    check_resolves("model.language_model.layers.9", Stage::AfterLayer, 9);
    check_resolves("model.language_model.layers.9.mlp", Stage::AfterMlp, 9);
}

TEST_CASE("Ember's own site spelling, for every tensor stage of the stage table") {
    for (Stage s : hooks::kTensorStages) {
        const std::string name(hooks::stage_name(s));
        if (hooks::is_layer_stage(s)) {
            check_resolves(name + ":4", s, 4);
            CHECK(hooks::site_text(hooks::resolve_hook_name(name + ":4")) == name + ":4");
            CHECK(error_of(name).find("hook name '" + name + "'") == 0);  // a layer stage needs its layer
        } else {
            check_resolves(name, s, std::nullopt);
            CHECK(error_of(name + ":1").find("not a site Ember knows") != std::string::npos);
        }
    }
}

TEST_CASE("unknown names and malformed layers are errors naming the name") {
    for (const std::string name : {"blocks.x.hook_resid_post", "blocks.-1.hook_resid_post", "blocks.01.hook_resid_post",
                                   "blocks.1.hook_resid_postX", "blocks..hook_resid_post", "hook_embed",
                                   "model.layers.3.self_attn.q_proj", "", "after_layer:", "after_layer:1:2",
                                   "blocks.99999999.hook_resid_post"}) {
        CAPTURE(name);
        const std::string error = error_of(name);
        CHECK(error.find("hook name '" + name + "'") == 0);
    }
}

TEST_CASE("names Ember cannot honour are refused with the reason") {
    CHECK(error_of("ln_final.hook_normalized").find("before its weight") != std::string::npos);
    CHECK(error_of("blocks.2.ln2.hook_normalized").find("before its weight") != std::string::npos);
    CHECK(error_of("blocks.2.mlp.hook_pre").find("no stage") != std::string::npos);
}

TEST_CASE("a site is checked against the model: its layer and the family's post-norms") {
    const HookSite raw_mlp = hooks::resolve_hook_name("model.layers.2.mlp");
    CHECK(raw_mlp.post_norm == PostNormUse::BeforePostNorm);
    CHECK_NOTHROW(hooks::fit_hook_site("model.layers.2.mlp", raw_mlp, 4, false));
    CHECK_THROWS_WITH_AS(hooks::fit_hook_site("model.layers.2.mlp", raw_mlp, 4, true),
                         doctest::Contains("'model.layers.2.mlp': the block's output before its post-norm"), Error);

    const HookSite post_ffw = hooks::resolve_hook_name("model.layers.2.post_feedforward_layernorm");
    CHECK(hooks::site_text(hooks::fit_hook_site("model.layers.2.post_feedforward_layernorm", post_ffw, 4, true)) ==
          "after_mlp:2");
    CHECK_THROWS_WITH_AS(hooks::fit_hook_site("model.layers.2.post_feedforward_layernorm", post_ffw, 4, false),
                         doctest::Contains("a block post-norm, which this model does not have"), Error);

    // post_attention_layernorm is Gemma's attention post-norm, but Llama's and Qwen3's MLP input norm.
    const std::string name = "model.layers.2.post_attention_layernorm.output";
    const HookSite post_attention = hooks::resolve_hook_name(name);
    CHECK(hooks::site_text(hooks::fit_hook_site(name, post_attention, 4, true)) == "after_attention:2");
    CHECK(hooks::site_text(hooks::fit_hook_site(name, post_attention, 4, false)) == "mlp_input:2");

    const HookSite late = hooks::resolve_hook_name("blocks.4.hook_resid_post");
    CHECK_THROWS_WITH_AS(hooks::fit_hook_site("blocks.4.hook_resid_post", late, 4, false),
                         doctest::Contains("layer 4, but the model has 4 layers"), Error);
    CHECK_NOTHROW(hooks::fit_hook_site("before_logits", hooks::resolve_hook_name("before_logits"), 4, false));
}

}  // namespace ember::test
