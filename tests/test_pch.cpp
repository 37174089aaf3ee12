// The translation unit that builds the precompiled header every test target
// reuses (shardtrain_test_pch in tests/CMakeLists.txt); it holds no code.
