// A plugin "written outside the project": the issue-5 example, built by the ABI test with
// exactly `g++ -std=c++20 -shared -fPIC -I<sdk include> counter.cpp` and nothing else.
// It counts the calls of every stage and logs the counts when the generation completes.
#include <ember/experiment.hpp>

#include <string>

class Counter : public ember::Experiment {
public:
    const char* name() const override { return "counter"; }  // the only required member
    ember::Status on_model_loaded(const ember::ModelContext&) override { return count(0); }
    ember::Status before_prefill(const ember::ExecutionContext&) override { return count(1); }
    ember::Status before_layer(const ember::LayerContext&, ember::TensorAccess&) override { return count(2); }
    ember::Status after_attention(const ember::LayerContext&, ember::TensorAccess&) override { return count(3); }
    ember::Status after_mlp(const ember::LayerContext&, ember::TensorAccess&) override { return count(4); }
    ember::Status after_layer(const ember::LayerContext&, ember::TensorAccess&) override { return count(5); }
    ember::Status before_logits(const ember::ExecutionContext&, ember::TensorAccess&) override { return count(6); }
    ember::Status after_logits(const ember::ExecutionContext&, ember::TensorAccess&) override { return count(7); }
    ember::Status on_generation_complete(const ember::GenerationContext&) override {
        count(8);
        std::string line = "counts";
        for (int c : counts_) line += " " + std::to_string(c);
        ember::host().info(line);
        return {};
    }
    ember::Status on_error(const ember::GenerationContext&, std::string_view) override { return count(9); }

private:
    ember::Status count(int stage) {
        ++counts_[stage];
        return {};
    }
    int counts_[10] = {};
};
EMBER_EXPORT_EXPERIMENT(Counter)
