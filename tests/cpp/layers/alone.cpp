// tests/cpp/layers/alone.cpp -- an empty program: each layer is linked into it whole (tests.cmake)
int main() { return 0; }
