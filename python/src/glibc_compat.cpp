// The wheel's binaries (the extension and gexec-run) bound to the oldest versions of the
// glibc functions that glibc 2.32-2.36 gave new ones, so that a wheel built on a newer
// glibc (Debian 12's 2.36) loads on glibc 2.28 (manylinux_2_28: RHEL 8, Debian 10, Ubuntu
// 20.04). The linker sends each reference to FUNCTION, libstdc++'s linked in ones too, to
// __wrap_FUNCTION (cmake/gexecGlibcCompat.cmake: LINKER:--wrap=FUNCTION for each below), which
// calls the version every glibc since 2.2.5 exports (.symver); glibc 2.34 and newer
// export it still, as the same function. Only on x86-64 (GLIBC_2.2.5 is that port's first
// version) with glibc; elsewhere the file compiles to nothing.
//
// What changed in which glibc, and what stands in for it here:
//   2.34  libpthread and libdl moved into libc, their functions under a new version:
//         the old versions, which resolve in libpthread.so.0 / libdl.so.2 before 2.34
//         (the binaries name both: cmake/gexecGlibcCompat.cmake);
//   2.33  stat, fstat, lstat, fstatat became functions (before: inline calls of __xstat
//         and its siblings with a version number): those, with _STAT_VER 1;
//   2.32  __libc_single_threaded, which libstdc++ reads to skip atomics in a process with
//         one thread: defined here as 0 (always use them, as before 2.32);
//   2.34  __libc_start_main (executables only): the new crt1.o passes no initialiser and
//         leaves the program's constructors to libc, which an older libc does not run;
//         gexec-run passes its own (_init and .init_array, what the old crt1.o's
//         __libc_csu_init did; .preinit_array is the dynamic linker's).
//   2.36  arc4random (libstdc++'s std::random_device): getrandom, from 2.25.

#include <cstddef>  // glibc's <features.h>, which defines __GLIBC__

#if defined(__x86_64__) && defined(__GLIBC__) && defined(__linux__)

#include <dlfcn.h>
#include <pthread.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>

#define GEXEC_GLIBC_OLD(name, version) __asm__(".symver gexec_glibc_" #name "," #name "@" version)

