// Compiled only to precompile the headers the tests share (tests/CMakeLists.txt).
