// Rung: smoke (a property of the compiled code, not of numbers).
//
// The disabled-path gate. With no experiment, the family code runs as its DisabledHooks
// instantiation, whose hook methods are empty and always inlined: the optimized code
// must hold no hook dispatch at all. This suite reads the machine code of each family:
//
// - The family sources are compiled a second time exactly as ember_models compiles them
//   plus -g (target disabled_path_gate_objects), so that `objdump -d -l --inlines` maps
//   every instruction to its source line, through every inlined frame. GCC's -g does not
//   change the code it generates; the last test case checks that the inspected functions
//   are instruction for instruction the ones linked into build/app/ember.
// - Hook sites are the lines of a family source that call `hooks.STAGE(`, for every
//   tensor stage of ember/stages.h (attention_pattern, head_outputs and mlp_activation
//   included); `hooks.wants(` is not one: DisabledHooks never calls it (pattern_buffer is
//   `if constexpr`), and a call of it would be a call into ActiveHooks, which is checked.
// - In every DisabledHooks function, no instruction comes from a hook site and no call
//   goes to anything of ActiveHooks or the experiment runner.
// - The same check run on the ActiveHooks instantiation finds a call at every hook site,
//   so the gate fails if a hook call is ever compiled into the disabled path.
// Prefill and decode share one forward function per instantiation (decode is one row),
// so the decode loop is covered by the same inspection. What that loop calls through the
// backend interface differs by route: the last test case checks that no function of the
// fast route's backend and kernels (namespace ember::kernels::fast, as linked into
// build/app/ember) calls into hooks or experiments, so a DisabledHooks decode on the
// fast route is free of them too.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ember/stages.h"
#include "support/fixtures.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;

// Every tensor stage of the stage table.
std::vector<std::string> tensor_stages() {
    std::vector<std::string> out;
    for (const ember_stage_info& s : ember_stage_table)
        // sae_features is fired by the SAE splicer (engine/features), never by family code
        if (s.kind != EMBER_STAGE_KIND_LIFECYCLE && s.id != EMBER_STAGE_SAE_FEATURES) out.push_back(s.name);
    return out;
}
constexpr const char* kFamilies[] = {"llama", "qwen3", "gemma4"};

// The source (and object) holding a family's forward pass: Llama and Qwen3 share one
// decoder (engine/models/llama_decoder.cpp), their own files only configure it.
std::string forward_source(const std::string& family) {
    return family == "llama" || family == "qwen3" ? "llama_decoder" : family;
}

struct SourceLine {
    std::string file;
    int line = 0;
};

struct Instruction {
    std::string text;                // "call   *0x10(%rax)"
    std::string relocation;          // the symbol an unlinked object refers to, if any
    std::vector<SourceLine> origin;  // innermost first, then each "inlined by" frame
    bool is_call() const { return text.rfind("call", 0) == 0; }
};

struct Function {
    std::string name;
    std::vector<Instruction> code;
};

std::vector<Function> disassemble(const fs::path& binary, bool with_lines) {
    const std::string flags = with_lines ? "-d -r -l --inlines" : "-d";
    const auto dump = run_command(fmt::format("objdump {} --demangle --no-show-raw-insn {}", flags,
                                              shell_quote(binary.string())));
    REQUIRE_MESSAGE(dump.exit_code == 0, "objdump (binutils) failed on " << binary.string());
    static const std::regex function_start(R"(^[0-9a-f]+ <(.*)>:$)");
    static const std::regex relocation(R"(^\s+[0-9a-f]+: R_\S+\s+(.*)$)");
    static const std::regex instruction(R"(^\s+[0-9a-f]+:\t(.*)$)");
    static const std::regex location(R"(^(?:inlined by )?(\S+):(\d+)(?: \(.*\))?$)");
    std::vector<Function> functions;
    std::vector<SourceLine> origin;
    std::istringstream in(dump.output);
    std::string line;
    std::smatch m;
    while (std::getline(in, line)) {
        if (std::regex_match(line, m, function_start)) {
            functions.push_back({m[1], {}});
            origin.clear();
        } else if (functions.empty()) {
            continue;
        } else if (std::regex_match(line, m, relocation)) {
            if (!functions.back().code.empty()) functions.back().code.back().relocation = m[1];
        } else if (std::regex_match(line, m, instruction)) {
            functions.back().code.push_back({m[1], "", origin});
        } else if (std::regex_match(line, m, location)) {
            if (line.rfind("inlined by ", 0) != 0) origin.clear();
            origin.push_back({m[1], std::stoi(m[2])});
        }
    }
    return functions;
}

