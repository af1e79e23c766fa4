# The fuzz targets' seeds under the sanitizer build (VLKV_SANITIZE, GCC: no libFuzzer): each
# target's LLVMFuzzerTestOneInput linked with a plain main() (seed_replay_main.cpp) and the
# layers it fuzzes, built with this build's ASan + UBSan, run by ctest on every file of its
# fuzz/corpus folder (tests FuzzSeeds.<target>, label fuzz_seeds). A find the fuzzers made and
# that was fixed keeps its input there as regress_*, so it stays fixed under `make test-sanitize`.
add_library(fuzz_seed_replay_main OBJECT ${CMAKE_SOURCE_DIR}/fuzz/seed_replay_main.cpp)
function(vlkv_seed_replay target)
  set(exe ${target}_seed_replay)
  add_executable(${exe} ${CMAKE_SOURCE_DIR}/fuzz/${target}_fuzzer.cpp $<TARGET_OBJECTS:fuzz_seed_replay_main>)
  target_link_libraries(${exe} PRIVATE ${ARGN})
  add_test(NAME FuzzSeeds.${target} COMMAND ${exe} ${CMAKE_SOURCE_DIR}/fuzz/corpus/${target})
  set_tests_properties(FuzzSeeds.${target} PROPERTIES LABELS fuzz_seeds TIMEOUT 300)
endfunction()

vlkv_seed_replay(gguf vlkv_gguf vlkv_base)
vlkv_seed_replay(image vlkv_vision)
vlkv_seed_replay(request vlkv_tools)
vlkv_seed_replay(kv_file vlkv_engine)  # which links the kv layer whole-archive
