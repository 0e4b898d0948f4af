// A plugin "written outside the project": the issue-5 example, built by the tests with
// exactly `g++ -std=c++20 -shared -fPIC -I<sdk include> counter.cpp` and nothing else.
//
// It counts the calls of every stage and checks what it sees, then logs two lines when
// the generation completes:
//   counts ML BP BL AA AM AL BLG ALG GC ERR     (calls per stage, in firing order)
//   checks prefill=1 decode=3 order=0 chain=0 residual=0
// where prefill/decode count the evaluations, `order` the tensor-stage calls out of the
// order before_layer(0), after_attention(0), after_mlp(0), after_layer(0), ...,
// before_logits, after_logits, `chain` the values where before_layer(l+1) differs from
// after_layer(l), and `residual` the values where after_layer differs from
// (before_layer + after_attention) + after_mlp (an identity of Llama and Qwen3).
//
// Config (optional):
//   add_at_position_0 = 0.5   added to the residual of prompt position 0 at before_layer(0)
//   dump = "seen"             writes what it saw as raw float32 into <output dir>/seen/:
//                             after_layer.layer{L}.prefill.f32, before_logits.prefill.f32,
//                             after_logits.step{S}.f32 (S = 0 for the prefill)
#include <ember/experiment.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

class Counter : public ember::Experiment {
public:
    explicit Counter(const ember::ExperimentConfig& config)
        : add_at_position_0_(static_cast<float>(config.get_double("add_at_position_0", 0.0))) {
        const std::string dump_name = config.get_string("dump", "");
        if (!dump_name.empty()) {
            dump_dir_ = std::filesystem::path(std::string(ember::host().run_info().output_dir)) / dump_name;
            std::filesystem::create_directories(dump_dir_);
        }
    }

    const char* name() const override { return "counter"; }  // the only required member

    ember::Status on_model_loaded(const ember::ModelContext&) override { return count(0); }
    ember::Status before_prefill(const ember::ExecutionContext&) override { return count(1); }

    ember::Status before_layer(const ember::LayerContext& ctx, ember::TensorAccess& hidden) override {
        expect(ctx.layer_index, 0);
        if (ctx.layer_index > 0) chain_ += differences(hidden.values(), after_layer_);
        if (ctx.phase == ember::ExecutionPhase::Prefill && ctx.layer_index == 0 && add_at_position_0_ != 0.0f)
            for (float& v : hidden.row_mut(0)) v += add_at_position_0_;
        keep(hidden, before_);
        return count(2);
    }
    ember::Status after_attention(const ember::LayerContext& ctx, ember::TensorAccess& output) override {
        expect(ctx.layer_index, 1);
        keep(output, attention_);
        return count(3);
    }
    ember::Status after_mlp(const ember::LayerContext& ctx, ember::TensorAccess& output) override {
        expect(ctx.layer_index, 2);
        keep(output, mlp_);
        return count(4);
    }
    ember::Status after_layer(const ember::LayerContext& ctx, ember::TensorAccess& hidden) override {
        expect(ctx.layer_index, 3);
        std::vector<float> sum(before_.size());
        for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = (before_[i] + attention_[i]) + mlp_[i];
        residual_ += differences(hidden.values(), sum);
        keep(hidden, after_layer_);
        if (ctx.phase == ember::ExecutionPhase::Prefill)
            dump("after_layer.layer" + std::to_string(ctx.layer_index) + ".prefill.f32", hidden);
        return count(5);
    }
    ember::Status before_logits(const ember::ExecutionContext& ctx, ember::TensorAccess& hidden) override {
        if (next_layer_ != ctx.model.n_layers || next_stage_ != 0) ++order_;
        if (ctx.phase == ember::ExecutionPhase::Prefill) dump("before_logits.prefill.f32", hidden);
        return count(6);
    }
    ember::Status after_logits(const ember::ExecutionContext& ctx, ember::TensorAccess& logits) override {
        ++(ctx.phase == ember::ExecutionPhase::Prefill ? prefill_ : decode_);
        dump("after_logits.step" + std::to_string(prefill_ + decode_ - 1) + ".f32", logits);
        next_layer_ = 0;
        next_stage_ = 0;
        return count(7);
    }
    ember::Status on_generation_complete(const ember::GenerationContext&) override {
        count(8);
        std::string line = "counts";
        for (int c : counts_) line += " " + std::to_string(c);
        ember::host().info(line);
        ember::host().info("checks prefill=" + std::to_string(prefill_) + " decode=" + std::to_string(decode_) +
                           " order=" + std::to_string(order_) + " chain=" + std::to_string(chain_) +
                           " residual=" + std::to_string(residual_));
        return {};
    }
    ember::Status on_error(const ember::GenerationContext&, std::string_view) override { return count(9); }

private:
    ember::Status count(int stage) {
        ++counts_[stage];
        return {};
    }
    // Layer stages must come as layer 0's four, then layer 1's, ... in increasing order.
    void expect(std::size_t layer, unsigned stage) {
        if (layer != next_layer_ || stage != next_stage_) ++order_;
        next_stage_ = (stage + 1) % 4;
        next_layer_ = layer + (stage == 3 ? 1u : 0u);
    }
    static void keep(const ember::TensorAccess& t, std::vector<float>& into) {
        into.assign(t.values().begin(), t.values().end());
    }
    static std::size_t differences(std::span<const float> a, const std::vector<float>& b) {
        if (a.size() != b.size()) return a.size() + b.size();
        std::size_t n = 0;
        for (std::size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
        return n;
    }
    void dump(const std::string& file, const ember::TensorAccess& t) const {
        if (dump_dir_.empty()) return;
        std::ofstream out(dump_dir_ / file, std::ios::binary);
        out.write(reinterpret_cast<const char*>(t.values().data()), static_cast<std::streamsize>(t.values().size_bytes()));
    }

    float add_at_position_0_;
    std::filesystem::path dump_dir_;
    int counts_[10] = {};
    std::size_t next_layer_ = 0;
    unsigned next_stage_ = 0;
    std::size_t prefill_ = 0, decode_ = 0, order_ = 0, chain_ = 0, residual_ = 0;
    std::vector<float> before_, attention_, mlp_, after_layer_;
};
EMBER_EXPORT_EXPERIMENT(Counter)
