// ember merge SHARD_DIR... --out DIR [--overwrite] [--json]
// Joins the shards of one dataset run (`ember extract --dataset ... --shard K/N`, every K
// once, in any order) into one sealed run directory, byte for byte what the unsharded run
// writes into DIR (extract/dataset_merge.hpp; docs/sweep.md, "Dataset shards"). A shard
// that does not verify, a shard of another run (the field that differs is named), a
// missing or repeated shard is refused before DIR is touched.
#include <fmt/format.h>

#include "cli.hpp"
#include "commands.hpp"
#include "common/error.hpp"
#include "extract/dataset_merge.hpp"
#include "record/run_directory.hpp"

namespace ember::app {

int run_merge(const std::vector<std::string>& args) {
    po::options_description options("merge options");
    options.add_options()
        ("shards", po::value<std::vector<std::string>>(), "the shard directories (every shard of one run)")
        ("out", po::value<std::string>(), "the directory to write the merged run into")
        ("overwrite", po::bool_switch(), "replace an earlier run in the output directory")
        ("json", po::bool_switch(), "print a JSON summary");
    po::positional_options_description positional;
    positional.add("shards", -1);
    po::variables_map vm;
    if (!parse_options("merge", args, options, positional, vm)) return kExitOk;
    if (!vm.count("shards") || !vm.count("out")) throw UsageError("usage: ember merge SHARD_DIR... --out DIR [--overwrite]");
    std::vector<std::filesystem::path> shards;
    for (const std::string& s : vm["shards"].as<std::vector<std::string>>()) shards.emplace_back(s);
    extract::MergeOptions merge;
    merge.overwrite = vm["overwrite"].as<bool>();
    const extract::MergeResult r = extract::merge_dataset_shards(shards, vm["out"].as<std::string>(), merge);
    if (vm["json"].as<bool>()) {
        print_json(boost::json::object{{"dir", r.dir.string()},
                                       {"manifest", (r.dir / record::kManifestName).string()},
                                       {"shards", r.shards},
                                       {"samples", r.samples},
                                       {"rows", r.rows},
                                       {"files", r.files},
                                       {"bytes", r.bytes}});
    } else {
        fmt::print(stderr, "ember merge: {} shards, {} samples, {} rows, {} files ({} bytes) in {}\n", r.shards,
                   r.samples, r.rows, r.files, r.bytes, r.dir.string());
    }
    return kExitOk;
}

}  // namespace ember::app
