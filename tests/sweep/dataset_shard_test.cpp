// Rung: smoke (bit-identity with Ember's own unsharded run, whose rows dataset_test.cpp
// holds to single-prompt extraction and llama.cpp's goldens at the activation-reference
// rung). Dataset shards and `ember merge` as a user runs them, on stories260K and 20 short
// prompts (Arabic among them, targets, a sample that selects nothing): for N = 1..7 every
// sample is in exactly one shard, shard K holding batches floor(K*B/N).. of the unsharded
// run's B, contiguous and in order, and the
// merged shards are the unsharded run's directory byte for byte, manifest included; merge
// refuses shards of different runs (naming the field), a missing, a repeated, an unsealed
// or changed shard, an unsharded run, an output that is a shard, and touches nothing when
// it refuses; `ember sweep` does a `[dataset] shards = N` config as N shard runs and
// merges them, and --slurm writes the merge into the final job.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <boost/json.hpp>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/files.hpp"
#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

// `ember ARGS` in `dir`, no defaults file, stderr with stdout.
CommandResult ember_in(const fs::path& dir, const std::string& args) {
    return run_command(fmt::format("cd {} && env -u EMBER_DEFAULTS XDG_CONFIG_HOME=/nonexistent {} {} 2>&1",
                                   shell_quote(dir.string()), shell_quote(EMBER_BINARY), args));
}

std::string model() { return fixture_path("models/stories260K.gguf").string(); }

// 20 short prompts: English, Arabic, digits, an emoji; some with a target, one selecting nothing.
std::string dataset_text() {
    const char* texts[] = {
        "Once upon a time",         "كتب الطالب الدرس",      "The cat sat on the mat", "ذهب الولد إلى المدرسة",
        "Lily had a red ball",      "في البيت قطة صغيرة",    "He ran home",            "قرأ المعلم الكتاب",
        "The sun was warm 🌞",      "سلام",                  "Tom and Sam played",     "درس الطالب في المكتبة",
        "A little bird sang",       "الشمس مشرقة اليوم",     "She smiled",             "3 cats and 2 dogs",
        "They went to the park",    "كان يا ما كان",         "The end",                "مرحبا بالعالم",
    };
    std::string out;
    for (std::size_t i = 0; i < std::size(texts); ++i) {
        json::object o{{"id", fmt::format("s{}", i)}, {"text", texts[i]}};
        if (i % 3 == 0) o["target"] = " and then";
        if (i % 4 == 1) o["select"] = "all";
        if (i == 14) o["select"] = "substring:nowhere";  // selects nothing: recorded as skipped
        out += json::serialize(o) + "\n";
    }
    return out;
}

constexpr std::size_t kSamples = 20;

std::string extract_args(const fs::path& dataset, const fs::path& out, const std::string& extra = "",
                         const std::string& layers = "0,3") {
    return fmt::format("extract --model {} --dataset {} --out {} --threads 1 --stages after_layer,after_mlp --layers {} "
                       "--logits selected --logit-lens 3 --batch-tokens 24 --on-empty skip {}",
                       shell_quote(model()), shell_quote(dataset.string()), shell_quote(out.string()), layers, extra);
}

// Every file of a directory (recursively) by relative name, with its bytes.
std::map<std::string, std::string> files_of(const fs::path& dir) {
    std::map<std::string, std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file()) out[e.path().lexically_relative(dir).generic_string()] = read_all(e.path());
    return out;
}

// The names of the files that differ between two directories ("" when none).
std::string differing_files(const fs::path& a, const fs::path& b) {
    const auto fa = files_of(a), fb = files_of(b);
    std::string out;
    for (const auto& [name, bytes] : fa)
        if (!fb.contains(name) || fb.at(name) != bytes) out += name + " ";
    for (const auto& [name, bytes] : fb)
        if (!fa.contains(name)) out += name + "(only in " + b.string() + ") ";
    return out;
}

std::vector<json::object> jsonl(const fs::path& file) {
    std::vector<json::object> out;
    std::istringstream in(read_all(file));
    for (std::string line; std::getline(in, line);) out.push_back(json::parse(line).as_object());
    return out;
}

json::object manifest_of(const fs::path& dir) { return json::parse(read_all(dir / "manifest.json")).as_object(); }

