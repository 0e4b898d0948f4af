// Writes the fuzz seed corpus: write_seed_corpus DIR
#include <fstream>
#include <iostream>

#include "seed_models.hpp"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: write_seed_corpus DIR\n";
        return 2;
    }
    for (const auto& [name, bytes] : ember::test::fuzz_seed_models()) {
        std::ofstream out(std::string(argv[1]) + "/" + name, std::ios::binary);
        out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        if (!out) {
            std::cerr << "cannot write " << name << "\n";
            return 1;
        }
    }
    return 0;
}
