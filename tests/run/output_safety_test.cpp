// Rung: smoke. Every file Ember writes is one it creates (issue 24, "Outputs"): each
// output option given an existing FIFO, symbolic link, directory, socket or character
// device is refused by name (exit 1, the option and the path in the message) and the
// thing is still there, unchanged; AtomicFile itself never writes through a link or
// renames over anything but a regular file. On the code before this suite every command
// below replaced the FIFO and the link with a regular file (and, as root, /dev/null).
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/output_path.hpp"
#include "support/files.hpp"
#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;

// One thing that is not a regular file, standing where an output goes.
struct Target {
    std::string kind;
    fs::path path;
};

// A FIFO, a symbolic link to a file (victim.txt), a directory, a socket and (when this
// process may make one) a character device, each named NAME-KIND + suffix under `dir`.
std::vector<Target> make_targets(const fs::path& dir, const std::string& suffix) {
    write_all(dir / "victim.txt", "\"the user's file\"\n");
    std::vector<Target> out;
    const auto named = [&](const std::string& kind) { return dir / ("target-" + kind + suffix); };
    REQUIRE(::mkfifo(named("fifo").c_str(), 0644) == 0);
    out.push_back({"a FIFO", named("fifo")});
    fs::create_symlink(dir / "victim.txt", named("link"));
    out.push_back({"a symbolic link", named("link")});
    fs::create_directory(named("dir"));
    out.push_back({"a directory", named("dir")});
    const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    const std::string socket_path = named("socket").string();
    if (s >= 0 && socket_path.size() < sizeof address.sun_path) {
        std::copy(socket_path.begin(), socket_path.end(), address.sun_path);
        if (::bind(s, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0)
            out.push_back({"a socket", named("socket")});
    }
    if (s >= 0) ::close(s);
    if (::mknod(named("chr").c_str(), S_IFCHR | 0666, ::makedev(1, 3)) == 0)  // /dev/null's numbers
        out.push_back({"a character device", named("chr")});
    return out;
}

// Whether `t` is still what make_targets made (and the link's file untouched).
void check_intact(const Target& t) {
    struct stat st {};
    REQUIRE_MESSAGE(::lstat(t.path.c_str(), &st) == 0, t.path.string() << " is gone");
    if (t.kind == "a FIFO") CHECK_MESSAGE(S_ISFIFO(st.st_mode), t.path.string() << " was replaced");
    if (t.kind == "a symbolic link") {
        CHECK_MESSAGE(S_ISLNK(st.st_mode), t.path.string() << " was replaced");
        CHECK(read_all(t.path.parent_path() / "victim.txt") == "\"the user's file\"\n");
    }
    if (t.kind == "a directory") {
        CHECK(S_ISDIR(st.st_mode));
        CHECK(fs::is_empty(t.path));
    }
    if (t.kind == "a socket") CHECK_MESSAGE(S_ISSOCK(st.st_mode), t.path.string() << " was replaced");
    if (t.kind == "a character device") CHECK_MESSAGE(S_ISCHR(st.st_mode), t.path.string() << " was replaced");
    // No temporary of the scheme is left beside it.
    for (const auto& entry : fs::directory_iterator(t.path.parent_path()))
        CHECK_MESSAGE(entry.path().filename().string().find(".tmp.") == std::string::npos, entry.path().string());
}

CommandResult ember_in(const fs::path& dir, const std::string& arguments) {
    return run_command(fmt::format("cd {} && env -u EMBER_DEFAULTS XDG_CONFIG_HOME={} {} {} 2>&1",
                                   shell_quote(dir.string()), shell_quote((dir / "xdg").string()),
                                   shell_quote(EMBER_BINARY), arguments));
}

std::string model() { return fixture_path("models/stories260K.gguf").string(); }

std::string run_toml(const std::string& output_dir, const std::string& more = "") {
    return fmt::format("[model]\npath = '{}'\nroute = \"reference\"\nthreads = 1\n[prompt]\ntext = 'Once upon'\n"
                       "[generation]\nmax_tokens = 1\n[output]\ndir = '{}'\n{}",
                       model(), output_dir, more);
}

// Runs `command(target)` for every target kind and checks the refusal: exit 1, the
// option and the path named, the kind said, and the target intact.
void check_refused(const std::string& option, const std::string& suffix,
                   const std::function<CommandResult(const fs::path& dir, const fs::path& target)>& command) {
    TempDir dir;
    for (const Target& t : make_targets(dir.path(), suffix)) {
        CAPTURE(option);
        CAPTURE(t.kind);
        const CommandResult r = command(dir.path(), t.path);
        CHECK(r.exit_code == 1);
        CHECK_MESSAGE(r.output.find(option + " " + t.path.string()) != std::string::npos, r.output);
        CHECK_MESSAGE(r.output.find("exists and is " + t.kind) != std::string::npos, r.output);
        check_intact(t);
    }
}

}  // namespace

