#pragma once
// Host implementations of the kernels of tests/cuda/kernels.cu for the host-emulated
// CUDA driver (tests/cuda/emulated_driver.h), in libgexec_cuda_emulated_kernels.so,
// which links the emulated driver. A test loads it beside that driver (dlopen by path)
// and calls gexec_test_register_emulated_kernels, found with dlsym under that name.

#if defined(__GNUC__)
#define GEXEC_TEST_KERNELS_EXPORT __attribute__((visibility("default")))
#else
#define GEXEC_TEST_KERNELS_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Registers every kernel of kernels.cu with the emulated driver under its own name
   (replacing earlier registrations). Aborts with a message if the driver refuses one. */
GEXEC_TEST_KERNELS_EXPORT void gexec_test_register_emulated_kernels(void);

#ifdef __cplusplus
}
#endif
