// Test plugin: writes a NaN (or an infinity) into one activation. Config:
//   stage = "after_mlp"   (any layer stage)   layer = 1   phase = "prefill"
//   row = 2   column = 3   value = "nan" | "inf" | "-inf"
#include <ember/experiment.hpp>

#include <limits>
#include <string>

namespace {

class NanPlanter : public ember::Experiment {
public:
    explicit NanPlanter(const ember::ExperimentConfig& config)
        : stage_(config.get_string("stage", "after_mlp")),
          phase_(config.get_string("phase", "prefill")),
          layer_(static_cast<std::size_t>(config.get_int("layer", 0))),
          row_(static_cast<std::size_t>(config.get_int("row", 0))),
          column_(static_cast<std::size_t>(config.get_int("column", 0))) {
        const std::string v = config.get_string("value", "nan");
        value_ = v == "inf"    ? std::numeric_limits<float>::infinity()
                 : v == "-inf" ? -std::numeric_limits<float>::infinity()
                               : std::numeric_limits<float>::quiet_NaN();
    }
    const char* name() const override { return "nan-planter"; }
    ember::Status after_attention(const ember::LayerContext& c, ember::TensorAccess& t) override {
        return plant("after_attention", c, t);
    }
    ember::Status after_mlp(const ember::LayerContext& c, ember::TensorAccess& t) override {
        return plant("after_mlp", c, t);
    }

private:
    ember::Status plant(const char* stage, const ember::LayerContext& c, ember::TensorAccess& t) {
        if (stage_ == stage && phase_ == ember::phase_name(c.phase) && layer_ == c.layer_index && row_ < t.shape()[0] &&
            column_ < t.shape()[1])
            t.row_mut(row_)[column_] = value_;
        return {};
    }

    std::string stage_, phase_;
    std::size_t layer_, row_, column_;
    float value_;
};

}  // namespace

EMBER_EXPORT_EXPERIMENT(NanPlanter)
