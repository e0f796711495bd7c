//===- Replay.cpp - Fuzz inputs through their targets, no libFuzzer -------===//
//
// memfit_fuzz_replay TARGET PATH...: every file under each PATH (sorted, so
// a failure is reproducible by name) goes through TARGET once. Used by the
// plain suite for the committed corpora and crash regressions, and by hand
// to check one input. A broken input traps; the name printed before it says
// which.
//
//===----------------------------------------------------------------------===//
#include "tests/fuzz/Targets.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace fs = std::filesystem;

int main(int argc, char **argv) {
  const memfit::fuzz::NamedTarget *target = nullptr;
  for (const auto &t : memfit::fuzz::kTargets)
    if (argc > 1 && std::strcmp(argv[1], t.name) == 0)
      target = &t;
  if (argc < 3 || !target) {
    std::fprintf(stderr, "usage: memfit_fuzz_replay TARGET PATH...\ntargets:");
    for (const auto &t : memfit::fuzz::kTargets)
      std::fprintf(stderr, " %s", t.name);
    std::fprintf(stderr, "\n");
    return 2;
  }
  std::vector<fs::path> files;
  for (int i = 2; i < argc; ++i) {
    std::error_code ec;
    if (fs::is_directory(argv[i], ec)) {
      // Dot files (.keep holds an empty directory in git) are not inputs.
      for (const auto &e : fs::recursive_directory_iterator(argv[i]))
        if (e.is_regular_file() &&
            e.path().filename().string().rfind('.', 0) != 0)
          files.push_back(e.path());
    } else if (fs::is_regular_file(argv[i], ec)) {
      files.push_back(argv[i]);
    } else {
      std::fprintf(stderr, "%s: no such file or directory\n", argv[i]);
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  for (const fs::path &p : files) {
    std::ifstream f(p, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)),
                      std::istreambuf_iterator<char>());
    std::fprintf(stderr, "%s\n", p.c_str());
    target->run(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
  }
  std::printf("%s: %zu inputs, no crash\n", target->name, files.size());
  return 0;
}
