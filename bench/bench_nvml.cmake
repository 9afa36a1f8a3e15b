# bench/bench_nvml.cmake -- bench_nvml samples through the scripted NVML double (or the real NVML)
include(${PROJECT_SOURCE_DIR}/tests/cpp/nvml_double/nvml_double.cmake)
vramscope_use_nvml_double(bench_nvml)
