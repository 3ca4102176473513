// The sanitizer build's canary (tests/CMakeLists.txt, scripts/test-sanitizers.sh): each mode does
// one thing a sanitizer must report. The tests pass only when the report appears, so a build in
// which -fsanitize did not reach the code fails instead of passing silently.
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: sanitizer_canary heap|signed\n");
    return 2;
  }
  if (std::strcmp(argv[1], "heap") == 0) {
    // The size comes from argc so the compiler cannot see the overrun; one element past the end.
    const int count = argc + 2;
    auto values = std::make_unique<int[]>(count);
    volatile int* read = values.get();
    std::printf("%d\n", read[count]);
    return 0;
  }
  if (std::strcmp(argv[1], "signed") == 0) {
    volatile int largest = INT_MAX;
    std::printf("%d\n", largest + argc);  // INT_MAX + 2 overflows
    return 0;
  }
  std::fprintf(stderr, "sanitizer_canary: unknown mode '%s'\n", argv[1]);
  return 2;
}
