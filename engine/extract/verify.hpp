// Verifying a run directory against its manifest (`ember verify DIR`): the manifest's
// seal, every listed file's size and SHA-256, and every array's .npy header (dtype, order,
// shape, data length) against what the manifest says it holds. Every problem names the
// file it is about.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace ember::extract {

struct VerifyProblem {
    std::string file;  // relative to the directory ("manifest.json", "after_layer.layer3.npy")
    std::string message;
};

struct VerifyReport {
    std::vector<VerifyProblem> problems;  // empty: the directory is what its manifest says
    std::vector<VerifyProblem> warnings;  // files the manifest does not list
    std::size_t files_checked = 0;
    std::string config_hash;              // from the manifest, when it could be read
    bool ok() const { return problems.empty(); }
};

VerifyReport verify_run_directory(const std::filesystem::path& dir);

}  // namespace ember::extract