struct Fixture {
    TempDir tmp;
    fs::path dataset = tmp.path() / "d.jsonl";
    fs::path full = tmp.path() / "full";  // where the unsharded run and every merge go
    fs::path reference = tmp.path() / "reference";
    Fixture() {
        write_all(dataset, dataset_text());
        const CommandResult r = ember_in(tmp.path(), extract_args(dataset, full));
        REQUIRE_MESSAGE(r.exit_code == 0, r.output);
        fs::rename(full, reference);  // a sealed directory moves as it is
    }
    fs::path shard_dir(std::size_t k, std::size_t n) const { return tmp.path() / fmt::format("n{}", n) / std::to_string(k); }
    void run_shard(std::size_t k, std::size_t n, const std::string& extra = "") const {
        const CommandResult r =
            ember_in(tmp.path(), extract_args(dataset, shard_dir(k, n), fmt::format("--shard {}/{} {}", k, n, extra)));
        REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    }
};

std::string merge_args(const std::vector<fs::path>& shards, const fs::path& out, const std::string& extra = "") {
    std::string args = "merge";
    for (const fs::path& s : shards) args += fmt::format(" {}", shell_quote(s.string()));
    return fmt::format("{} --out {} {}", args, shell_quote(out.string()), extra);
}

}  // namespace

TEST_CASE("smoke: for N = 1..7 every sample is in exactly one shard and the merged shards are the unsharded run") {
    Fixture f;
    const auto ref_samples = jsonl(f.reference / "samples.jsonl");
    REQUIRE(ref_samples.size() == kSamples);
    const json::object ref_manifest = manifest_of(f.reference);
    REQUIRE(ref_manifest.at("dataset").at("skipped") == 1);
    REQUIRE_FALSE(ref_manifest.contains("shard"));

    for (std::size_t n = 1; n <= 7; ++n) {
        CAPTURE(n);
        std::vector<fs::path> shards;
        std::multiset<std::int64_t> seen;
        std::size_t next = 0;  // the first sample of the next shard: shards are contiguous, in order
        std::size_t batches = 0;
        for (std::size_t k = 0; k < n; ++k) {
            f.run_shard(k, n);
            const fs::path dir = f.shard_dir(k, n);
            shards.push_back(dir);
            const json::object m = manifest_of(dir);
            const json::object& shard = m.at("shard").as_object();
            // Shard k of the unsharded run's B batches: [floor(k*B/n), floor((k+1)*B/n)).
            batches = static_cast<std::size_t>(shard.at("dataset_batches").as_int64());
            CHECK(shard.at("batches") == json::array{batches * k / n, batches * (k + 1) / n});
            CHECK(shard.at("index") == k);
            CHECK(shard.at("count") == n);
            CHECK(shard.at("dataset_samples") == kSamples);
            CHECK(m.at("dataset").at("sha256") == ref_manifest.at("dataset").at("sha256"));
            CHECK(m.at("config").at("dataset").at("shard") == json::object{{"index", k}, {"count", n}});
            CHECK(shard.at("run_hash") == manifest_of(shards.front()).at("shard").at("run_hash"));
            // Its samples: the range its record names, right after the shard before, as the unsharded run wrote them.
            const json::array& range = shard.at("samples").as_array();
            REQUIRE(range.at(0) == next);
            const std::size_t end = static_cast<std::size_t>(range.at(1).as_int64());
            const auto samples = jsonl(dir / "samples.jsonl");
            REQUIRE(samples.size() == end - next);
            for (std::size_t i = 0; i < samples.size(); ++i) {
                CHECK(samples[i].at("index") == next + i);
                CHECK(json::serialize(samples[i]) == json::serialize(ref_samples[next + i]));
                seen.insert(samples[i].at("index").as_int64());
            }
            next = end;
        }
        CHECK(next == kSamples);
        CHECK(batches >= 7);  // B >= N: no shard here is empty
        std::multiset<std::int64_t> all;
        for (std::size_t i = 0; i < kSamples; ++i) all.insert(static_cast<std::int64_t>(i));
        CHECK(seen == all);  // each sample once

        // Merged in any order: the unsharded directory, byte for byte, manifest included.
        std::vector<fs::path> reversed(shards.rbegin(), shards.rend());
        const CommandResult m = ember_in(f.tmp.path(), merge_args(reversed, f.full, "--overwrite"));
        REQUIRE_MESSAGE(m.exit_code == 0, m.output);
        CHECK_MESSAGE(differing_files(f.full, f.reference).empty(), differing_files(f.full, f.reference));
        const CommandResult v = ember_in(f.tmp.path(), "verify " + shell_quote(f.full.string()));
        CHECK_MESSAGE(v.exit_code == 0, v.output);
    }
}

