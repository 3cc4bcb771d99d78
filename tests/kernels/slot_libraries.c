/*
 * Libraries whose context slots gexec must refuse to fill: one source, built once
 * per case (GEXEC_SLOT_CASE). Each case exports, under a slot's name, something
 * that writing a pointer into would crash the loader or corrupt memory.
 */

#include <stddef.h>

#define SL_EXPORT __attribute__((visibility("default")))

#if GEXEC_SLOT_CASE == 1
/* A function where __TVMAPISetLastError's pointer should be. */
SL_EXPORT void __TVMAPISetLastError(const char* message) { (void)message; }

#elif GEXEC_SLOT_CASE == 2
/* A 4-byte __TVMFuncCall: an 8-byte write would reach its neighbour. */
SL_EXPORT int __TVMFuncCall = 11;
SL_EXPORT int slot_neighbour = 22;

#elif GEXEC_SLOT_CASE == 3
/* A pointer-sized slot in read-only data (.rodata): writing it faults. */
SL_EXPORT void* const __TVMBackendAllocWorkspace = NULL;

#elif GEXEC_SLOT_CASE == 4
/* A pointer-sized slot the loader makes read-only after relocation (RELRO). */
static int slot_anchor;
SL_EXPORT void* const __TVMBackendFreeWorkspace = &slot_anchor;
SL_EXPORT int slot_anchor_value(void) { return slot_anchor; }

#elif GEXEC_SLOT_CASE == 5
/* A provider of a slot that another library (case 6) borrows. */
SL_EXPORT void* __TVMFuncCall = NULL;

#elif GEXEC_SLOT_CASE == 6
/* Defines no slot of its own but uses its dependency's (case 5). */
extern void* __TVMFuncCall;
SL_EXPORT void* slot_borrower_peek(void) { return __TVMFuncCall; }

#else
#error "GEXEC_SLOT_CASE must be 1 to 6"
#endif
