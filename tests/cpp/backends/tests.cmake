# tests/cpp/backends/tests.cmake -- the NVML tests load the scripted NVML double through dlopen
vramscope_use_nvml_double(test_backends)