// The lines of `source` that call a hook: line number -> stage.
std::map<int, std::string> hook_sites(const fs::path& source) {
    std::ifstream in(source);
    REQUIRE_MESSAGE(in, "cannot read " << source.string());
    static const std::regex call(R"(\bhooks\.(\w+)\()");
    const auto stages = tensor_stages();
    std::map<int, std::string> sites;
    std::string line;
    std::smatch m;
    for (int n = 1; std::getline(in, line); ++n)
        if (std::regex_search(line, m, call) && std::find(stages.begin(), stages.end(), m[1]) != stages.end())
            sites[n] = m[1];
    return sites;
}

bool from_hook_site(const Instruction& i, const fs::path& source, const std::map<int, std::string>& sites) {
    return std::any_of(i.origin.begin(), i.origin.end(), [&](const SourceLine& s) {
        return fs::path(s.file).filename() == source.filename() && sites.count(s.line) > 0;
    });
}

bool calls_into_experiments(const Instruction& i) {
    if (!i.is_call() && i.text.rfind("jmp", 0) != 0) return false;
    const std::string target = i.text + " " + i.relocation;
    for (const char* name : {"ActiveHooks", "ExperimentRunner", "experiments::"})
        if (target.find(name) != std::string::npos) return true;
    return false;
}

std::vector<Function> matching(const std::vector<Function>& all, const std::string& needle) {
    std::vector<Function> out;
    for (const auto& f : all)
        if (f.name.find(needle) != std::string::npos) out.push_back(f);
    return out;
}

fs::path gate_object(const std::string& family) {
    std::stringstream list(EMBER_GATE_OBJECTS);  // '|'-separated
    std::string path;
    while (std::getline(list, path, '|'))
        if (fs::path(path).filename() == forward_source(family) + ".cpp.o") return path;
    FAIL("no gate object for " << family << " in " << EMBER_GATE_OBJECTS);
    return {};
}

fs::path family_source(const std::string& family) {
    return fs::path(EMBER_SOURCE_DIR) / "engine" / "models" / (forward_source(family) + ".cpp");
}

// An instruction with addresses, offsets and symbol names left out: what stays equal
// between an object file and the linked executable.
std::string normalized(const std::string& text) {
    static const std::regex annotation(R"(\s*(<.*|#.*)$)");  // "<symbol+0x10>", "# 1234 <symbol>"
    static const std::regex address(R"(^[0-9a-f]+$)");        // a direct branch target
    static const std::regex number(R"(\b(0x[0-9a-f]+|[0-9]+)\b)");
    const std::string s = std::regex_replace(text, annotation, "");
    const auto space = s.find_first_of(" \t");
    if (space == std::string::npos) return s;
    const std::string mnemonic = s.substr(0, space);
    std::string operands = s.substr(s.find_first_not_of(" \t", space));
    operands = std::regex_match(operands, address) ? "N" : std::regex_replace(operands, number, "N");
    return mnemonic + " " + operands;
}

std::vector<std::string> normalized_code(const Function& f) {
    std::vector<std::string> out;
    for (const auto& i : f.code) out.push_back(normalized(i.text));
    // Alignment padding after the last instruction depends on what the linker placed next.
    const auto padding = [](const std::string& s) {
        return s.rfind("nop", 0) == 0 || s.rfind("cs nop", 0) == 0 || s.rfind("data16", 0) == 0 ||
               s.rfind("xchg   %ax,%ax", 0) == 0 || s == "int3";
    };
    while (!out.empty() && padding(out.back())) out.pop_back();
    return out;
}

}  // namespace

TEST_CASE("every family calls each tensor stage's hook at its own line") {
    const auto stages_of_table = tensor_stages();
    CHECK(stages_of_table.size() == 11);  // mlp_input (1.5) included
    for (const std::string family : kFamilies) {
        CAPTURE(family);
        const auto sites = hook_sites(family_source(family));
        std::multiset<std::string> stages;
        for (const auto& [line, stage] : sites) stages.insert(stage);
        for (const auto& stage : stages_of_table) CHECK_MESSAGE(stages.count(stage) == 1, stage);
    }
}

