// Verifying a run directory against its manifest (`ember verify DIR`): the manifest's
// seal, every listed file's size and SHA-256, every array's .npy header (dtype, order,
// shape, data length) against what the manifest says it holds, and that no file under
// the directory is left out of the manifest (but for the lock record .ember-lock of a
// writer at work, which belongs to no run). A manifest.json in a subdirectory (capture's)
// is verified the same way. Every problem names the file it is about, and a malformed
// manifest value the key ("files.x.npy.bytes is -3, not a size").
#pragma once

#include <boost/json/array.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace ember::record {

struct VerifyProblem {
    std::string file;  // relative to the directory ("manifest.json", "capture/after_layer.layer3.prefill.npy")
    std::string message;
};

struct VerifyReport {
    std::vector<VerifyProblem> problems;  // empty: the directory is what its manifest says
    std::vector<VerifyProblem> warnings;  // nothing is only a warning any more; kept for the --json shape
    std::size_t files_checked = 0;
    // From the manifest, when it could be read:
    std::string kind;
    std::string run_id;
    std::string config_hash;
    std::string manifest_sha256;
    boost::json::array inputs;  // the inputs record (docs/formats.md, "Inputs")
    bool ok() const { return problems.empty(); }
};

VerifyReport verify_run_directory(const std::filesystem::path& dir);

}  // namespace ember::record
