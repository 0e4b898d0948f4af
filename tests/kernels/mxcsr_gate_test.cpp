// Rung: below the ladder (a gate on the compiled kernels, like disabled_path_test).
//
// Without AVX512_BF16, vdpbf16ps is emulated by plain FMAs run with MXCSR's FTZ | DAZ
// set (FlushSubnormalsMode, float_tiles.hpp); the folds and ggml_vec_dot_bf16's double
// tails must run in the caller's MXCSR. GCC does not order floating-point arithmetic
// against ldmxcsr, so the kernels pin their accumulators with empty asms, and this gate
// reads the machine code linked into build/app/ember to check that the pins did their
// work: in every fast-route function that executes vldmxcsr, a walk of its control flow
// (each vldmxcsr switching caller <-> FTZ|DAZ) finds
//   - every FMA reachable only in the FTZ|DAZ mode,
//   - every other floating-point arithmetic (adds, multiplies, extracts of folds,
//     conversions), every call (but memcpy's) and every return only in the caller's.
// The BF16 emulations of both variants must be among the functions found, and a
// listing with an FMA moved past the restore is refused, so the gate cannot pass empty.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/fixtures.hpp"

namespace ember::test {
namespace {

struct Instruction {
    std::uint64_t address = 0;
    std::string mnemonic;
    std::string operands;
};

struct Function {
    std::string name;
    std::vector<Instruction> code;
};

std::vector<Function> parse_listing(const std::string& listing) {
    static const std::regex function_start(R"(^[0-9a-f]+ <(.*)>:$)");
    static const std::regex instruction(R"(^\s+([0-9a-f]+):\s+(\S+)\s*(.*)$)");
    std::vector<Function> functions;
    std::istringstream in(listing);
    std::string line;
    std::smatch m;
    while (std::getline(in, line)) {
        if (std::regex_match(line, m, function_start)) functions.push_back({m[1], {}});
        else if (!functions.empty() && std::regex_match(line, m, instruction))
            functions.back().code.push_back({std::stoull(m[1], nullptr, 16), m[2], m[3]});
    }
    return functions;
}

enum class Mode { caller, flush };

// What the walk found wrong in one function (empty: nothing).
std::vector<std::string> mxcsr_violations(const Function& f) {
    static const std::regex fma(R"(^vfn?m(add|sub)\w*$)");
    static const std::regex other_float(R"(^v(add|sub|mul|div|hadd|extractf|cvt|reduce|round|sqrt)\w*$)");
    static const std::regex direct_target(R"(^([0-9a-f]+) <)");
    std::map<std::uint64_t, std::size_t> index;
    for (std::size_t i = 0; i < f.code.size(); ++i) index[f.code[i].address] = i;
    std::vector<std::set<Mode>> seen(f.code.size());
    std::vector<std::pair<std::size_t, Mode>> work = {{0, Mode::caller}};
    while (!work.empty()) {
        const auto [i, mode] = work.back();
        work.pop_back();
        if (i >= f.code.size() || !seen[i].insert(mode).second) continue;
        const Instruction& in = f.code[i];
        const Mode next = in.mnemonic == "vldmxcsr" ? (mode == Mode::caller ? Mode::flush : Mode::caller) : mode;
        if (in.mnemonic.rfind("ret", 0) == 0) continue;
        std::smatch m;
        if (in.mnemonic[0] == 'j' && std::regex_search(in.operands, m, direct_target)) {
            const auto target = index.find(std::stoull(m[1], nullptr, 16));
            if (target != index.end()) work.push_back({target->second, next});
        }
        if (in.mnemonic != "jmp") work.push_back({i + 1, next});
    }
    std::vector<std::string> out;
    for (std::size_t i = 0; i < f.code.size(); ++i) {
        const Instruction& in = f.code[i];
        const std::string where = fmt::format("{:x} {} {}", in.address, in.mnemonic, in.operands);
        const bool is_call = in.mnemonic.rfind("call", 0) == 0 && in.operands.find("<memcpy") == std::string::npos;
        if (std::regex_match(in.mnemonic, fma) && seen[i].count(Mode::caller)) out.push_back("FMA in the caller's mode: " + where);
        if ((std::regex_match(in.mnemonic, other_float) || is_call || in.mnemonic.rfind("ret", 0) == 0) &&
            seen[i].count(Mode::flush)) {
            out.push_back("in FTZ|DAZ mode: " + where);
        }
    }
    return out;
}

bool switches_mxcsr(const Function& f) {
    for (const Instruction& in : f.code)
        if (in.mnemonic == "vldmxcsr") return true;
    return false;
}

}  // namespace

TEST_CASE("mxcsr gate: the BF16 emulation's FMAs run in FTZ|DAZ mode, its folds in the caller's") {
    const auto dump = run_command(fmt::format("objdump -d --demangle --no-show-raw-insn {}", shell_quote(EMBER_BINARY)));
    REQUIRE_MESSAGE(dump.exit_code == 0, "objdump (binutils) failed on " << EMBER_BINARY);
    const std::vector<Function> functions = parse_listing(dump.output);
    bool avx512_emulation = false, avx2_emulation = false;
    int checked = 0;
    for (const Function& f : functions) {
        if (f.name.find("ember::kernels::fast::") == std::string::npos || !switches_mxcsr(f)) continue;
        CAPTURE(f.name);
        ++checked;
        avx512_emulation |= f.name.find("avx512::(anonymous namespace)::BF16EmulatedPolicy") != std::string::npos;
        avx2_emulation |= f.name.find("avx2::(anonymous namespace)::BF16Policy") != std::string::npos ||
                          f.name.find("avx2::(anonymous namespace)::TiledBf16Tile") != std::string::npos;
        for (const std::string& v : mxcsr_violations(f)) FAIL_CHECK(v);
    }
    MESSAGE(checked << " MXCSR-switching functions checked");
    CHECK_MESSAGE(avx512_emulation, "no AVX-512 BF16 emulation tile switches MXCSR");
    CHECK_MESSAGE(avx2_emulation, "no AVX2 BF16 tile switches MXCSR");
}

TEST_CASE("mxcsr gate: an FMA after the restore, or a fold before it, is found") {
    const std::string listing =
        "0000000000001000 <tile>:\n"
        "    1000:\tvldmxcsr 0x4(%rsp)\n"
        "    1006:\tvfmadd231ps %zmm1,%zmm2,%zmm0\n"
        "    100c:\tjb     1006 <tile+0x6>\n"
        "    100e:\tvaddps %zmm0,%zmm3,%zmm3\n"
        "    1014:\tvldmxcsr 0x8(%rsp)\n"
        "    101a:\tvfmadd231ps %zmm1,%zmm2,%zmm0\n"
        "    1020:\tret\n";
    const std::vector<Function> functions = parse_listing(listing);
    REQUIRE(functions.size() == 1);
    const std::vector<std::string> v = mxcsr_violations(functions[0]);
    REQUIRE(v.size() == 2);
    CHECK(v[0].find("in FTZ|DAZ mode: 100e vaddps") == 0);
    CHECK(v[1].find("FMA in the caller's mode: 101a") == 0);
}

}  // namespace ember::test