TEST_CASE("smoke: ember merge refuses shards of different runs, missing, repeated, unsealed and unsharded ones") {
    Fixture f;
    f.run_shard(0, 2);
    f.run_shard(1, 2);
    const fs::path a = f.shard_dir(0, 2), b = f.shard_dir(1, 2);
    const fs::path out = f.tmp.path() / "merged";
    const auto refused = [&](const std::vector<fs::path>& shards, const std::string& message) {
        const CommandResult r = ember_in(f.tmp.path(), merge_args(shards, out));
        CHECK(r.exit_code == 1);
        CHECK_MESSAGE(r.output == "error: " + message + "\n", r.output);
        CHECK_FALSE(fs::exists(out));  // nothing written
    };

    SUBCASE("another selection of layers") {
        const fs::path other = f.tmp.path() / "other";
        const CommandResult r = ember_in(f.tmp.path(), extract_args(f.dataset, other, "--shard 1/2", "1"));
        REQUIRE_MESSAGE(r.exit_code == 0, r.output);
        refused({a, other}, fmt::format("ember merge: {} and {} are shards of different runs: tensor_contract.layers is "
                                        "[0,3] in {} and [1] in {}",
                                        a.string(), other.string(), a.string(), other.string()));
    }
    SUBCASE("another number of shards") {
        f.run_shard(1, 3);
        refused({a, f.shard_dir(1, 3)},
                fmt::format("ember merge: {} and {} are shards of different runs: shard.count is 2 in {} and 3 in {}",
                            a.string(), f.shard_dir(1, 3).string(), a.string(), f.shard_dir(1, 3).string()));
    }
    SUBCASE("another dataset") {
        const fs::path other_data = f.tmp.path() / "e.jsonl";
        write_all(other_data, dataset_text() + "{\"text\": \"one more\"}\n");
        const fs::path other = f.tmp.path() / "other";
        REQUIRE(ember_in(f.tmp.path(), extract_args(other_data, other, "--shard 1/2")).exit_code == 0);
        refused({a, other}, fmt::format("ember merge: {} and {} are shards of different runs: dataset.path is \"{}\" in "
                                        "{} and \"{}\" in {}",
                                        a.string(), other.string(), f.dataset.string(), a.string(),
                                        other_data.string(), other.string()));
    }
    SUBCASE("a missing shard") {
        f.run_shard(0, 3);
        f.run_shard(2, 3);
        refused({f.shard_dir(2, 3), f.shard_dir(0, 3)},
                "ember merge: shard 1 of 3 is missing (given: 0, 2); the merge needs shards 0 to 2");
        refused({a}, "ember merge: shard 1 of 2 is missing (given: 0); the merge needs shards 0 to 1");
    }
    SUBCASE("a shard given twice") {
        const fs::path copy = f.tmp.path() / "copy";
        fs::copy(a, copy, fs::copy_options::recursive);
        refused({a, copy, b}, fmt::format("ember merge: {} and {} are both shard 0 of 2", a.string(), copy.string()));
    }
    SUBCASE("an unfinished shard") {
        fs::remove(b / "manifest.json");
        refused({a, b}, fmt::format("ember merge: {}: no manifest.json: the shard is unfinished (run it again: it "
                                    "resumes) or this is not a run directory",
                                    b.string()));
    }
    SUBCASE("a changed shard") {
        write_all(b / "rows.jsonl", read_all(b / "rows.jsonl") + "\n");
        const CommandResult r = ember_in(f.tmp.path(), merge_args({a, b}, out));
        CHECK(r.exit_code == 1);
        CHECK_MESSAGE(r.output.starts_with(fmt::format("error: ember merge: {}: the shard does not verify: rows.jsonl: ",
                                                       b.string())),
                      r.output);
        CHECK_FALSE(fs::exists(out));
    }
    SUBCASE("an unsharded run") {
        refused({f.reference}, fmt::format("ember merge: {}: not a shard: its manifest has no \"shard\" record (an "
                                           "unsharded dataset run is already whole)",
                                           f.reference.string()));
    }
    SUBCASE("an output that is a shard") {
        const CommandResult r = ember_in(f.tmp.path(), merge_args({a, b}, b));
        CHECK(r.exit_code == 1);
        CHECK(r.output == fmt::format("error: ember merge: --out {} is one of the shards\n", b.string()));
    }
    SUBCASE("a bad --shard") {
        const CommandResult r = ember_in(f.tmp.path(), extract_args(f.dataset, out, "--shard 2/2"));
        CHECK(r.exit_code == 2);
        CHECK(r.output == "error: ember extract: --shard 2/2 must be K/N with 0 <= K < N <= 100000 (K counts from 0)\n");
    }
}