extern "C" {

// ---- libpthread (2.34) ----------------------------------------------------------------
int gexec_glibc_pthread_create(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
int gexec_glibc_pthread_join(pthread_t, void**);
int gexec_glibc_pthread_detach(pthread_t);
int gexec_glibc_pthread_once(pthread_once_t*, void (*)(void));
int gexec_glibc_pthread_key_create(pthread_key_t*, void (*)(void*));
int gexec_glibc_pthread_key_delete(pthread_key_t);
int gexec_glibc_pthread_setspecific(pthread_key_t, const void*);
void* gexec_glibc_pthread_getspecific(pthread_key_t);
int gexec_glibc_pthread_mutex_trylock(pthread_mutex_t*);
int gexec_glibc_pthread_attr_setstacksize(pthread_attr_t*, std::size_t);
int gexec_glibc_pthread_setaffinity_np(pthread_t, std::size_t, const cpu_set_t*);
int gexec_glibc_pthread_getaffinity_np(pthread_t, std::size_t, cpu_set_t*);
GEXEC_GLIBC_OLD(pthread_create, "GLIBC_2.2.5");
GEXEC_GLIBC_OLD(pthread_join, "GLIBC_2.2.5");
GEXEC_GLIBC_OLD(pthread_detach, "GLIBC_2.2.5");
GEXEC_GLIBC_OLD(pthread_once, "GLIBC_2.2.5");
GEXEC_GLIBC_OLD(pthread_key_create, "GLIBC_2.2.5");
GEXEC_GLIBC_OLD(pthread_key_delete, "GLIBC_2.2.5");
GEXEC_GLIBC_OLD(pthread_setspecific, "GLIBC_2.2.5");
GEXEC_GLIBC_OLD(pthread_getspecific, "GLIBC_2.2.5");
GEXEC_GLIBC_OLD(pthread_mutex_trylock, "GLIBC_2.2.5");
GEXEC_GLIBC_OLD(pthread_attr_setstacksize, "GLIBC_2.2.5");
GEXEC_GLIBC_OLD(pthread_setaffinity_np, "GLIBC_2.3.4");
GEXEC_GLIBC_OLD(pthread_getaffinity_np, "GLIBC_2.3.4");

int __wrap_pthread_create(pthread_t* t, const pthread_attr_t* a, void* (*f)(void*), void* arg) {
  return gexec_glibc_pthread_create(t, a, f, arg);
}
int __wrap_pthread_join(pthread_t t, void** r) { return gexec_glibc_pthread_join(t, r); }
int __wrap_pthread_detach(pthread_t t) { return gexec_glibc_pthread_detach(t); }
int __wrap_pthread_once(pthread_once_t* o, void (*f)(void)) { return gexec_glibc_pthread_once(o, f); }
int __wrap_pthread_key_create(pthread_key_t* k, void (*d)(void*)) { return gexec_glibc_pthread_key_create(k, d); }
int __wrap_pthread_key_delete(pthread_key_t k) { return gexec_glibc_pthread_key_delete(k); }
int __wrap_pthread_setspecific(pthread_key_t k, const void* v) { return gexec_glibc_pthread_setspecific(k, v); }
void* __wrap_pthread_getspecific(pthread_key_t k) { return gexec_glibc_pthread_getspecific(k); }
int __wrap_pthread_mutex_trylock(pthread_mutex_t* m) { return gexec_glibc_pthread_mutex_trylock(m); }
int __wrap_pthread_attr_setstacksize(pthread_attr_t* a, std::size_t s) { return gexec_glibc_pthread_attr_setstacksize(a, s); }
int __wrap_pthread_setaffinity_np(pthread_t t, std::size_t n, const cpu_set_t* s) { return gexec_glibc_pthread_setaffinity_np(t, n, s); }
int __wrap_pthread_getaffinity_np(pthread_t t, std::size_t n, cpu_set_t* s) { return gexec_glibc_pthread_getaffinity_np(t, n, s); }

// ---- libdl (2.34) ---------------------------------------------------------------------
void* gexec_glibc_dlopen(const char*, int);
int gexec_glibc_dlclose(void*);
void* gexec_glibc_dlsym(void*, const char*);
char* gexec_glibc_dlerror(void);
int gexec_glibc_dladdr(const void*, Dl_info*);
int gexec_glibc_dlinfo(void*, int, void*);
int gexec_glibc_dladdr1(const void*, Dl_info*, void**, int);
GEXEC_GLIBC_OLD(dlopen, "GLIBC_2.2.5");
GEXEC_GLIBC_OLD(dlclose, "GLIBC_2.2.5");
GEXEC_GLIBC_OLD(dlsym, "GLIBC_2.2.5");
GEXEC_GLIBC_OLD(dlerror, "GLIBC_2.2.5");
GEXEC_GLIBC_OLD(dladdr, "GLIBC_2.2.5");
GEXEC_GLIBC_OLD(dlinfo, "GLIBC_2.3.3");
GEXEC_GLIBC_OLD(dladdr1, "GLIBC_2.3.3");

void* __wrap_dlopen(const char* f, int flags) { return gexec_glibc_dlopen(f, flags); }
int __wrap_dlclose(void* h) { return gexec_glibc_dlclose(h); }
void* __wrap_dlsym(void* h, const char* s) { return gexec_glibc_dlsym(h, s); }
char* __wrap_dlerror(void) { return gexec_glibc_dlerror(); }
int __wrap_dladdr(const void* a, Dl_info* i) { return gexec_glibc_dladdr(a, i); }
int __wrap_dlinfo(void* h, int r, void* a) { return gexec_glibc_dlinfo(h, r, a); }
int __wrap_dladdr1(const void* a, Dl_info* i, void** e, int f) { return gexec_glibc_dladdr1(a, i, e, f); }

// ---- stat (2.33) ----------------------------------------------------------------------
// x86-64's struct stat and struct stat64 are one layout, _STAT_VER_LINUX (1).
int gexec_glibc___xstat(int, const char*, struct stat*);
int gexec_glibc___lxstat(int, const char*, struct stat*);
int gexec_glibc___fxstat(int, int, struct stat*);
int gexec_glibc___fxstatat(int, int, const char*, struct stat*, int);
GEXEC_GLIBC_OLD(__xstat, "GLIBC_2.2.5");
GEXEC_GLIBC_OLD(__lxstat, "GLIBC_2.2.5");
GEXEC_GLIBC_OLD(__fxstat, "GLIBC_2.2.5");
GEXEC_GLIBC_OLD(__fxstatat, "GLIBC_2.4");

int __wrap_stat(const char* p, struct stat* s) { return gexec_glibc___xstat(1, p, s); }
int __wrap_lstat(const char* p, struct stat* s) { return gexec_glibc___lxstat(1, p, s); }
int __wrap_fstat(int fd, struct stat* s) { return gexec_glibc___fxstat(1, fd, s); }
int __wrap_fstatat(int dir, const char* p, struct stat* s, int flags) { return gexec_glibc___fxstatat(1, dir, p, s, flags); }
int __wrap_stat64(const char* p, struct stat* s) { return gexec_glibc___xstat(1, p, s); }
int __wrap_lstat64(const char* p, struct stat* s) { return gexec_glibc___lxstat(1, p, s); }
int __wrap_fstat64(int fd, struct stat* s) { return gexec_glibc___fxstat(1, fd, s); }
int __wrap_fstatat64(int dir, const char* p, struct stat* s, int flags) { return gexec_glibc___fxstatat(1, dir, p, s, flags); }

// ---- __libc_single_threaded (2.32) ----------------------------------------------------
// Ours, not libc's: 0 (the process may have threads), so shared_ptr and the other users
// take their atomic paths always, as they did before glibc 2.32. Hidden: only the
// extension's and gexec-run's own code (libstdc++'s linked in) reads it.
__attribute__((visibility("hidden"))) char __libc_single_threaded = 0;

// ---- arc4random (2.36) ----------------------------------------------------------------
std::uint32_t __wrap_arc4random(void) {
  std::uint32_t v = 0;
  for (;;) {
    ssize_t n = getrandom(&v, sizeof v, 0);
    if (n == static_cast<ssize_t>(sizeof v)) return v;
    if (n < 0 && errno != EINTR) return v;  // no entropy source at all: std::random_device's caller sees zeros
  }
}

// ---- __libc_start_main (2.34; gexec-run) ----------------------------------------------
using gexec_glibc_main_fn = int (*)(int, char**, char**);
int gexec_glibc___libc_start_main(gexec_glibc_main_fn main, int argc, char** argv, void (*init)(int, char**, char**),
                                  void (*fini)(void), void (*rtld_fini)(void), void* stack_end);
GEXEC_GLIBC_OLD(__libc_start_main, "GLIBC_2.2.5");

// Defined by the linker in an executable (weak: the extension has none and never calls this).
extern void (*__init_array_start[])(int, char**, char**) __attribute__((weak, visibility("hidden")));
extern void (*__init_array_end[])(int, char**, char**) __attribute__((weak, visibility("hidden")));
void _init(void) __attribute__((weak));

static void gexec_glibc_run_initialisers(int argc, char** argv, char** envp) {
  if (_init) _init();
  const std::size_t n = static_cast<std::size_t>(__init_array_end - __init_array_start);
  for (std::size_t i = 0; i < n; ++i) __init_array_start[i](argc, argv, envp);
}

int __wrap___libc_start_main(gexec_glibc_main_fn main, int argc, char** argv, void (*init)(int, char**, char**),
                             void (*fini)(void), void (*rtld_fini)(void), void* stack_end) {
  return gexec_glibc___libc_start_main(main, argc, argv, init != nullptr ? init : gexec_glibc_run_initialisers, fini,
                                       rtld_fini, stack_end);
}

}  // extern "C"

#endif
