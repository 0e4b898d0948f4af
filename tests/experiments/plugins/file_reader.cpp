// Test plugin: reads files through the host (read_input, ABI 1.4) in create, from paths
// no config string names as such: `dir` names a directory (no manifest in it, so the
// config scan records nothing) and `names` the files in it to read. A read the host
// refuses fails create with the host's reason. Config:
//   dir = "/abs/dir"   names = "a.bin,b.txt"
#include <ember/experiment.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace {

class FileReader : public ember::Experiment {
public:
    explicit FileReader(const ember::ExperimentConfig& config)
        : dir_(config.get_string("dir", "")) {
        const std::string names = config.get_string("names", "");
        for (std::size_t at = 0; at <= names.size();) {
            const std::size_t comma = std::min(names.find(',', at), names.size());
            if (comma > at) names_.push_back(names.substr(at, comma - at));
            at = comma + 1;
        }
    }
    const char* name() const override { return "file-reader"; }
    ember::Status on_model_loaded(const ember::ModelContext&) override {
        for (const std::string& name : names_) {
            const auto read = ember::host().read_input(dir_ + "/" + name);
            if (!read.ok()) return ember::Status::error(read.error);
            ember::host().log(ember::LogLevel::Info, name + ": " + std::to_string(read.bytes.size()) + " bytes");
        }
        return {};
    }

private:
    std::string dir_;
    std::vector<std::string> names_;
};

}  // namespace

EMBER_EXPORT_EXPERIMENT(FileReader)