TEST_CASE("smoke: ember sweep does a [dataset] shards = N config as N shard runs and merges them, and --slurm merges in the final job") {
    Fixture f;
    const fs::path config = f.tmp.path() / "ds.toml";
    write_all(config, fmt::format("[model]\npath = '{}'\nthreads = 1\n[dataset]\npath = 'd.jsonl'\nselect = 'last'\n"
                                  "batch_tokens = 24\non_empty = 'skip'\nshards = 3\n[output]\ndir = 'full'\n"
                                  "stages = ['after_layer', 'after_mlp']\nlayers = [0, 3]\nlogits = 'selected'\n"
                                  "logit_lens = 3\n",
                                  model()));
    // The config run whole (shards says how a sweep splits it) is the reference here.
    fs::remove_all(f.reference);
    const CommandResult whole = ember_in(f.tmp.path(), "extract ds.toml");
    REQUIRE_MESSAGE(whole.exit_code == 0, whole.output);
    fs::rename(f.full, f.reference);

    const CommandResult list = ember_in(f.tmp.path(), "sweep --list ds.toml");
    REQUIRE_MESSAGE(list.exit_code == 0, list.output);
    for (std::size_t k = 0; k < 3; ++k) {
        CHECK_MESSAGE(list.output.find(fmt::format("shard-{}-of-3  -> {}", k, (f.full.string() + fmt::format(".shard-{}-of-3", k)))) !=
                          std::string::npos,
                      list.output);
    }

    const CommandResult sweep = ember_in(f.tmp.path(), "sweep ds.toml");
    REQUIRE_MESSAGE(sweep.exit_code == 0, sweep.output);
    CHECK_MESSAGE(sweep.output.find("ember sweep: merged 3 shards (20 samples, ") !=
                      std::string::npos,
                  sweep.output);
    CHECK_MESSAGE(differing_files(f.full, f.reference).empty(), differing_files(f.full, f.reference));

    // Again: every shard and the merge are current, nothing runs.
    const CommandResult again = ember_in(f.tmp.path(), "sweep ds.toml");
    REQUIRE_MESSAGE(again.exit_code == 0, again.output);
    CHECK_MESSAGE(again.output.find("3 runs: 0 ok, 0 failed, 3 skipped") != std::string::npos, again.output);
    CHECK_MESSAGE(again.output.find("holds the merged shards already") != std::string::npos, again.output);

    const CommandResult slurm = ember_in(f.tmp.path(), "sweep --slurm --slurm-dir slurm ds.toml");
    REQUIRE_MESSAGE(slurm.exit_code == 0, slurm.output);
    const std::string array = read_all(f.tmp.path() / "slurm" / "sweep.sbatch");
    CHECK(array.find("#SBATCH --array=0-2\n") != std::string::npos);
    const std::string final_job = read_all(f.tmp.path() / "slurm" / "summary.sbatch");
    const std::string merge = fmt::format("'{}' merge --overwrite '{}.shard-0-of-3' '{}.shard-1-of-3' '{}.shard-2-of-3' "
                                          "--out '{}' || exit 1\n",
                                          EMBER_BINARY, f.full.string(), f.full.string(), f.full.string(), f.full.string());
    CHECK_MESSAGE(final_job.find(merge) != std::string::npos, final_job);
    CHECK(final_job.find(merge) < final_job.find("--collect"));
}

}  // namespace ember::test