TEST_CASE("the DisabledHooks instantiation of every family holds no hook dispatch") {
    for (const std::string family : kFamilies) {
        CAPTURE(family);
        const auto source = family_source(family);
        const auto sites = hook_sites(source);
        const auto disabled = matching(disassemble(gate_object(family), true), "ember::hooks::DisabledHooks");
        REQUIRE_FALSE(disabled.empty());

        std::size_t instructions = 0, at_hook_sites = 0, into_experiments = 0;
        for (const auto& f : disabled) {
            instructions += f.code.size();
            for (const auto& i : f.code) {
                if (from_hook_site(i, source, sites)) {
                    ++at_hook_sites;
                    std::string lines;
                    for (const auto& o : i.origin) lines += " " + fs::path(o.file).filename().string() + ":" + std::to_string(o.line);
                    MESSAGE(f.name << ": " << i.text << " comes from a hook site (" << lines << ")");
                }
                if (calls_into_experiments(i)) ++into_experiments;
            }
        }
        // The whole forward pass is there (not only a jump to it elsewhere)...
        CHECK(instructions > 500);
        // ...and nothing of it comes from a hook site or reaches the experiments.
        CHECK(at_hook_sites == 0);
        CHECK(into_experiments == 0);
        MESSAGE(family << ": " << disabled.size() << " DisabledHooks functions, " << instructions << " instructions, "
                       << at_hook_sites << " from the " << sites.size() << " hook sites, " << into_experiments
                       << " calls into the experiments");
    }
}

TEST_CASE("the same inspection finds the dispatch in the ActiveHooks instantiation (the gate can fail)") {
    for (const std::string family : kFamilies) {
        CAPTURE(family);
        const auto source = family_source(family);
        const auto sites = hook_sites(source);
        const auto active = matching(disassemble(gate_object(family), true), "forward<ember::hooks::ActiveHooks>");
        REQUIRE_FALSE(active.empty());
        std::map<int, std::size_t> calls_at;
        for (const auto& f : active)
            for (const auto& i : f.code)
                if (i.is_call() && from_hook_site(i, source, sites))
                    for (const auto& s : i.origin) ++calls_at[s.line];
        for (const auto& [line, stage] : sites)
            CHECK_MESSAGE(calls_at[line] >= 1, family << ".cpp:" << line << " (" << stage << ") has no call");
    }
}

#ifndef EMBER_NO_FAST_ROUTE  // a -DEMBER_FAST=OFF build links no fast route
TEST_CASE("the fast route's backend and kernels, as linked into ember, make no call into hooks or experiments") {
    const auto fast = matching(disassemble(EMBER_BINARY, false), "ember::kernels::fast::");
    std::size_t instructions = 0, into_hooks = 0;
    bool has_backend = false, has_kernels = false;
    for (const auto& f : fast) {
        has_backend |= f.name.find("FastBackend::matmul") != std::string::npos;
        has_kernels |= f.name.find("avx512::f16_matmul_rows") != std::string::npos;
        instructions += f.code.size();
        for (const auto& i : f.code) {
            const bool hooks_call = (i.is_call() || i.text.rfind("jmp", 0) == 0) && i.text.find("ember::hooks::") != std::string::npos;
            if (calls_into_experiments(i) || hooks_call) {
                ++into_hooks;
                MESSAGE(f.name << ": " << i.text);
            }
        }
    }
    CHECK(has_backend);  // the inspection sees the backend's methods...
    CHECK(has_kernels);  // ...and the kernels they dispatch to
    CHECK(instructions > 10000);
    CHECK(into_hooks == 0);
    MESSAGE(fast.size() << " fast-route functions, " << instructions << " instructions, " << into_hooks
                        << " calls into hooks or experiments");
}
#endif  // EMBER_NO_FAST_ROUTE

TEST_CASE("the inspected functions are the ones linked into the ember executable") {
    const auto shipped = disassemble(EMBER_BINARY, false);
    for (const std::string family : kFamilies) {
        CAPTURE(family);
        for (const auto& inspected : matching(disassemble(gate_object(family), true), "ember::hooks::DisabledHooks")) {
            CAPTURE(inspected.name);
            const auto same_name = std::find_if(shipped.begin(), shipped.end(),
                                                [&](const Function& f) { return f.name == inspected.name; });
            REQUIRE(same_name != shipped.end());
            CHECK(normalized_code(*same_name) == normalized_code(inspected));
        }
    }
}

}  // namespace ember::test
