// A fresh directory under the system temp directory, removed with everything in it when
// the test is done. Before it is removed, every JSON file in it (run.json, manifests,
// records, journals) is checked strict (RFC 8259) by strict_json_check.py beside this
// header: the suite's one place for that check, so every JSON file any test made Ember
// write is covered.
#pragma once

#include <doctest/doctest.h>
#include <stdlib.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <system_error>

namespace ember::test {

class TempDir {
public:
    TempDir() {
        std::string pattern = (std::filesystem::temp_directory_path() / "ember-test-XXXXXX").string();
        REQUIRE(::mkdtemp(pattern.data()) != nullptr);
        path_ = pattern;
    }
    ~TempDir() {
        if (std::uncaught_exceptions() == 0) check_strict_json();
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }

private:
    void check_strict_json() const {
        bool any = false;
        std::error_code ec;
        for (auto it = std::filesystem::recursive_directory_iterator(path_, ec); !ec && it != std::filesystem::end(it);
             it.increment(ec)) {
            const auto ext = it->path().extension();
            if (ext == ".json" || ext == ".jsonl") any = true;
        }
        if (!any) return;
        const std::string script = EMBER_STRICT_JSON_CHECK;  // tests/CMakeLists.txt
        const std::string command = "python3 '" + script + "' '" + path_.string() + "' 2>&1";
        std::string output;
        if (std::FILE* pipe = ::popen(command.c_str(), "r")) {
            char buffer[512];
            while (std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
            const int status = ::pclose(pipe);
            if (status != 0) FAIL_CHECK("Ember wrote JSON a strict parser rejects:\n" << output);
        } else {
            FAIL_CHECK("cannot run " << script);
        }
    }

    std::filesystem::path path_;
};

}  // namespace ember::test
