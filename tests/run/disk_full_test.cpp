// Rung: smoke (provenance). A full disk, on a small tmpfs the test mounts (skipped, loudly
// and with the reason printed, where mount is impossible): a run whose extraction, capture,
// trace journal or run.json cannot be written exits 1 and ends with a true run.json
// (outcome "failed", the error, what it was doing), or, when even that cannot be written,
// with no run.json and a clear message on stderr; no temporary file is left, and no
// manifest.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <boost/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "ember_run.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

const fs::path kModel = fixture_path("models/stories260K.gguf");

// A tmpfs of `bytes` mounted at `at` for the test's lifetime.
class SmallDisk {
public:
    SmallDisk(const fs::path& at, std::size_t bytes) : at_(at) {
        fs::create_directories(at_);
        const std::string options = fmt::format("size={}", bytes);
        if (::mount("tmpfs", at_.c_str(), "tmpfs", 0, options.c_str()) == 0) {
            mounted_ = true;
        } else {
            reason_ = std::strerror(errno);
        }
    }
    ~SmallDisk() {
        if (mounted_) ::umount2(at_.c_str(), MNT_DETACH);
    }
    bool mounted() const { return mounted_; }
    const std::string& reason() const { return reason_; }

    // Fills the disk so that about `leave` bytes stay free.
    void fill_leaving(std::size_t leave) const {
        const fs::path filler = at_ / "filler";
        std::FILE* f = std::fopen(filler.c_str(), "wb");
        REQUIRE(f != nullptr);
        const std::vector<char> chunk(4096, 'x');
        while (std::fwrite(chunk.data(), 1, chunk.size(), f) == chunk.size() && std::fflush(f) == 0) {
        }
        std::fclose(f);
        const auto size = fs::file_size(filler);
        fs::resize_file(filler, size > leave ? size - leave : 0);
    }

private:
    fs::path at_;
    bool mounted_ = false;
    std::string reason_;
};

// Names under `dir` that are temporaries.
std::vector<std::string> temporaries(const fs::path& dir) {
    std::vector<std::string> out;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it); it.increment(ec))
        if (it->path().filename().string().find(".tmp.") != std::string::npos) out.push_back(it->path().string());
    return out;
}

// A prompt of about 100 tokens, so that arrays and journals are large next to the disk.
std::string long_prompt() {
    std::string p;
    for (int i = 0; i < 12; ++i) p += "Once upon a time, there was a little girl. ";
    return p;
}

struct Outcome {
    EmberRun run;
    fs::path out;
};

// Runs `more` (sections appended to the config) with the output directory on a 512 KiB
// tmpfs filled to `leave` free bytes. Returns nullopt (after saying why) when no tmpfs.
std::optional<Outcome> run_on_full_disk(const TempDir& dir, const std::string& more, std::size_t leave, int max_tokens = 2) {
    SmallDisk disk(dir.path() / "disk", 512 * 1024);
    if (!disk.mounted()) {
        const std::string why = fmt::format("SKIPPED: disk-full test: cannot mount a tmpfs ({}); run as root", disk.reason());
        fmt::print(stderr, "{}\n", why);
        MESSAGE(why);
        return std::nullopt;
    }
    disk.fill_leaving(leave);
    std::string config = run_config(kModel, long_prompt(), max_tokens, more);
    config.replace(config.find("dir = \"out\""), 11, "dir = \"disk/out\"");
    Outcome o{ember_run(dir, config), dir.path() / "disk" / "out"};
    CHECK(o.run.exit_code == 1);
    CHECK_MESSAGE(temporaries(o.out).empty(), temporaries(o.out).front());
    CHECK(!fs::exists(o.out / "manifest.json"));
    // Keep run.json for the suite's strict JSON check (TempDir), before the disk goes.
    if (fs::exists(o.out / "run.json")) fs::copy_file(o.out / "run.json", dir.path() / "full-disk-run.json");
    o.run.has_report = fs::exists(o.out / "run.json");
    if (o.run.has_report) o.run.report = json::parse(read_text(o.out / "run.json")).as_object();
    return o;
}

void check_failed_during(const Outcome& o, const std::string& stage) {
    REQUIRE_MESSAGE(o.run.has_report, o.run.err);
    CHECK(o.run.report.at("outcome") == "failed");
    CHECK(str(o.run.report.at("failed_during")) == stage);
    CHECK(str(o.run.report.at("error")).find("No space left on device") != std::string::npos);
}

}  // namespace

TEST_CASE("disk full while writing the extraction: run.json says failed during extraction") {
    TempDir dir;
    const auto o = run_on_full_disk(
        dir, "extract = true\nstages = [\"before_layer\", \"after_attention\", \"after_mlp\", \"after_layer\"]\nlogits = \"all\"\n",
        48 * 1024);
    if (!o) return;
    check_failed_during(*o, "extraction");
}

TEST_CASE("disk full while capture writes: run.json says the experiment failed") {
    TempDir dir;
    const auto o = run_on_full_disk(
        dir,
        experiment(builtin_plugin("capture"),
                   "stages = [\"before_layer\", \"after_attention\", \"after_mlp\", \"after_layer\", \"after_logits\"]"),
        48 * 1024);
    if (!o) return;
    REQUIRE_MESSAGE(o->run.has_report, o->run.err);
    CHECK(o->run.report.at("outcome") == "failed");
    CHECK(str(o->run.report.at("error")).find("capture") != std::string::npos);
}

TEST_CASE("disk full while writing the trace journal: run.json says failed during trace") {
    TempDir dir;
    const auto o = run_on_full_disk(dir, "[tracing]\nenabled = true\n", 48 * 1024, 40);
    if (!o) return;
    check_failed_during(*o, "trace");
}

TEST_CASE("disk full for run.json itself: no run.json, stderr says so, exit 1") {
    TempDir dir;
    const auto o = run_on_full_disk(dir, "", 0);
    if (!o) return;
    CHECK(!o->run.has_report);
    CHECK(o->run.err.find("run.json could not be written") != std::string::npos);
    CHECK(o->run.err.find("the run failed during run.json") != std::string::npos);
}

}  // namespace ember::test
