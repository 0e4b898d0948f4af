// Test plugin: edits a file while the run reads it, at one deterministic moment (the
// first after_attention of layer 0, in the first evaluation). Config:
//   path = "/abs/file"   action = "append" | "rewrite" | "truncate"
// append adds a line; rewrite replaces the bytes with as many others (same size, new
// content); truncate cuts the file to half its size (a model: SIGBUS on a lost page).
#include <ember/experiment.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {

class FileEditor : public ember::Experiment {
public:
    explicit FileEditor(const ember::ExperimentConfig& config)
        : path_(config.get_string("path", "")), action_(config.get_string("action", "append")) {}
    const char* name() const override { return "file-editor"; }
    ember::Status after_attention(const ember::LayerContext& c, ember::TensorAccess&) override {
        if (done_ || c.layer_index != 0) return {};
        done_ = true;
        const int fd = ::open(path_.c_str(), O_RDWR);
        if (fd < 0) return ember::Status::error("cannot open " + path_);
        const off_t size = ::lseek(fd, 0, SEEK_END);
        bool ok = true;
        if (action_ == "truncate") {
            ok = ::ftruncate(fd, size / 2) == 0;
        } else if (action_ == "rewrite") {
            std::vector<char> bytes(static_cast<std::size_t>(size), '\n');
            for (std::size_t i = 0; i + 17 < bytes.size(); i += 18) {
                std::snprintf(&bytes[i], 18, "{\"text\": \"zz\"}   ");
                bytes[i + 17] = '\n';
            }
            ok = ::pwrite(fd, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size());
        } else {
            const std::string line = "{\"text\": \"appended while the run read the file\"}\n";
            ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
        }
        ::close(fd);
        if (!ok) return ember::Status::error("cannot edit " + path_);
        return {};
    }

private:
    std::string path_, action_;
    bool done_ = false;
};

}  // namespace

EMBER_EXPORT_EXPERIMENT(FileEditor)