TEST_CASE("every output file option refuses a FIFO, a symbolic link, a directory, a socket and a device by name") {
    check_refused("--trace", ".jsonl", [](const fs::path& dir, const fs::path& target) {
        return ember_in(dir, fmt::format("generate --model {} --prompt 'Once upon' --max-tokens 1 --trace {}",
                                         shell_quote(model()), shell_quote(target.string())));
    });
    check_refused("--trace", ".jsonl", [](const fs::path& dir, const fs::path& target) {
        write_all(dir / "run.toml", run_toml("out"));
        return ember_in(dir, fmt::format("run --trace {} run.toml", shell_quote(target.string())));
    });
    check_refused("[tracing] path", ".jsonl", [](const fs::path& dir, const fs::path& target) {
        write_all(dir / "run.toml",
                  run_toml("out", fmt::format("[tracing]\nenabled = true\npath = '{}'\n", target.string())));
        return ember_in(dir, "run run.toml");
    });
    check_refused("--trace", ".jsonl", [](const fs::path& dir, const fs::path& target) {
        return ember_in(dir, fmt::format("extract --model {} --prompt 'Once upon' --out out --trace {}",
                                         shell_quote(model()), shell_quote(target.string())));
    });
    check_refused("OUT", ".json", [](const fs::path& dir, const fs::path& target) {
        const CommandResult journal = ember_in(dir, fmt::format("generate --model {} --prompt 'Once' --max-tokens 1 "
                                                                "--trace journal.jsonl",
                                                                shell_quote(model())));
        REQUIRE(journal.exit_code == 0);
        return ember_in(dir, fmt::format("trace export --chrome journal.jsonl {}", shell_quote(target.string())));
    });
    check_refused("--summary", ".csv", [](const fs::path& dir, const fs::path& target) {
        write_all(dir / "run.toml", run_toml("out"));
        return ember_in(dir, fmt::format("sweep --summary {} run.toml", shell_quote(target.string())));
    });
    check_refused("OUT", ".gguf", [](const fs::path& dir, const fs::path& target) {
        return ember_in(dir, fmt::format("quantize {} {} q8_0", shell_quote(model()), shell_quote(target.string())));
    });
    check_refused("OUT", ".gguf", [](const fs::path& dir, const fs::path& target) {
        return ember_in(dir, fmt::format("synth {} --shape llama-tiny --vocab-from {}", shell_quote(target.string()),
                                         shell_quote(model())));
    });
}

TEST_CASE("every output directory option refuses what is not a directory, and a symbolic link to one") {
    // (A directory is what these options want: the directory kind is left out.)
    const auto not_dir = [](const std::string& option,
                            const std::function<CommandResult(const fs::path&, const fs::path&)>& command) {
        TempDir dir;
        for (const Target& t : make_targets(dir.path(), "")) {
            if (t.kind == "a directory") continue;
            CAPTURE(option);
            CAPTURE(t.kind);
            const CommandResult r = command(dir.path(), t.path);
            CHECK(r.exit_code == 1);
            CHECK_MESSAGE(r.output.find(option + " " + t.path.string()) != std::string::npos, r.output);
            CHECK_MESSAGE(r.output.find("exists and is " + t.kind) != std::string::npos, r.output);
            check_intact(t);
        }
    };
    not_dir("--out", [](const fs::path& dir, const fs::path& target) {
        return ember_in(dir, fmt::format("extract --model {} --prompt 'Once upon' --out {}", shell_quote(model()),
                                         shell_quote(target.string())));
    });
    not_dir("[output] dir", [](const fs::path& dir, const fs::path& target) {
        write_all(dir / "run.toml", run_toml(target.string()));
        return ember_in(dir, "run run.toml");
    });
    not_dir("--out", [](const fs::path& dir, const fs::path& target) {
        fs::create_directory(dir / "shard");
        return ember_in(dir, fmt::format("merge shard --out {}", shell_quote(target.string())));
    });
    not_dir("--slurm-dir", [](const fs::path& dir, const fs::path& target) {
        write_all(dir / "run.toml", run_toml("out"));
        return ember_in(dir, fmt::format("sweep --slurm --slurm-dir {} run.toml", shell_quote(target.string())));
    });

    // A symbolic link to a directory: a run replaced with --overwrite is swapped in by
    // rename, which would replace the link; and the link's directory is not the one named.
    TempDir dir;
    fs::create_directory(dir.path() / "real");
    fs::create_directory_symlink(dir.path() / "real", dir.path() / "linked");
    const CommandResult r = ember_in(dir.path(), fmt::format("extract --model {} --prompt 'Once upon' --out linked",
                                                             shell_quote(model())));
    CHECK(r.exit_code == 1);
    CHECK_MESSAGE(r.output.find("--out " + (dir.path() / "linked").string() + ": exists and is a symbolic link") !=
                      std::string::npos,
                  r.output);
    CHECK(fs::is_symlink(dir.path() / "linked"));
    CHECK(fs::is_empty(dir.path() / "real"));
}

TEST_CASE("--trace /dev/null is refused and /dev/null stays a character device") {
    TempDir dir;
    const CommandResult r = ember_in(dir.path(), fmt::format("generate --model {} --prompt 'Once' --max-tokens 1 "
                                                             "--trace /dev/null",
                                                             shell_quote(model())));
    CHECK(r.exit_code == 1);
    CHECK_MESSAGE(r.output.find("--trace /dev/null: exists and is a character device") != std::string::npos, r.output);
    struct stat st {};
    REQUIRE(::lstat("/dev/null", &st) == 0);
    CHECK(S_ISCHR(st.st_mode));
}

TEST_CASE("quantize and synth refuse to write over their own input") {
    TempDir dir;
    fs::copy_file(model(), dir.path() / "m.gguf");
    const std::string before = read_all(dir.path() / "m.gguf");
    const CommandResult q = ember_in(dir.path(), "quantize m.gguf ./m.gguf q8_0");
    CHECK(q.exit_code == 1);
    CHECK_MESSAGE(q.output.find("the output would overwrite the input") != std::string::npos, q.output);
    const CommandResult s = ember_in(dir.path(), "synth m.gguf --shape llama-tiny --vocab-from ./m.gguf");
    CHECK(s.exit_code == 1);
    CHECK_MESSAGE(s.output.find("is the --vocab-from model") != std::string::npos, s.output);
    CHECK(read_all(dir.path() / "m.gguf") == before);
}

TEST_CASE("AtomicFile never writes through a link at its temporary name nor renames over what is not a file") {
    TempDir dir;
    const fs::path out = dir.path() / "out.txt";
    write_all(dir.path() / "victim.txt", "\"the user's file\"\n");

    // A link planted at the temporary's name: the link is removed, never written through.
    const fs::path temp = out.string() + ".tmp." + std::to_string(::getpid());
    fs::create_symlink(dir.path() / "victim.txt", temp);
    write_file_atomically(out, "ember's bytes\n");
    CHECK(read_all(out) == "ember's bytes\n");
    CHECK(read_all(dir.path() / "victim.txt") == "\"the user's file\"\n");

    // Something made at the name while the file was being written: refused at rename.
    {
        const fs::path late = dir.path() / "late.txt";
        AtomicFile file(late);
        file.write("ember's bytes\n");
        REQUIRE(::mkfifo(late.c_str(), 0644) == 0);
        CHECK_THROWS_WITH_AS(file.commit(), doctest::Contains("exists and is a FIFO"), Error);
        struct stat st {};
        REQUIRE(::lstat(late.c_str(), &st) == 0);
        CHECK(S_ISFIFO(st.st_mode));
        CHECK_FALSE(fs::exists(file.temporary_path()));
    }
    {
        const fs::path late = dir.path() / "late-link.txt";
        AtomicFile file(late);
        fs::create_symlink(dir.path() / "victim.txt", late);
        CHECK_THROWS_WITH_AS(file.commit(), doctest::Contains("exists and is a symbolic link"), Error);
        CHECK(fs::is_symlink(late));
        CHECK(read_all(dir.path() / "victim.txt") == "\"the user's file\"\n");
    }
    // At construction already.
    fs::create_symlink(dir.path() / "victim.txt", dir.path() / "link.txt");
    CHECK_THROWS_WITH_AS(AtomicFile(dir.path() / "link.txt"), doctest::Contains("exists and is a symbolic link"), Error);
    // A regular file is replaced (the commands that do so say it).
    write_file_atomically(dir.path() / "victim.txt", "replaced\n");
    CHECK(read_all(dir.path() / "victim.txt") == "replaced\n");
}

TEST_CASE("check_output_file and is_within: the rules in one place") {
    TempDir dir;
    write_all(dir.path() / "file", "x");
    CHECK_NOTHROW(check_output_file("--x", dir.path() / "nothing"));
    CHECK_NOTHROW(check_output_file("--x", dir.path() / "file"));
    const std::string exists = "--x " + (dir.path() / "file").string() + ": exists";
    CHECK_THROWS_WITH_AS(check_output_file("--x", dir.path() / "file", ExistingFile::refuse),
                         doctest::Contains(exists.c_str()), Error);
    CHECK_THROWS_WITH_AS(check_output_file("--x", dir.path() / "file" / "below"),
                         doctest::Contains("cannot examine"), Error);
    fs::create_directories(dir.path() / "a" / "b");
    fs::create_directory_symlink(dir.path() / "a", dir.path() / "alias");
    CHECK(is_within(dir.path() / "a" / "b", dir.path() / "a"));
    CHECK(is_within(dir.path() / "alias" / "b" / "not-yet", dir.path() / "a"));
    CHECK(is_within(dir.path() / "a", dir.path() / "alias"));
    CHECK_FALSE(is_within(dir.path() / "ab", dir.path() / "a"));
    CHECK_FALSE(is_within(dir.path(), dir.path() / "a"));
}

}  // namespace ember::test
